"""Feature gates that change what the allocator does, spelled as upstream's components
spell them (`--feature-gates DRAConsumableCapacity=false,...`), and the behaviour of
the release whose kube-scheduler draco answers as (`Semantics`, where releases differ
and no gate decides; `operators.allocator.releases` has one per minor).

The defaults are kube-scheduler 1.37's, the release draco anchors on. A gate that is
off makes a claim that needs it an error, as upstream's allocator reports it, rather
than a claim silently allocated without the field.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields, replace
from typing import Any

from operators.allocator.inventory import Candidate, Inventory
from operators.allocator.requests import AllocationError, claim_label
from operators.model import ResourceClaim


@dataclass(frozen=True, slots=True)
class Semantics:
    """How one release's allocator behaves where releases differ without a gate. The
    defaults are 1.37's; each switch is named for what a later release changed."""

    release: str = "1.37"
    # 1.38: version attributes compare as semantic versions (build metadata ignored) in
    # matchAttribute/distinctAttribute; 1.37 compares their text
    semver_constraints: bool = False
    # 1.38: an attribute value a constraint cannot evaluate (a version no semver parser
    # holds) stops the allocation with an error; 1.37 compares the text
    constraint_errors: bool = False
    # 1.38: a request naming one capacity both short and qualified is an error
    capacity_name_conflicts: bool = False
    # 1.38: a device publishing a name both short and qualified with its driver's domain
    # is read with the qualified entry winning (draco never allocates it before), and a
    # capacity request reaches a capacity whichever way either side spells it (before:
    # only spelled alike)
    device_spellings: bool = False
    # 1.38: a negative capacity request is an error before any rounding; 1.37 rounds it
    # up to the policy's minimum first and errs only on a negative result
    negative_requests_abort: bool = False
    # 1.38: a device that no longer allows multiple allocations but still carries a
    # share is not allocated exclusively (except with admin access)
    live_share_blocks_exclusive: bool = False
    # 1.38: an `All` request over an incomplete or invalid pool fails that node only
    all_mode_node_failure: bool = False
    # gates this release locks to their default: `--feature-gates` refuses to change them
    locked: frozenset[str] = frozenset()
    # gates of draco's table this release does not know (unrecognized, as upstream says)
    unknown: frozenset[str] = frozenset()


DEFAULT_SEMANTICS = Semantics()
# What each switch changes, in a line: the CLI reference's table by release reads these.
SEMANTICS_CHANGES: dict[str, str] = {
    "semver_constraints": "version attributes compare as semantic versions in "
                          "matchAttribute/distinctAttribute (build metadata ignored)",
    "constraint_errors": "an attribute value a constraint cannot evaluate stops the allocation",
    "capacity_name_conflicts": "a request naming one capacity both short and qualified is an error",
    "device_spellings": "capacity names match whether spelled short or qualified; a device "
                        "spelling one both ways is read with the qualified entry",
    "negative_requests_abort": "a negative capacity request is an error before rounding",
    "live_share_blocks_exclusive": "a share still recorded on a device keeps non-admin "
                                   "exclusive requests off it",
    "all_mode_node_failure": "an All request over an incomplete or invalid pool fails that "
                             "node only",
}
assert set(SEMANTICS_CHANGES) == {f.name for f in fields(Semantics)
                                  if f.type in (bool, "bool")}


@dataclass(frozen=True, slots=True)
class FeatureGates:
    """One field per gate, named as upstream names the gate (see `GATE_NAMES`), and the
    release's behaviour (`semantics`, not a gate)."""

    admin_access: bool = True  # GA and locked on in 1.36
    consumable_capacity: bool = True  # beta, on since 1.36
    device_binding_conditions: bool = True  # beta, on since 1.36
    device_taints: bool = True  # GA in 1.37
    # beta in 1.37 but on only from compatibility version 1.37: a 1.37 kube-scheduler
    # (compatibility version 1.36 by default) runs with it off, as its differential shows
    fractional_capacity_range: bool = False
    partitionable_devices: bool = True  # beta, on since 1.36
    prioritized_list: bool = True  # GA and locked on in 1.37
    semantics: Semantics = DEFAULT_SEMANTICS


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
assert set(GATE_NAMES.values()) == {f.name for f in fields(FeatureGates)} - {"semantics"}


def parse_feature_gates(text: str, base: FeatureGates = DEFAULT_GATES, *,
                        enforce_locks: bool = False) -> FeatureGates:
    """`A=true,B=false` over BASE. Unknown gates and values are errors (ValueError), as
    they are for kube-scheduler; with `enforce_locks` (a component's flag, not a library
    caller's feature set) so is changing a gate BASE's release locks."""
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
        if name not in GATE_NAMES or name in base.semantics.unknown:
            raise ValueError(f"unrecognized feature gate: {name}")
        default = getattr(base, GATE_NAMES[name])
        if enforce_locks and name in base.semantics.locked and (value == "true") != default:
            raise ValueError(f"cannot set feature gate {name} to {value}, feature is locked to "
                             f"{str(default).lower()} in Kubernetes {base.semantics.release}")
        changes[GATE_NAMES[name]] = value == "true"
    fields_: dict[str, Any] = dict(changes)  # gate fields only (never `semantics`)
    return replace(base, **fields_)


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
    do not count; without DRAConsumableCapacity no device allows multiple allocations;
    without DRADeviceBindingConditions devices with binding conditions, and without
    DRAPartitionableDevices devices consuming counters and slices with per-device node
    selection, are never allocated (upstream's allocator). Before 1.38 a device that
    spells a name both short and qualified is never allocated (`Semantics`)."""
    if not gates.semantics.device_spellings and any(p.spelled_twice for p in inventory):
        inventory = tuple(p.refuse_spelled_twice() for p in inventory)
    if (gates.device_taints and gates.device_binding_conditions and gates.partitionable_devices
            and gates.consumable_capacity):
        return inventory
    pools = []
    for pool in inventory:
        slices = []
        for sl in pool.slices:
            if sl.per_device and not gates.partitionable_devices:
                continue
            devices = tuple(
                _gated_device(d, gates) for d in sl.devices
                if (gates.device_binding_conditions or not d.binding_conditions)
                and (gates.partitionable_devices or not d.consumes))
            slices.append(replace(sl, devices=devices))
        pools.append(replace(pool, slices=tuple(slices)))
    return tuple(pools)


def _gated_device(d: Candidate, gates: FeatureGates) -> Candidate:
    if not gates.device_taints and d.taints:
        d = replace(d, taints=())
    if not gates.consumable_capacity and d.allow_multiple_allocations:
        d = replace(d, allow_multiple_allocations=False)
    return d
