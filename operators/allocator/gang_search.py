"""The joint search: every member of a gang gets a node and devices, all or nothing.

Members are visited in a fixed order; each member tries the nodes of the topology
domain it may use, and on each node its claims are searched exactly as one pod's are
(`search.Search`), sharing with the other members' searches what is taken so far
(`search.Joint`: devices, shared capacity, counters). On success a member's search
continues into the next member instead of returning, so a dead end at member 7
backtracks into member 6's device choices on its node, then into member 6's next node,
and so on back to member 0. That is what kube-scheduler's pod-group cycle does not do
(it keeps each pod's first fit; kubernetes/kubernetes#138765).

What keeps it small:
- a node is tried for a member only when each of the member's requests still finds
  enough free, tolerated, matching devices there (`nodes.enough`, no CEL per try:
  the per-selector match sets are the index's);
- members of the same shape (same claims' requests, same pod filters, no shared
  claim) are interchangeable, so a member never takes a node earlier in the list than
  the previous member of its shape: one of each set of symmetric placements is tried,
  not all n! of them;
- the time budget of the whole gang bounds it (TooComplex).
The deepest point reached (how many members placed, and on which nodes) is kept for
the explanation when nothing fits.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass

from operators.allocator.capacity import NO_SHARES, Charged, Shares
from operators.allocator.counters import Ledger
from operators.allocator.inventory import Candidate, Inventory, NodeInfo, placement_matches
from operators.allocator.nodes import NodeIndex, enough
from operators.allocator.requests import Wanted, wanted_for_claim
from operators.allocator.search import Joint, Search
from operators.model import DeviceClass, DeviceID, ResourceClaim


@dataclass(frozen=True, slots=True)
class MemberPlan:
    """One member as the search sees it. `claims`: the claims this member allocates;
    `shared`: (earlier member, its claim index) of claims another member allocates
    that this member uses too, so its node must reach their devices; `shape`: members
    with the same shape are interchangeable (None: unique)."""

    label: str
    claims: tuple[ResourceClaim, ...]
    nodes: tuple[NodeInfo, ...]
    shared: tuple[tuple[int, int], ...] = ()
    shape: object = None


class _Taken(Collection[DeviceID]):
    """In use before the gang, or taken by a member searched so far."""

    def __init__(self, in_use: Collection[DeviceID], allocating: Mapping[DeviceID, set[int]]) -> None:
        self.in_use, self.allocating = in_use, allocating

    def __contains__(self, device: object) -> bool:
        return device in self.in_use or bool(self.allocating.get(device))  # type: ignore[call-overload]

    def __iter__(self) -> Iterator[DeviceID]:
        yield from self.in_use
        yield from (d for d, h in self.allocating.items() if h and d not in self.in_use)

    def __len__(self) -> int:
        return sum(1 for _ in self)


class JointSearch:
    """`run()` -> True with `searches[m]` and `nodes[m]` set for every member, or False;
    raises TooComplex when the deadline passes, AllocationError as a pod's search does."""

    def __init__(self, members: Sequence[MemberPlan], index: NodeIndex,
                 classes: Mapping[str, DeviceClass], in_use: Collection[DeviceID],
                 deadline: float, shares: Shares = NO_SHARES,
                 admit: Callable[[Candidate], bool] | None = None,
                 required: int | None = None) -> None:
        """Members from index `required` on are optional: each is placed when it fits
        beside the others and skipped when it does not (never backtracked into)."""
        self.members = members
        self.required = len(members) if required is None else required
        self.index = index
        self.classes = dict(classes)
        self.in_use = in_use
        self.shares = shares
        self.deadline = deadline
        self.admit = admit
        self.joint = Joint(Ledger(index.inventory, Charged(in_use, shares)))
        self.taken = _Taken(in_use, self.joint.allocating)
        self.plans: list[list[list[Wanted]]] = [
            [alts for ci, c in enumerate(m.claims) for alts in wanted_for_claim(ci, c, self.classes)]
            for m in members]
        self.offsets: list[int] = []
        total = 0
        for m in members:
            self.offsets.append(total)
            total += len(m.claims)
        self.searches: list[Search | None] = [None] * len(members)
        self.nodes: list[NodeInfo | None] = [None] * len(members)
        self._positions: list[int] = [0] * len(members)
        self._views: dict[str, tuple[Inventory, tuple[Candidate, ...]]] = {}
        self.steps = 0
        self.best = 0  # the most members placed at once
        self.best_nodes: tuple[str, ...] = ()

    def view(self, node: NodeInfo) -> tuple[Inventory, tuple[Candidate, ...]]:
        """The node's pools and its reachable devices inside the domain."""
        cached = self._views.get(node.name)
        if cached is None:
            pools, devices = self.index.view(node)
            if self.admit is not None:
                devices = tuple(d for d in devices if self.admit(d))
            cached = self._views[node.name] = (pools, devices)
        return cached

    def fits_alone(self, m: int, node: NodeInfo) -> bool:
        """Each request of member M could still be met on NODE by counting (the search
        decides; this only skips nodes where it surely fails)."""
        _, devices = self.view(node)
        matcher = self.index.matcher
        return all(any(enough(w, devices, matcher, self.taken) for w in alts)
                   for alts in self.plans[m])

    def run(self) -> bool:
        return self._member(0)

    def _member(self, m: int) -> bool:
        if m > self.best and m <= self.required:
            self.best = m
            self.best_nodes = tuple(n.name for n in self.nodes[:m] if n is not None)
        if m == len(self.members):
            return True
        member = self.members[m]
        start = 0
        if m > 0 and member.shape is not None and member.shape == self.members[m - 1].shape:
            start = self._positions[m - 1]  # symmetric: never before the previous one
        for pos in range(start, len(member.nodes)):
            self.joint.tick(self.deadline)  # a node tried is a step of the gang's budget
            node = member.nodes[pos]
            if not self._reaches_shared(member, node) or not self.fits_alone(m, node):
                continue
            pools, _ = self.view(node)
            search = Search(member.claims, node, pools, self.classes, self.in_use,
                            self.deadline, self.shares, joint=self.joint,
                            claim_offset=self.offsets[m], admit=self.admit)
            search.then = lambda m=m: self._member(m + 1)
            self.searches[m], self.nodes[m], self._positions[m] = search, node, pos
            try:
                found = search.run()
            finally:
                self.steps += search.steps
            if found:
                return True
            self.searches[m] = self.nodes[m] = None
        if m >= self.required:
            self._positions[m] = start
            return self._member(m + 1)  # an optional member that fits nowhere waits
        return False

    def _reaches_shared(self, member: MemberPlan, node: NodeInfo) -> bool:
        """A claim an earlier member allocated must be usable from this member's node."""
        for owner, ci in member.shared:
            search, owner_node = self.searches[owner], self.nodes[owner]
            if search is None or owner_node is None:
                return False
            for pick in search.picks[ci]:
                if pick.device.binds_to_node and owner_node.name != node.name:
                    return False
                if not placement_matches(pick.device.placement, node):
                    return False
        return True


__all__ = ["JointSearch", "MemberPlan"]
