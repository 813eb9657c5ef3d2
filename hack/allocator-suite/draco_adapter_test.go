// draco's adapter for upstream's allocator test suite (allocatortesting).
//
// hack/upstream_allocator.py places this file into a scratch copy of
// k8s.io/dynamic-resource-allocation, as structured/internal/draco, because
// allocatortesting is an internal package. It is never built inside draco's tree.
//
// Every Allocate call becomes one request to `draco allocate --serve` (one process for
// the whole run): the node, classes, slices, claims, the devices already allocated and
// the feature gates of the test case, as API objects. The answer's allocations come
// back in the API's shape and are compared by upstream's own assertions.
//
// What differs between the module's versions (the allocator constructor's types, the
// allocated state's) is in one compat file beside this one, chosen by
// hack/upstream_allocator.py: compat_v036_test.go up to 0.37, compat_v038_test.go from
// 0.38. DRACO_KUBERNETES_VERSION, when set, is the release draco answers as.
package draco

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/structured/internal"
	"k8s.io/dynamic-resource-allocation/structured/internal/allocatortesting"
)

// unsupported names the Features fields of alpha gates draco does not implement; the
// suite itself skips the cases that need them.
var unsupported = map[string]bool{
	"CompatibilityGroups":    true,
	"DerivedAttributes":      true,
	"ListTypeAttributes":     true,
	"OptionalNodeOperations": true,
}

func supported() internal.Features {
	var f internal.Features
	v := reflect.ValueOf(&f).Elem()
	for i := 0; i < v.NumField(); i++ {
		if v.Field(i).Kind() == reflect.Bool && !unsupported[v.Type().Field(i).Name] {
			v.Field(i).SetBool(true)
		}
	}
	return f
}

// gates spells the test case's features as --feature-gates does: each gate the
// version knows, on or off.
func gates(f internal.Features) string {
	var all internal.Features
	v := reflect.ValueOf(&all).Elem()
	for i := 0; i < v.NumField(); i++ {
		if v.Field(i).Kind() == reflect.Bool {
			v.Field(i).SetBool(true)
		}
	}
	on := f.Set()
	var items []string
	for name := range all.Set() {
		for _, gate := range strings.Split(name, "+") {
			if unsupported[fieldOf(gate)] {
				continue
			}
			items = append(items, fmt.Sprintf("%s=%t", gate, on.Has(name)))
		}
	}
	sort.Strings(items)
	return strings.Join(items, ",")
}

func fieldOf(gate string) string {
	switch gate {
	case "DRADeviceCompatibilityGroups":
		return "CompatibilityGroups"
	case "DRADerivedAttributes":
		return "DerivedAttributes"
	case "DRAListTypeAttributes":
		return "ListTypeAttributes"
	case "DRAOptionalNodeOperations":
		return "OptionalNodeOperations"
	}
	return ""
}

type service struct {
	mu  sync.Mutex
	cmd *exec.Cmd
	in  *bufio.Writer
	out *bufio.Reader
	err error
}

var (
	once sync.Once
	srv  service
)

func start() {
	bin := os.Getenv("DRACO_BIN")
	if bin == "" {
		bin = "draco"
	}
	args := []string{"allocate", "--serve"}
	if release := os.Getenv("DRACO_KUBERNETES_VERSION"); release != "" {
		args = append(args, "--kubernetes-version", release)
	}
	srv.cmd = exec.Command(bin, args...)
	srv.cmd.Stderr = os.Stderr
	stdin, err := srv.cmd.StdinPipe()
	if err != nil {
		srv.err = err
		return
	}
	stdout, err := srv.cmd.StdoutPipe()
	if err != nil {
		srv.err = err
		return
	}
	if err := srv.cmd.Start(); err != nil {
		srv.err = fmt.Errorf("starting %s allocate --serve: %w", bin, err)
		return
	}
	srv.in = bufio.NewWriter(stdin)
	srv.out = bufio.NewReaderSize(stdout, 1<<20)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if srv.cmd != nil && srv.cmd.Process != nil {
		_ = srv.cmd.Process.Kill()
		_ = srv.cmd.Wait()
	}
	os.Exit(code)
}

type deviceRef struct {
	Driver   string            `json:"driver"`
	Pool     string            `json:"pool"`
	Device   string            `json:"device"`
	Capacity map[string]string `json:"capacity,omitempty"`
}

type request struct {
	Objects      []any       `json:"objects"`
	Claims       []string    `json:"claims"`
	Node         *string     `json:"node"`
	InUse        []deviceRef `json:"inUse"`
	Consumed     []deviceRef `json:"consumed"`
	FeatureGates string      `json:"featureGates"`
}

type reply struct {
	Status      string                         `json:"status"`
	Reason      string                         `json:"reason"`
	Allocations []resourceapi.AllocationResult `json:"allocations"`
}

func (s *service) ask(req request) (reply, error) {
	once.Do(start)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return reply{}, s.err
	}
	line, err := json.Marshal(req)
	if err != nil {
		return reply{}, err
	}
	if _, err := s.in.Write(append(line, '\n')); err != nil {
		return reply{}, fmt.Errorf("draco allocate --serve: %w", err)
	}
	if err := s.in.Flush(); err != nil {
		return reply{}, fmt.Errorf("draco allocate --serve: %w", err)
	}
	answer, err := s.out.ReadBytes('\n')
	if err != nil {
		s.err = fmt.Errorf("draco allocate --serve ended: %w", err)
		return reply{}, s.err
	}
	if trace := os.Getenv("DRACO_SUITE_TRACE"); trace != "" { // every exchange, for debugging
		if f, err := os.OpenFile(trace, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			_, _ = f.Write(append(append(line, '\n'), answer...))
			_ = f.Close()
		}
	}
	var r reply
	if err := json.Unmarshal(answer, &r); err != nil {
		return reply{}, fmt.Errorf("draco's answer %q: %w", answer, err)
	}
	return r, nil
}

type allocator struct {
	features internal.Features
	inUse    []deviceRef // devices other claims hold whole
	consumed []deviceRef // what other claims' shares consume, per device
	classes  internal.DeviceClassLister
	slices   []*resourceapi.ResourceSlice
}

func (a *allocator) Channel() internal.AllocatorChannel { return "draco" }

func (a *allocator) Allocate(ctx context.Context, node *v1.Node, claims []*resourceapi.ResourceClaim) ([]resourceapi.AllocationResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("allocation interrupted: %w", err)
	}
	req := request{FeatureGates: gates(a.features)}
	if node != nil {
		n := node.DeepCopy()
		n.APIVersion, n.Kind = "v1", "Node"
		req.Objects = append(req.Objects, n)
		req.Node = &n.Name
	}
	classes, err := a.classes.List()
	if err != nil {
		return nil, err
	}
	for _, c := range classes {
		c := c.DeepCopy()
		c.APIVersion, c.Kind = "resource.k8s.io/v1", "DeviceClass"
		req.Objects = append(req.Objects, c)
	}
	for _, s := range a.slices {
		s := s.DeepCopy()
		s.APIVersion, s.Kind = "resource.k8s.io/v1", "ResourceSlice"
		req.Objects = append(req.Objects, s)
	}
	seen := map[string]bool{}
	for i, c := range claims {
		c := c.DeepCopy()
		if seen[c.Namespace+"/"+c.Name] { // a test may pass two claims of one name
			c.Name = fmt.Sprintf("%s.%d", c.Name, i)
		}
		seen[c.Namespace+"/"+c.Name] = true
		c.APIVersion, c.Kind = "resource.k8s.io/v1", "ResourceClaim"
		req.Objects = append(req.Objects, c)
		if c.Namespace != "" {
			req.Claims = append(req.Claims, c.Namespace+"/"+c.Name)
		} else {
			req.Claims = append(req.Claims, c.Name)
		}
	}
	req.InUse = a.inUse
	req.Consumed = a.consumed
	r, err := srv.ask(req)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("allocation interrupted: %w", err)
	}
	switch r.Status {
	case "allocated":
		for i := range r.Allocations {
			normalize(&r.Allocations[i], claims[i], a.slices)
		}
		return r.Allocations, nil
	case "unsatisfiable":
		return nil, nil
	default:
		return nil, fmt.Errorf("draco: %s: %s", r.Status, r.Reason)
	}
}

// sources are the quantities a consumed capacity can have been taken from: the
// request's, the device's capacity and its request policy's values. JSON carries only
// a value; upstream's results keep the Go form (format, cached text) of their source.
func sources(claim *resourceapi.ResourceClaim, slices []*resourceapi.ResourceSlice,
	r *resourceapi.DeviceRequestAllocationResult, name resourceapi.QualifiedName) (*resource.Quantity, []resource.Quantity) {
	var request *resource.Quantity
	var out []resource.Quantity
	base, sub, _ := strings.Cut(r.Request, "/")
	for _, req := range claim.Spec.Devices.Requests {
		if req.Name != base {
			continue
		}
		var capacity *resourceapi.CapacityRequirements
		if req.Exactly != nil && sub == "" {
			capacity = req.Exactly.Capacity
		}
		for _, s := range req.FirstAvailable {
			if s.Name == sub {
				capacity = s.Capacity
			}
		}
		if capacity != nil {
			if q, ok := capacity.Requests[name]; ok {
				request = &q
			}
		}
	}
	for _, s := range slices {
		if s.Spec.Driver != r.Driver || s.Spec.Pool.Name != r.Pool {
			continue
		}
		for _, d := range s.Spec.Devices {
			c, ok := d.Capacity[name]
			if !ok || d.Name != r.Device {
				continue
			}
			if p := c.RequestPolicy; p != nil && p.Default != nil {
				out = append(out, *p.Default)
			}
			out = append(out, c.Value)
		}
	}
	return request, out
}

// restore gives a consumed capacity read from JSON the Go form upstream's would have.
// With a request, upstream takes the request over (or rounds it up: computed, in the
// request's format); without one, the policy's default or the device's capacity.
func restore(q resource.Quantity, request *resource.Quantity, device []resource.Quantity) resource.Quantity {
	computed := func(format resource.Format) resource.Quantity {
		q.Add(resource.Quantity{Format: q.Format})
		q.Format = format
		return q
	}
	if request != nil {
		if request.Cmp(q) == 0 {
			return request.DeepCopy()
		}
		return computed(request.Format)
	}
	for _, src := range device {
		if src.Cmp(q) == 0 {
			return src.DeepCopy()
		}
	}
	if len(device) > 0 {
		return computed(device[0].Format)
	}
	return q
}

func deviceOf(slices []*resourceapi.ResourceSlice, r *resourceapi.DeviceRequestAllocationResult) *resourceapi.Device {
	for _, s := range slices {
		if s.Spec.Driver != r.Driver || s.Spec.Pool.Name != r.Pool {
			continue
		}
		for i := range s.Spec.Devices {
			if s.Spec.Devices[i].Name == r.Device {
				return &s.Spec.Devices[i]
			}
		}
	}
	return nil
}

// normalize gives absent fields the Go zero values upstream's expectations use.
func normalize(a *resourceapi.AllocationResult, claim *resourceapi.ResourceClaim, slices []*resourceapi.ResourceSlice) {
	if len(a.Devices.Config) == 0 {
		a.Devices.Config = nil
	}
	for i := range a.Devices.Results {
		r := &a.Devices.Results[i]
		if r.AdminAccess != nil && !*r.AdminAccess {
			r.AdminAccess = nil
		}
		if len(r.Tolerations) == 0 {
			r.Tolerations = nil
		}
		if len(r.BindingConditions) == 0 {
			r.BindingConditions = nil
		}
		if len(r.BindingFailureConditions) == 0 {
			r.BindingFailureConditions = nil
		}
		if d := deviceOf(slices, r); d != nil && r.BindingConditions != nil {
			// JSON cannot tell an empty list from none: the device's own
			r.BindingFailureConditions = d.BindingFailureConditions
		}
		if len(r.ConsumedCapacity) == 0 {
			r.ConsumedCapacity = nil
		}
		for name, q := range r.ConsumedCapacity {
			request, device := sources(claim, slices, r, name)
			r.ConsumedCapacity[name] = restore(q, request, device)
		}
	}
}

// device names one device of the allocated state.
type device struct{ Driver, Pool, Device string }

// shares merges the devices that carry shares with what those shares consume, each
// device named once.
func shares(devices []device, capacity map[device]map[string]string) []deviceRef {
	merged := map[device]map[string]string{}
	for _, d := range devices {
		merged[d] = map[string]string{}
	}
	for d, c := range capacity {
		if merged[d] == nil {
			merged[d] = map[string]string{}
		}
		for name, q := range c {
			merged[d][name] = q
		}
	}
	out := make([]deviceRef, 0, len(merged))
	for d, c := range merged {
		out = append(out, deviceRef{Driver: d.Driver, Pool: d.Pool, Device: d.Device, Capacity: c})
	}
	return out
}

func init() {
	// Cases that expect an error are compared on the verdict (an error), not on
	// upstream's wording; upstream's step counts are not compared (draco searches
	// differently). Both hooks are added by hack/upstream_allocator.py.
	allocatortesting.DracoErrorVerdictOnly = true
	allocatortesting.DracoIgnoreStepCounts = true
}

func TestAllocator(t *testing.T) {
	allocatortesting.TestAllocator(t, supported(), newAllocator)
}

func TestLexicographicalAllocator(t *testing.T) {
	allocatortesting.TestLexicographicalAllocator(t, supported(), newAllocator)
}
