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
- dead ends are remembered: when the members from m on fail, they fail again whenever
  they face an equivalent state (`gang_memo`: what is taken where they can still
  reach, up to devices and nodes no request can tell apart), so a tight world costs
  one visit per distinct state instead of one per path to it;
- a member never tries an untouched twin of a node that already failed for it
  (nodes alike in all a request can see, `gang_memo`), and a run of members of one
  shape stops as soon as the nodes left cannot host them all by count (`_room`);
- the memo and the twins start with the first dead end (the count of a run, at its
  head): a gang that fits at the first try never pays for them;
- the time budget of the whole gang bounds it (TooComplex).
The member and node order are the caller's (`gang.place_gang` puts the most
constrained members first and each member's tightest nodes first).
The deepest point reached (how many members placed, and on which nodes) is kept for
the explanation when nothing fits.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass

from operators.allocator.capacity import NO_SHARES, Charged, Shares, consumption
from operators.allocator.counters import Ledger
from operators.allocator.features import DEFAULT_GATES, FeatureGates
from operators.allocator.inventory import Candidate, Inventory, NodeInfo, placement_matches
from operators.allocator.nodes import NodeIndex, enough
from operators.allocator.requests import Wanted, wanted_for_claim
from operators.allocator.search import Joint, Search, selectable, taint_blocks
from operators.gangs.gang_memo import StateKeys
from operators.model import DeviceClass, DeviceID, ResourceClaim

MEMO_MAX = 1 << 17  # dead ends remembered per search (each a few hundred bytes)


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
                 required: int | None = None, features: FeatureGates = DEFAULT_GATES) -> None:
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
        self.features = features
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
        self.dead: set[object] = set()  # signatures of known dead ends
        self.notes: dict[str, str] = {}  # member label -> why it fits nowhere, beyond counts
        self.memo_hits = 0
        # the cuts below cost a look at the state per member: they start with the first
        # dead end (a gang that fits at the first try never pays for them)
        self.backtracked = False
        # twin nodes are skipped only without shared claims (see `_member`)
        self.twins = not any(p.shared for p in members)
        self.keys = StateKeys(members, self.required, index, in_use, self.joint, self.view,
                              self.searches, self.nodes, admit)

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
        signature = None
        if m < self.required and self.backtracked:
            signature = self.keys.key(m, start)
            if signature in self.dead:
                self.memo_hits += 1
                return False
        if m < self.required and (self.backtracked or start == 0) and not self._room(m, start):
            self.backtracked = True  # at the head of a run of one shape, or once searching
            if signature is not None and len(self.dead) < MEMO_MAX:
                self.dead.add(signature)
            return False
        # twins: an untouched node like one that failed for this member fails too
        touched: set[str] | None = None
        failed: set[object] = set()
        for pos in range(start, len(member.nodes)):
            self.joint.tick(self.deadline)  # a node tried is a step of the gang's budget
            node = member.nodes[pos]
            twin = None
            if self.twins and self.backtracked and m < self.required:
                if touched is None:
                    touched = self.keys.touched()  # the state is as on entry between nodes
                if node.name not in touched:
                    twin = self.keys.class_of(m, start, node.name)
                    if twin in failed:
                        continue
            if not self._reaches_shared(member, node) or not self.fits_alone(m, node):
                continue
            pools, _ = self.view(node)
            search = Search(member.claims, node, pools, self.classes, self.in_use,
                            self.deadline, self.shares, joint=self.joint,
                            claim_offset=self.offsets[m], admit=self.admit,
                            fractional_ranges=self.features.fractional_capacity_range,
                            semantics=self.features.semantics)
            if self.admit is not None:
                self._all_inside(m, search, node)
            search.then = lambda m=m: self._member(m + 1)
            self.searches[m], self.nodes[m], self._positions[m] = search, node, pos
            try:
                found = search.run()
            finally:
                self.steps += search.steps
            if found:
                return True
            self.searches[m] = self.nodes[m] = None
            self.backtracked = True
            if twin is not None:
                failed.add(twin)
        if m >= self.required:
            self._positions[m] = start
            return self._member(m + 1)  # an optional member that fits nowhere waits
        if m < self.required and self.backtracked and len(self.dead) < MEMO_MAX:
            # the state is as on entry again: a key not taken then (before the first
            # dead end) is taken now
            self.dead.add(signature if signature is not None else self.keys.key(m, start))
        return False

    def _room(self, m: int, start: int) -> bool:
        """Whether the nodes from START on could still host, by count, every required
        member of M's shape from M on (they take nodes in order, see `_member`). Each
        node hosts at most, per request, its free matching devices divided by the
        count; a device every node reaches is counted on each, so this never rules out
        a placement that exists. Requests in All mode, with admin access or on devices
        several claims may share are not counted (always room)."""
        member = self.members[m]
        k = 1
        while member.shape is not None and m + k < self.required \
                and self.members[m + k].shape == member.shape:
            k += 1
        if k < 2:
            return True  # one member: `fits_alone` judges node by node
        plan = self.plans[m]
        if not plan or any(w.all_mode or w.admin_access or w.count < 1 for alts in plan for w in alts):
            return True
        matcher = self.index.matcher
        room = 0
        for node in member.nodes[start:]:
            _, devices = self.view(node)
            hosts: int | None = None
            for alts in plan:
                most = 0
                for w in alts:
                    ids, _ = matcher.matching(w)
                    free = sum(1 for d in devices if d.id in ids and d.id not in self.taken
                               and not taint_blocks(d.taints, w.tolerations))
                    most = max(most, free // w.count)
                hosts = most if hosts is None else min(hosts, most)
                if not hosts:
                    break
            room += hosts or 0
            if room >= k:
                return True
        # short: unless a device several claims may share serves a request (checked
        # last, it costs a look at every matching device)
        return any(d.allow_multiple_allocations for alts in plan for w in alts
                   for d in matcher.matching(w)[1])

    def _all_inside(self, m: int, search: Search, node: NodeInfo) -> None:
        """`allocationMode: All` means every device the request matches on the node, as
        upstream has it; the domain does not narrow it. Where some of those lie outside
        the domain (another value of the attribute, or none), the request (that
        alternative, for a subrequest) cannot be met on this node in this domain."""
        admit = self.admit
        assert admit is not None
        for w in (w for requests in search.plan for alts in requests for w in alts):
            if not w.all_mode or w.all_devices is None:
                continue
            claim = search.claims[w.claim_index]
            outside = sum(1 for _, targeting in search.pools for sl in targeting
                          for d in sl.devices if not admit(d)
                          and selectable(w, sl, d, node, claim)
                          and consumption(w.spec.capacity, d, {}, {},
                                          self.features.fractional_capacity_range,
                                          self.features.semantics) is not None)
            if outside:
                w.all_devices, w.count = [], 0
                self.notes.setdefault(self.members[m].label, (
                    f"request {w.name} of claim {claim.name} asks for all the devices it "
                    f"matches on a node (allocationMode All), and on node {node.name} "
                    f"{outside} of them {'are' if outside != 1 else 'is'} outside the "
                    "topology domain"))

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
