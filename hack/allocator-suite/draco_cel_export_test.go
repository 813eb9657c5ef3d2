// Upstream's CEL table (TestCEL's testcases in k8s.io/dynamic-resource-allocation/cel)
// as JSON, for draco's own runner: hack/upstream_allocator.py places this file into a
// scratch copy of the module's cel package (the table is unexported) and runs it with
// DRACO_CEL_EXPORT naming the output file. It evaluates nothing itself.
package cel

import (
	"encoding/json"
	"os"
	"sort"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
)

type dracoCELCase struct {
	Name                     string                                                     `json:"name"`
	EnvType                  *string                                                    `json:"envType"`
	Features                 *Features                                                  `json:"features"`
	Expression               string                                                     `json:"expression"`
	Driver                   string                                                     `json:"driver"`
	AllowMultipleAllocations *bool                                                      `json:"allowMultipleAllocations"`
	Attributes               map[resourceapi.QualifiedName]resourceapi.DeviceAttribute `json:"attributes"`
	Capacity                 map[resourceapi.QualifiedName]resourceapi.DeviceCapacity  `json:"capacity"`
	ExpectCompileError       string                                                     `json:"expectCompileError"`
	ExpectMatchError         string                                                     `json:"expectMatchError"`
	ExpectMatch              bool                                                       `json:"expectMatch"`
}

func TestDracoExport(t *testing.T) {
	path := os.Getenv("DRACO_CEL_EXPORT")
	if path == "" {
		t.Skip("DRACO_CEL_EXPORT is not set")
	}
	names := make([]string, 0, len(testcases))
	for name := range testcases {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]dracoCELCase, 0, len(names))
	for _, name := range names {
		tc := testcases[name]
		c := dracoCELCase{
			Name: name, Features: tc.features, Expression: tc.expression, Driver: tc.driver,
			AllowMultipleAllocations: tc.allowMultipleAllocations, Attributes: tc.attributes,
			Capacity: tc.capacity, ExpectCompileError: tc.expectCompileError,
			ExpectMatchError: tc.expectMatchError, ExpectMatch: tc.expectMatch,
		}
		if tc.envType != nil {
			envType := string(*tc.envType)
			c.EnvType = &envType
		}
		out = append(out, c)
	}
	data, err := json.MarshalIndent(out, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}
