// The parts of draco's adapter that fit k8s.io/dynamic-resource-allocation 0.36 and
// 0.37: the allocator constructor takes the API's ResourceSlices, and the allocated
// state names shared devices with their share IDs.
package draco

import (
	"context"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured/internal"
)

func newAllocator(ctx context.Context, features internal.Features, state internal.AllocatedState,
	classes internal.DeviceClassLister, slices []*resourceapi.ResourceSlice, _ *cel.Cache) (internal.Allocator, error) {
	a := &allocator{features: features, classes: classes, slices: slices}
	for id := range state.AllocatedDevices {
		a.inUse = append(a.inUse, deviceRef{Driver: id.Driver.String(), Pool: id.Pool.String(), Device: id.Device.String()})
	}
	var shared []device
	for id := range state.AllocatedSharedDeviceIDs {
		d := id.GetDeviceID()
		shared = append(shared, device{d.Driver.String(), d.Pool.String(), d.Device.String()})
	}
	capacity := map[device]map[string]string{}
	for id, consumed := range state.AggregatedCapacity {
		d := device{id.Driver.String(), id.Pool.String(), id.Device.String()}
		capacity[d] = map[string]string{}
		for name, q := range consumed {
			if q != nil {
				capacity[d][string(name)] = q.String()
			}
		}
	}
	a.consumed = shares(shared, capacity)
	return a, nil
}
