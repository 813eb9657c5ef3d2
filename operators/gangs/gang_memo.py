"""The state a gang's remaining members face, as a key for remembering dead ends.

When the members from m on fail, they fail again whenever they face an equivalent
state, so the joint search records the state's key and never searches it twice. Two
states are equivalent when a renaming of devices and nodes that no request can tell
apart maps one onto the other:
- devices: two devices that differ only in their name, in alike pools of one node,
  are alike to every request (CEL never sees a name), so a node's state is how many
  devices of each kind are taken there, not which;
- nodes ("twins"): two nodes whose node-local pools hold alike devices and counters,
  that reach the same other devices, and that every remaining member may use alike (the
  same candidate lists, and for the members of the current member's shape the same
  side of its starting position) can trade places in any placement, so the key counts
  node states per class of twins instead of naming the nodes;
- what the remaining members cannot use is left out (nodes none of them may take).
Devices several claims may share and pools reachable from several nodes keep their
names, and when a remaining member relies on a claim an earlier member allocated (a
shared claim), nodes keep their names too: the key is exact, never merging states
that could end differently.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING

from operators.allocator.inventory import Candidate, Inventory, NodeInfo, PoolCandidates
from operators.allocator.nodes import NodeIndex
from operators.allocator.search import Joint, Search
from operators.model import DeviceID

if TYPE_CHECKING:
    from operators.gangs.gang_search import MemberPlan

Pool = tuple[str, str]


class StateKeys:
    def __init__(self, members: Sequence[MemberPlan], required: int, index: NodeIndex,
                 in_use: Collection[DeviceID], joint: Joint,
                 view: Callable[[NodeInfo], tuple[Inventory, tuple[Candidate, ...]]],
                 searches: list[Search | None], nodes: list[NodeInfo | None],
                 admit: Callable[[Candidate], bool] | None = None) -> None:
        self.members, self.required, self.index, self.in_use = members, required, index, in_use
        self.admit = admit
        self._pool_kinds: dict[Pool, int] = {}
        self.joint, self.view, self.searches, self.nodes = joint, view, searches, nodes
        self._kinds: dict[DeviceID, object] = {}
        self._homes: dict[Pool, str | None] = {}
        self._statics: dict[str, object] = {}
        self._pools: dict[Pool, PoolCandidates] | None = None
        self._positions: dict[int, dict[str, int]] = {}
        self._later: dict[int, list[frozenset[str]]] = {}
        self._by_name: dict[str, NodeInfo] | None = None
        self._names: dict[object, frozenset[str]] = {}
        self._where: dict[DeviceID, tuple[Pool, str | None, int]] = {}
        self._numbers: dict[object, int] = {}

    # -- what devices and nodes are ------------------------------------------------

    def kind(self, d: Candidate) -> object:
        """A device's kind: everything a request can tell of it but its name and pool
        (a device several claims may share keeps its identity: shares are per device)."""
        found = self._kinds.get(d.id)
        if found is None:
            found = self._kinds[d.id] = d.id if d.allow_multiple_allocations else (
                d.id.driver, repr((
                    sorted(d.attributes.items()), sorted(d.capacity.items()), d.taints,
                    d.placement.all_nodes, d.placement.node_selector, d.per_device, d.consumes,
                    d.binding_conditions, d.binding_failure_conditions, d.binds_to_node,
                    d.unsupported, sorted(d.capacity_policies.items()))),
                d.id in self.in_use)
        return found

    def home(self, p: PoolCandidates) -> str | None:
        """The node a pool is local to (every device of it on that node), else None."""
        pid = (p.id.driver, p.id.pool)
        if pid not in self._homes:
            names = {d.placement.node_name for sl in p.slices for d in sl.devices}
            only = next(iter(names)) if len(names) == 1 else None
            self._homes[pid] = only or None
        return self._homes[pid]

    def pool_kind(self, p: PoolCandidates) -> int:
        """A node-local pool's kind, as a small number: everything a request can tell of
        it but its name (its state, counters, and devices by kind, with whether each is
        inside the domain). Devices alike in alike pools are alike."""
        pid = (p.id.driver, p.id.pool)
        found = self._pool_kinds.get(pid)
        if found is None:
            text = repr((
                p.id.driver, p.incomplete, p.invalid, p.problem, p.counter_problem, p.unmodelled,
                sorted((s, sorted(c.items())) for s, c in p.counter_sets.items()),
                sorted(repr((self.kind(d), self.admit is None or self.admit(d)))
                       for sl in p.slices for d in sl.devices)))
            found = self._pool_kinds[pid] = self._numbers.setdefault(text, len(self._numbers))
        return found

    def static(self, node: NodeInfo) -> object:
        """What a node is, but its name: its local pools by kind and the other devices
        it reaches. Twins have equal statics."""
        found = self._statics.get(node.name)
        if found is None:
            pools, _ = self.view(node)
            local = sorted(self.pool_kind(p) for p in pools if self.home(p) == node.name)
            remote = frozenset(d.id for d in self.index.view(node)[1]
                               if self._homes.get((d.id.driver, d.id.pool)) != node.name)
            found = self._statics[node.name] = (tuple(local), remote)
        return found

    # -- what the members from m on face -------------------------------------------

    def _chain_end(self, m: int) -> int:
        """One past the last required member of M's shape right after it."""
        shape, end = self.members[m].shape, m + 1
        while shape is not None and end < self.required and self.members[end].shape == shape:
            end += 1
        return end

    def _lists(self, m: int) -> tuple[dict[str, int], list[frozenset[str]]]:
        """M's node positions, and the distinct node lists of the required members
        after M's run of its shape."""
        positions = self._positions.get(m)
        if positions is None:
            positions = self._positions[m] = {n.name: i for i, n in enumerate(self.members[m].nodes)}
        later = self._later.get(m)
        if later is None:
            later = []
            for r in range(self._chain_end(m), self.required):
                names = self._names_of(r)
                if not later or names != later[-1]:
                    later.append(names)
            self._later[m] = later
        return positions, later

    def _names_of(self, r: int) -> frozenset[str]:
        """Member R's node names (members of one shape share one list)."""
        member = self.members[r]
        key = ("shape", member.shape) if member.shape is not None else r
        found = self._names.get(key)
        if found is None:
            found = self._names[key] = frozenset(n.name for n in member.nodes)
        return found

    def class_of(self, m: int, start: int, name: str) -> object:
        """The node's class of twins for the members from M on (START: where M and the
        members of its shape right after it may begin in M's node list)."""
        if self._by_name is None:
            self._by_name = {n.name: n for m in self.members for n in m.nodes}
        node = self._by_name.get(name)
        if node is None:
            return name
        positions, later = self._lists(m)
        return (self.static(node), positions.get(name, -1) >= start, tuple(name in s for s in later))

    def _relevant(self, m: int, start: int, name: str) -> bool:
        """Whether some required member from M on may still use the node."""
        positions, later = self._lists(m)
        return positions.get(name, -1) >= start or any(name in s for s in later)

    def key(self, m: int, start: int) -> object:
        """Equal keys, equal outcomes for the members from M on (see the module's
        docstring)."""
        refs = []
        for r in range(m, len(self.members)):
            for owner, ci in self.members[r].shared:
                search, node = self.searches[owner], self.nodes[owner]
                if owner < m and search is not None and node is not None:
                    refs.append((owner, ci, node.name, tuple(str(p.device.id) for p in search.picks[ci])))
        per_node: dict[str, list[int]] = {}
        remote: list[tuple[Pool, int]] = []
        where = self._where
        for d, holders in self.joint.allocating.items():
            if not holders:
                continue
            found = where.get(d)
            if found is None:
                found = where[d] = self._place(d)
            pool, home, kind = found
            if home is None:
                remote.append((pool, kind))  # a pool several nodes reach: always counted
            elif home in per_node:
                per_node[home].append(kind)
            elif self._relevant(m, start, home):
                per_node[home] = [kind]
        nodes: Counter[object] = Counter()
        for name, kinds in per_node.items():
            kinds.sort()
            nodes[(name if refs else self.class_of(m, start, name), tuple(kinds))] += 1
        shared = tuple(sorted(
            (str(d), n, tuple(sorted(self.joint.allocating_capacity.get(d, {}).items())))
            for d, n in self.joint.sharing.items() if n))
        return (m, start, frozenset(nodes.items()), tuple(sorted(remote)), shared, tuple(refs))

    def touched(self) -> set[str]:
        """The nodes a device of whose local pools the gang has taken so far."""
        out: set[str] = set()
        for d in (*(d for d, h in self.joint.allocating.items() if h),
                  *(d for d, n in self.joint.sharing.items() if n)):
            found = self._where.get(d)
            if found is None:
                found = self._where[d] = self._place(d)
            if found[1] is not None:
                out.add(found[1])
        return out

    def _place(self, d: DeviceID) -> tuple[Pool, str | None, int]:
        """A taken device's pool, the node its pool is local to, and its kind as a
        small number (equal kinds, equal numbers)."""
        pool = (d.driver, d.pool)
        if self._pools is None:
            self._pools = {(p.id.driver, p.id.pool): p for p in self.index.inventory}
        found = self._pools.get(pool)
        device = None
        home = None
        if found is not None:
            home = self.home(found)
            device = next((x for sl in found.slices for x in sl.devices if x.id == d), None)
        kind: object = d if device is None else self.kind(device)
        if home is not None and found is not None:
            kind = (self.pool_kind(found), kind)  # on a node: which of its pools, by kind
        number = self._numbers.setdefault(kind, len(self._numbers))
        return pool, home, number


__all__ = ["StateKeys"]
