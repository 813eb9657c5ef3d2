"""draco's shared in-memory state (layer 3: pure, no kopf, no I/O).

    tracker = Tracker(clock=lambda: datetime.now(UTC))
    tracker.register_overlay(overlay)            # DeviceTaintRules, ResourceSlicePatches
    unsubscribe = tracker.subscribe(callback)    # callback(change: Change)
    change = tracker.apply({"type": "ADDED", "object": dict_or_parsed})
    with tracker.batch(): ...                    # one notification for many applies

Queries: device(id) / devices(include_unpublished=False) / device_ids() /
published_device(id) / pool_devices(pool_id) / pool_device_ids(pool_id) / pool(pool_id)
/ pools() / driver_pools(driver) / resource_slice(name) / device_class(name) /
claim(key) / pod(key) / allocations(id) / allocated_device_ids() / is_allocated(id) /
claim_devices(key) / claims_of_pod(key) / pods_of_claim(key); `stats` counts work done;
`errors` holds the objects that could not be parsed.

Overlay protocol: see `operators.tracker.overlay`.

The package reads bottom-up; each module imports only those below it (an import-linter
`layers` contract keeps it so):

    change.py        what one apply changed (Change, ChangeBuilder)
    overlay.py       the overlay interface and TrackerHandle, the tracker as overlays see it
    views.py         the read-only results: DeviceView + compose, PoolStatus, Allocation
    stats.py         work counters
    pools.py         slices and pools (PoolState, SliceIndex)
    usage.py         claims, pods and allocations (UsageIndex)
    tracker.py       the Tracker: routing events, settling published devices, composing views
    taint_rules.py   the DeviceTaintRule overlay       } overlays know only the interface,
    slice_patches/   the ResourceSlicePatch overlay    } never the Tracker class
"""

from operators.tracker.change import Change
from operators.tracker.overlay import (
    AttributeOverride,
    CapacityOverride,
    DeviceContribution,
    EventType,
    Overlay,
    OverlayBase,
    TrackerHandle,
)
from operators.tracker.tracker import BUILTIN_KINDS, Subscriber, Tracker, TrackerStats
from operators.tracker.views import Allocation, DeviceView, PoolStatus, compose

__all__ = [
    "BUILTIN_KINDS",
    "Allocation",
    "AttributeOverride",
    "CapacityOverride",
    "Change",
    "DeviceContribution",
    "DeviceView",
    "EventType",
    "Overlay",
    "OverlayBase",
    "PoolStatus",
    "Subscriber",
    "Tracker",
    "TrackerHandle",
    "TrackerStats",
    "compose",
]
