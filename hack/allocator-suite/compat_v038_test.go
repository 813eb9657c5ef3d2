// The parts of draco's adapter that fit k8s.io/dynamic-resource-allocation 0.38: the
// allocator constructor takes the module's own ResourceSlice type (dynamic-resource-
// allocation/api, with interned strings and attributes already resolved), the
// allocated state names shared devices by their device ID, and consumed capacity is
// keyed by a FullyQualifiedName struct.
//
// draco is asked with API objects, as an API server stores them. The module's type
// cannot always be turned back into that: an attribute value it cannot represent (a
// version beyond uint64) is gone, and a device publishing a name both short and
// qualified keeps only one. hack/upstream_allocator.py therefore adds a hook to the
// suite's scratch copy that remembers, for each slice it converts, the API object it
// came from (DracoOriginals); the conversion back is only the fallback.
package draco

import (
	"context"

	resourceapi "k8s.io/api/resource/v1"
	draapi "k8s.io/dynamic-resource-allocation/api"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured/internal"
	"k8s.io/dynamic-resource-allocation/structured/internal/allocatortesting"
)

func v1Slices(in []*draapi.ResourceSlice) ([]*resourceapi.ResourceSlice, error) {
	out := make([]*resourceapi.ResourceSlice, len(in))
	for i, s := range in {
		if original, ok := allocatortesting.DracoOriginals.Load(s); ok {
			out[i] = original.(*resourceapi.ResourceSlice)
			continue
		}
		var o resourceapi.ResourceSlice
		if err := draapi.Convert_api_ResourceSlice_To_v1_ResourceSlice(s, &o, nil); err != nil {
			return nil, err
		}
		out[i] = &o
	}
	return out, nil
}

func newAllocator(ctx context.Context, features internal.Features, state internal.AllocatedState,
	classes internal.DeviceClassLister, slices []*draapi.ResourceSlice, _ *cel.Cache) (internal.Allocator, error) {
	api, err := v1Slices(slices)
	if err != nil {
		return nil, err
	}
	a := &allocator{features: features, classes: classes, slices: api}
	for id := range state.AllocatedDevices {
		a.inUse = append(a.inUse, deviceRef{Driver: id.Driver.String(), Pool: id.Pool.String(), Device: id.Device.String()})
	}
	var shared []device
	for id := range state.AllocatedSharedDeviceIDs {
		shared = append(shared, device{id.Driver.String(), id.Pool.String(), id.Device.String()})
	}
	capacity := map[device]map[string]string{}
	for id, consumed := range state.AggregatedCapacity {
		d := device{id.Driver.String(), id.Pool.String(), id.Device.String()}
		capacity[d] = map[string]string{}
		for name, q := range consumed {
			if q != nil {
				capacity[d][name.String()] = q.String()
			}
		}
	}
	a.consumed = shares(shared, capacity)
	return a, nil
}
