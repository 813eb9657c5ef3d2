"""The allocator's input: pools of candidate devices in upstream's search order.

Upstream walks pools by driver then pool name, the slices of a pool by name and the
devices of a slice in published order; the first fit therefore depends on that order,
so the inventory fixes it once. Pool completeness counts every current-generation
slice of the pool, whichever node it targets; only the devices reachable from the node
being tried become candidates (see `targeting`).

Two builders: `inventory_from_slices` (plain ResourceSlices, as upstream sees them)
and `inventory_from_tracker` (draco's device view: ResourceSlicePatch attributes and
DeviceTaintRule taints included).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Protocol

from operators.model import (
    Attribute,
    CounterConsumption,
    Device,
    DeviceID,
    DeviceTaint,
    NodePlacement,
    PoolID,
    ResourceSlice,
)
from operators.model.capacity import CapacityPolicy
from operators.model.nodes import NodeInfo
from operators.model.quantity import Quantity  # the node tried: placement reads name and labels
from operators.tracker import Tracker

_EMPTY: Mapping[str, str] = MappingProxyType({})
_NO_SETS: Mapping[str, Mapping[str, Quantity]] = MappingProxyType({})
_NO_POLICIES: Mapping[str, CapacityPolicy] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Candidate:
    """One device as the allocator sees it (satisfies `operators.cel.CelDevice`).

    `placement` is where the device is reachable: the slice's placement, or the
    device's own when its slice uses perDeviceNodeSelection (`per_device`).
    """

    id: DeviceID
    attributes: Mapping[str, Attribute] = field(default_factory=lambda: MappingProxyType({}))
    capacity: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    taints: tuple[DeviceTaint, ...] = ()
    placement: NodePlacement = NodePlacement(all_nodes=True)
    per_device: bool = False
    allow_multiple_allocations: bool = False
    consumes: tuple[CounterConsumption, ...] = ()
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    binds_to_node: bool = False
    unsupported: tuple[str, ...] = ()  # why draco leaves the device out ("" fields: none)
    capacity_policies: Mapping[str, CapacityPolicy] = field(default_factory=lambda: _NO_POLICIES)
    spelled_twice: tuple[str, ...] = ()  # see `Device.spelled_twice`
    domain_spelled: frozenset[str] = frozenset()  # see `Device.domain_spelled`

    def __hash__(self) -> int:
        return hash(self.id)

    @property
    def driver(self) -> str:
        return self.id.driver


@dataclass(frozen=True, slots=True)
class SliceCandidates:
    name: str
    placement: NodePlacement
    per_device: bool
    devices: tuple[Candidate, ...]


@dataclass(frozen=True, slots=True)
class PoolCandidates:
    """A pool; `problem` is "" when usable, else why upstream would not allocate from it.

    `invalid`: a device name repeats somewhere in the pool; whether that matters for a
    node is `unusable(targeting)`.
    """

    id: PoolID
    incomplete: bool
    invalid: bool
    problem: str
    slices: tuple[SliceCandidates, ...]
    # KEP-4815: the pool's counter sets (set -> counter -> value), every device of the
    # pool that consumes from them (whichever node its slice targets: allocated ones
    # use up counters for all), and why the counters make the pool unusable ("" if not).
    counter_sets: Mapping[str, Mapping[str, Quantity]] = field(default_factory=lambda: _NO_SETS)
    consumers: tuple[tuple[DeviceID, tuple[CounterConsumption, ...]], ...] = ()
    counter_problem: str = ""
    unmodelled: tuple[str, ...] = ()  # fields of its devices draco does not model: unusable
    # a device of it publishes a name both short and qualified: read from 1.38 (the
    # qualified entry wins); before, `refuse_spelled_twice` leaves that device out
    spelled_twice: bool = False

    def refuse_spelled_twice(self) -> PoolCandidates:
        """The pool as releases before 1.38 see it through draco: a device publishing a
        name both ways is never allocated (those releases keep the two spellings apart,
        and which one CEL sees is the order of a Go map: draco fails closed); the pool's
        other devices are allocated as usual, as the real kube-scheduler does."""
        if not self.spelled_twice:
            return self
        return replace(self, spelled_twice=False, slices=tuple(
            replace(sl, devices=tuple(
                replace(d, unsupported=(*d.unsupported, *(f"{w} published both short and qualified "
                                                          "(read as Kubernetes 1.38 and later)"
                                                          for w in d.spelled_twice)))
                if d.spelled_twice else d for d in sl.devices))
            for sl in self.slices))

    def targeting(self, node: NodeInfo | None) -> tuple[SliceCandidates, ...]:
        """The slices upstream considers for `node`: slice-level placement matching, or a
        per-device slice with at least one matching device. No node: allNodes only."""
        return tuple(s for s in self.slices if _slice_targets(s, node))

    def unusable(self, targeting: tuple[SliceCandidates, ...]) -> bool:
        """Incomplete, counter sets that do not add up (a set defined twice, a device
        consuming from a set or counter nobody declares), or a device name repeated
        among the slices the node sees (upstream checks names only there: a name
        repeated on two nodes' slices is fine)."""
        if self.incomplete or self.counter_problem:
            return True
        if not self.invalid:
            return False
        seen: set[str] = set()
        for sl in targeting:
            for d in sl.devices:
                if d.id.device in seen:
                    return True
                seen.add(d.id.device)
        return False


Inventory = tuple[PoolCandidates, ...]


def placement_matches(p: NodePlacement, node: NodeInfo | None) -> bool:
    """Upstream's node match; without a node only allNodes matches."""
    if node is None:
        return bool(p.all_nodes) and not p.node_name
    return p.matches(node.name, node.labels)


def _slice_targets(s: SliceCandidates, node: NodeInfo | None) -> bool:
    if not s.per_device:
        return placement_matches(s.placement, node)
    return any(placement_matches(d.placement, node) for d in s.devices)


def _candidate(d: Device, placement: NodePlacement, per_device: bool,
               attributes: Mapping[str, Attribute], capacity: Mapping[str, str],
               taints: tuple[DeviceTaint, ...]) -> Candidate:
    return Candidate(d.id, attributes, capacity, taints, placement, per_device,
                     d.allow_multiple_allocations, d.consumes_counters, d.binding_conditions,
                     d.binding_failure_conditions, d.binds_to_node, d.unsupported,
                     d.capacity_policies, d.spelled_twice, d.domain_spelled)


def _slice_placement(s: ResourceSlice) -> NodePlacement:
    return NodePlacement(s.node_name, s.node_selector, s.all_nodes)


def _counters(pid: PoolID, slices: list[ResourceSlice],
              ) -> tuple[Mapping[str, Mapping[str, Quantity]],
                         tuple[tuple[DeviceID, tuple[CounterConsumption, ...]], ...], str]:
    """The pool's counter sets, its consuming devices, and what makes them unusable.

    Upstream looks a set up by name across the whole pool: a name declared twice, or a
    device consuming from a set or counter no slice declares, invalidates the pool."""
    sets: dict[str, Mapping[str, Quantity]] = {}
    problem = ""
    for s in slices:
        for cs in s.shared_counters:
            if cs.name in sets and not problem:
                problem = f"resource pool {pid} is invalid: duplicate counter set name {cs.name}"
            sets[cs.name] = cs.counters
    consumers = []
    for s in slices:
        if s.shared_counters:
            continue  # a counter slice's devices are never allocatable (upstream)
        for d in s.devices:
            if not d.consumes_counters:
                continue
            consumers.append((d.id, d.consumes_counters))
            for c in d.consumes_counters:
                declared = sets.get(c.counter_set)
                missing = (f"counter set {c.counter_set}" if declared is None else
                           next((f"counter {n} in counter set {c.counter_set}"
                                 for n in c.counters if n not in declared), ""))
                if missing and not problem:
                    problem = (f"resource pool {pid} is invalid: device {d.id.device} consumes "
                               f"from {missing}, which the pool does not declare")
    return MappingProxyType(sets), tuple(consumers), problem


def _pool(pid: PoolID, slices: list[ResourceSlice], expected: int,
          devices_of: _DeviceSource) -> PoolCandidates:
    names: set[str] = set()
    dup = ""
    out = []
    for s in sorted(slices, key=lambda x: x.meta.name):
        if s.shared_counters:
            continue  # holds counter sets only; its devices (if any) are never allocatable
        cands = []
        for d in s.devices:
            if d.id.device in names and not dup:
                dup = d.id.device
            names.add(d.id.device)
            cands.append(devices_of(s, d))
        out.append(SliceCandidates(s.meta.name, _slice_placement(s),
                                   s.per_device_node_selection, tuple(cands)))
    sets, consumers, counter_problem = _counters(pid, slices)
    incomplete = len(slices) != expected
    problem = ""
    unmodelled = sorted({f for sl in out for d in sl.devices for f in d.unsupported})
    twice = any(d.spelled_twice for sl in out for d in sl.devices)
    if incomplete:
        problem = f"resource pool {pid} is currently being updated ({len(slices)} of {expected} slices)"
    elif unmodelled:
        # Upstream ignores the slices of devices using a field its gates leave out, which
        # leaves the pool incomplete; draco, not knowing the field, fails closed the same way.
        incomplete = True
        problem = (f"resource pool {pid} has devices using {', '.join(unmodelled)}, which draco "
                   "does not support: nothing is allocated from it")
    else:
        problem = counter_problem or (
            f"resource pool {pid} is invalid: duplicate device name {dup}" if dup else "")
    return PoolCandidates(pid, incomplete, bool(dup), problem, tuple(out), sets, consumers,
                          counter_problem, tuple(unmodelled), twice)


class _DeviceSource(Protocol):
    def __call__(self, s: ResourceSlice, d: Device) -> Candidate: ...


def inventory_from_slices(slices: Iterable[ResourceSlice]) -> Inventory:
    """Pools from plain ResourceSlices: newest generation only, as upstream gathers them."""
    by_pool: dict[PoolID, list[ResourceSlice]] = {}
    for s in slices:
        pid = s.pool_id
        cur = by_pool.get(pid)
        if cur is None or s.pool.generation > cur[0].pool.generation:
            by_pool[pid] = [s]
        elif s.pool.generation == cur[0].pool.generation:
            cur.append(s)
    def source(s: ResourceSlice, d: Device) -> Candidate:
        return _candidate(d, d.placement, s.per_device_node_selection, d.attributes,
                          d.capacity, d.taints)

    return tuple(
        _pool(pid, ss, ss[0].pool.resource_slice_count, source)
        for pid, ss in sorted(by_pool.items())
    )


def _tracker_source(tracker: Tracker) -> _DeviceSource:
    def source(s: ResourceSlice, d: Device) -> Candidate:
        view = tracker.device(d.id)
        if view is not None:
            return _candidate(d, d.placement, s.per_device_node_selection, view.attributes,
                              view.capacity, view.taints)
        return _candidate(d, d.placement, s.per_device_node_selection, d.attributes,
                          d.capacity, d.taints)

    return source


def inventory_from_tracker(tracker: Tracker) -> Inventory:
    """Pools from draco's device view: patched attributes/capacity, slice and rule taints."""
    out = []
    for st in tracker.pools():
        slices = [s for n in st.slices if (s := tracker.resource_slice(n)) is not None]
        out.append(_pool(st.id, slices, st.resource_slice_count, _tracker_source(tracker)))
    return tuple(sorted(out, key=lambda p: p.id))
