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
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol

from operators.model import (
    Attribute,
    DeviceID,
    DeviceTaint,
    NodePlacement,
    PoolID,
    ResourceSlice,
)
from operators.model.nodes import NodeInfo  # the node tried: placement reads name and labels
from operators.tracker import Tracker

_EMPTY: Mapping[str, str] = MappingProxyType({})


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

    def targeting(self, node: NodeInfo | None) -> tuple[SliceCandidates, ...]:
        """The slices upstream considers for `node`: slice-level placement matching, or a
        per-device slice with at least one matching device. No node: allNodes only."""
        return tuple(s for s in self.slices if _slice_targets(s, node))

    def unusable(self, targeting: tuple[SliceCandidates, ...]) -> bool:
        """Incomplete, or a device name repeated among the slices the node sees (upstream
        checks names only there: a name repeated on two nodes' slices is fine)."""
        if self.incomplete:
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


def _candidate(d_id: DeviceID, placement: NodePlacement, per_device: bool,
               attributes: Mapping[str, Attribute], capacity: Mapping[str, str],
               taints: tuple[DeviceTaint, ...], multi: bool) -> Candidate:
    return Candidate(d_id, attributes, capacity, taints, placement, per_device, multi)


def _slice_placement(s: ResourceSlice) -> NodePlacement:
    return NodePlacement(s.node_name, s.node_selector, s.all_nodes)


def _pool(pid: PoolID, slices: list[ResourceSlice], expected: int,
          devices_of: _DeviceSource) -> PoolCandidates:
    names: set[str] = set()
    dup = ""
    out = []
    for s in sorted(slices, key=lambda x: x.meta.name):
        cands = []
        for d in s.devices:
            if d.id.device in names and not dup:
                dup = d.id.device
            names.add(d.id.device)
            cands.append(devices_of(s, d.id, d.placement))
        out.append(SliceCandidates(s.meta.name, _slice_placement(s),
                                   s.per_device_node_selection, tuple(cands)))
    incomplete = len(slices) != expected
    problem = ""
    if incomplete:
        problem = f"resource pool {pid} is currently being updated ({len(slices)} of {expected} slices)"
    elif dup:
        problem = f"resource pool {pid} is invalid: duplicate device name {dup}"
    return PoolCandidates(pid, incomplete, bool(dup), problem, tuple(out))


class _DeviceSource(Protocol):
    def __call__(self, s: ResourceSlice, d_id: DeviceID, placement: NodePlacement) -> Candidate: ...


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
    index = {(s.meta.name, d.id): d for ss in by_pool.values() for s in ss for d in s.devices}

    def source(s: ResourceSlice, d_id: DeviceID, placement: NodePlacement) -> Candidate:
        d = index[(s.meta.name, d_id)]
        return _candidate(d_id, placement, s.per_device_node_selection, d.attributes,
                          d.capacity, d.taints, d.allow_multiple_allocations)

    return tuple(
        _pool(pid, ss, ss[0].pool.resource_slice_count, source)
        for pid, ss in sorted(by_pool.items())
    )


def _tracker_source(tracker: Tracker, slices: list[ResourceSlice]) -> _DeviceSource:
    published = {(s.meta.name, d.id): d for s in slices for d in s.devices}

    def source(s: ResourceSlice, d_id: DeviceID, placement: NodePlacement) -> Candidate:
        view = tracker.device(d_id)
        if view is not None:
            return _candidate(d_id, placement, s.per_device_node_selection, view.attributes,
                              view.capacity, view.taints, view.allow_multiple_allocations)
        d = published[(s.meta.name, d_id)]
        return _candidate(d_id, placement, s.per_device_node_selection, d.attributes,
                          d.capacity, d.taints, d.allow_multiple_allocations)

    return source


def inventory_from_tracker(tracker: Tracker) -> Inventory:
    """Pools from draco's device view: patched attributes/capacity, slice and rule taints."""
    out = []
    for st in tracker.pools():
        slices = [s for n in st.slices if (s := tracker.resource_slice(n)) is not None]
        out.append(_pool(st.id, slices, st.resource_slice_count, _tracker_source(tracker, slices)))
    return tuple(sorted(out, key=lambda p: p.id))
