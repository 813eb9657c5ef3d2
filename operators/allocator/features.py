"""Feature gates that change what the allocator does, spelled as upstream's components
spell them (`--feature-gates DRAConsumableCapacity=false,...`).

The defaults are kube-scheduler's in the newest release draco supports (1.37). A gate
that is off makes a claim that needs it an error, as upstream's allocator reports it,
rather than a claim silently allocated without the field.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields, replace

from operators.allocator.inventory import Inventory
from operators.allocator.requests import AllocationError, claim_label
from operators.model import ResourceClaim


@dataclass(frozen=True, slots=True)
class FeatureGates:
    """One field per gate, named as upstream names the gate (see `GATE_NAMES`)."""

    admin_access: bool = True  # GA and locked on in 1.36
    consumable_capacity: bool = True  # beta, on since 1.36
    device_binding_conditions: bool = True  # beta, on since 1.36
    device_taints: bool = True  # GA in 1.37
    # beta in 1.37 but on only from compatibility version 1.37: a 1.37 kube-scheduler
    # (compatibility version 1.36 by default) runs with it off, as its differential shows
    fractional_capacity_range: bool = False
    partitionable_devices: bool = True  # beta, on since 1.36
    prioritized_list: bool = True  # GA and locked on in 1.37


GATE_NAMES: dict[str, str] = {
    "DRAAdminAccess": "admin_access",
    "DRAConsumableCapacity": "consumable_capacity",
    "DRADeviceBindingConditions": "device_binding_conditions",
    "DRADeviceTaints": "device_taints",
    "DRAFractionalCapacityRange": "fractional_capacity_range",
    "DRAPartitionableDevices": "partitionable_devices",
    "DRAPrioritizedList": "prioritized_list",
}
# Gates of 1.37 that draco knows and does not implement: turning one on is refused
# (draco would otherwise allocate as if it were off), turning it off is accepted.
NOT_IMPLEMENTED = frozenset({
    "DRADerivedAttributes", "DRADeviceCompatibilityGroups", "DRAListTypeAttributes",
    "DRAOptionalNodeOperations", "DRAPartitionableDevicesType",
})
# Gates kube-scheduler knows that change nothing in allocation: accepted either way.
NO_EFFECT = frozenset({"DRAResourceClaimDeviceStatus", "DRADeviceTaintRules"})
DEFAULT_GATES = FeatureGates()
assert set(GATE_NAMES.values()) == {f.name for f in fields(FeatureGates)}


def parse_feature_gates(text: str, base: FeatureGates = DEFAULT_GATES) -> FeatureGates:
    """`A=true,B=false` over BASE. Unknown gates and values are errors (ValueError), as
    they are for kube-scheduler."""
    changes: dict[str, bool] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip().lower()
        if not sep or value not in ("true", "false"):
            raise ValueError(f"{item!r}: expected NAME=true or NAME=false")
        if name in NOT_IMPLEMENTED:
            if value == "true":
                raise ValueError(f"{name}: draco does not implement this feature (alpha and off "
                                 "by default in every release draco supports)")
            continue
        if name in NO_EFFECT:
            continue
        if name not in GATE_NAMES:
            raise ValueError(f"unrecognized feature gate: {name}")
        changes[GATE_NAMES[name]] = value == "true"
    return replace(base, **changes)


def check_claims(claims: Iterable[ResourceClaim], gates: FeatureGates) -> None:
    """AllocationError for the first request that needs a gate that is off."""
    for claim in claims:
        for request in claim.requests:
            alternatives = request.alternatives()
            if request.exactly is None and not gates.prioritized_list:
                raise AllocationError(f"claim {claim_label(claim)}, request {request.name}: "
                                      "has subrequests, but the DRAPrioritizedList feature "
                                      "is disabled")
            for name, spec in alternatives:
                shown = f"subrequest {name.partition('/')[2]}" if "/" in name else \
                    f"request {name}"
                if spec.admin_access and not gates.admin_access:
                    raise AllocationError(f"claim {claim_label(claim)}, {shown}: admin access "
                                          "is requested, but the feature is disabled")
                if spec.capacity and not gates.consumable_capacity:
                    raise AllocationError(f"claim {claim_label(claim)}, {shown}: has capacity "
                                          "requests, but the DRAConsumableCapacity feature is "
                                          "disabled")


def gated_inventory(inventory: Inventory, gates: FeatureGates) -> Inventory:
    """The devices as an allocator with GATES sees them: without DRADeviceTaints taints
    do not count; without DRADeviceBindingConditions devices with binding conditions,
    and without DRAPartitionableDevices devices consuming counters and slices with
    per-device node selection, are never allocated (upstream's allocator)."""
    if gates.device_taints and gates.device_binding_conditions and gates.partitionable_devices:
        return inventory
    pools = []
    for pool in inventory:
        slices = []
        for sl in pool.slices:
            if sl.per_device and not gates.partitionable_devices:
                continue
            devices = tuple(
                d if gates.device_taints or not d.taints else replace(d, taints=())
                for d in sl.devices
                if (gates.device_binding_conditions or not d.binding_conditions)
                and (gates.partitionable_devices or not d.consumes))
            slices.append(replace(sl, devices=devices))
        pools.append(replace(pool, slices=tuple(slices)))
    return tuple(pools)
