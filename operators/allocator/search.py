"""The backtracking search, step for step as upstream's structured allocator.

Claims are allocated one after the other, each claim's requests in order, each
request one device at a time; every device choice recurses, so a dead end anywhere
(a later request, a later claim of the same pod) backtracks into earlier choices.
The first complete solution wins. Upstream tries every device for every position of
a request, so it walks each set of devices in every order; here the next device of a
request is sought only after the previous one. The first solution is the same (within
a request, any valid set can be listed in search order, and the first found is the one
listed so), but a request that cannot be met costs 2^n steps instead of n!.
Per candidate the checks run in upstream's order:
in use (cheap, before any CEL), class selectors, request selectors, per-device node
placement, shared counters (`counters.Ledger`), taints, then the claim's constraints.
Devices with fields draco does not model are never candidates.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from operators.allocator.capacity import NO_SHARES, Charged, Number, Shares, consumption, num
from operators.allocator.counters import Ledger
from operators.allocator.features import DEFAULT_SEMANTICS, Semantics
from operators.allocator.inventory import (
    Candidate,
    Inventory,
    NodeInfo,
    PoolCandidates,
    SliceCandidates,
    placement_matches,
)
from operators.allocator.requests import (
    ALLOCATION_RESULTS_MAX_SIZE,
    AllocationError,
    NodeFailure,
    Wanted,
    check_constraints,
    claim_label,
    wanted_for_claim,
)
from operators.cel import compile_selector
from operators.model import (
    Attribute,
    DeviceClass,
    DeviceConstraint,
    DeviceID,
    DeviceSelector,
    DeviceTaint,
    DeviceToleration,
    ResourceClaim,
)
from operators.model.quantity import Quantity
from operators.model.semver import Semver

BUDGET_CHECK_EVERY = 128


class TooComplex(Exception):
    """The search used up its time budget."""


class _MaxSize(Exception):
    """More than 32 results would be needed along this path (prune, try another)."""


# The taint draco's preemption puts on nominated devices (through upstream's
# DeviceTaintRule, where served) to keep kube-scheduler off them. draco's own allocator
# keeps nominated devices by the nominations themselves, so it looks past this taint.
NOMINATED_TAINT = "resource.draco.dev/nominated"


def taint_blocks(taints: Sequence[DeviceTaint], tolerations: Sequence[DeviceToleration]) -> bool:
    """Upstream: only NoSchedule and NoExecute taints keep devices away; None and
    effects it does not know are ignored."""
    for taint in taints:
        if taint.key == NOMINATED_TAINT and taint.effect == "NoSchedule":
            continue
        if taint.effect in ("NoSchedule", "NoExecute") and not any(
            t.tolerates(taint) for t in tolerations
        ):
            return True
    return False


def selectors_match(
    selectors: Sequence[DeviceSelector], device: Candidate, where: str
) -> bool:
    """All true, stopping at the first false; compile or runtime errors raise, naming
    `where` (the class or the claim) the way upstream's messages do."""
    for i, sel in enumerate(selectors):
        compiled = compile_selector(sel.expression)
        if compiled.compile_error is not None:
            raise AllocationError(f"{where}: selector #{i}: CEL compile error: {compiled.compile_error}")
        res = compiled.evaluate(device)
        if res.error is not None:
            raise AllocationError(
                f"{where}: selector #{i} on device {device.id}: CEL runtime error: {res.error}")
        if not res.matched:
            return False
    return True


def same_attribute(a: Attribute, b: Attribute) -> bool:
    """Typed equality: a bool never equals an int, an int never a string; versions
    compare as strings, which semver's minimal form makes exact (up to 1.37)."""
    return a.kind == b.kind and type(a.value) is type(b.value) and a.value == b.value


UINT64_MAX = 2**64 - 1
Key = tuple[str, object]


@functools.lru_cache(maxsize=4096)
def _semver(text: str) -> Semver | None:
    """TEXT as upstream's semver parser holds it (numbers are uint64), else None. Cached:
    a constraint checks the same few versions on every step of the search."""
    try:
        v = Semver.parse(text)
    except ValueError:
        return None
    if max(v.major, v.minor, v.patch) > UINT64_MAX or any(
            isinstance(p, int) and p > UINT64_MAX for p in v.pre):
        return None
    return v


def attribute_key(attr: Attribute, semantics: Semantics, device: DeviceID, name: str) -> Key:
    """What a constraint compares: typed, so that a bool never equals an int; a version
    is its text up to 1.37 and a semantic version from 1.38 (build metadata ignored).
    From 1.38 a value it cannot evaluate stops the allocation (upstream's error)."""
    if attr.kind == "version" and semantics.semver_constraints:
        parsed = _semver(str(attr.value))
        if parsed is not None:
            return ("version", parsed)
        if semantics.constraint_errors:
            raise AllocationError(f"device {device}: unsupported attribute value for {name}")
    return (attr.kind, attr.value)  # kinds parse to distinct types: typed equality


class MatchAttribute:
    """Every device of the named requests must carry the same value of one attribute."""

    __slots__ = ("requests", "attribute", "value", "count", "semantics")

    def __init__(self, c: DeviceConstraint, semantics: Semantics = DEFAULT_SEMANTICS) -> None:
        self.requests = frozenset(c.requests)
        self.attribute = c.match_attribute or ""
        self.value: Key | None = None
        self.count = 0
        self.semantics = semantics

    def applies(self, w: Wanted) -> bool:
        if not self.requests:
            return True
        return w.base in self.requests or (bool(w.sub) and w.name in self.requests)

    def add(self, w: Wanted, d: Candidate) -> bool:
        if not self.applies(w):
            return True
        attr = d.attributes.get(self.attribute)
        if attr is None:
            return False
        key = attribute_key(attr, self.semantics, d.id, self.attribute)
        if self.count == 0:
            self.value, self.count = key, 1
            return True
        if key != self.value:
            return False
        self.count += 1
        return True

    def remove(self, w: Wanted) -> None:
        if self.applies(w):
            self.count -= 1


class DistinctAttribute(MatchAttribute):
    """Every device of the named requests must carry the attribute, each with its own
    value (KEP-5075's distinctAttribute, on by default upstream from 1.36)."""

    __slots__ = ("values",)

    def __init__(self, c: DeviceConstraint, semantics: Semantics = DEFAULT_SEMANTICS) -> None:
        super().__init__(c, semantics)
        self.attribute = c.distinct_attribute or ""
        self.values: list[Key] = []

    def add(self, w: Wanted, d: Candidate) -> bool:
        if not self.applies(w):
            return True
        attr = d.attributes.get(self.attribute)
        if attr is None:
            return False
        key = attribute_key(attr, self.semantics, d.id, self.attribute)
        if key in self.values:
            return False
        self.values.append(key)
        return True

    def remove(self, w: Wanted) -> None:
        if self.applies(w):
            self.values.pop()


def constraint_for(c: DeviceConstraint, semantics: Semantics = DEFAULT_SEMANTICS) -> MatchAttribute:
    return MatchAttribute(c, semantics) if c.match_attribute else DistinctAttribute(c, semantics)


@dataclass(frozen=True, slots=True)
class Pick:
    wanted: Wanted
    device: Candidate
    consumed: Mapping[str, Quantity] | None = None  # a share of a multi-allocatable device


def selectable(w: Wanted, sl: SliceCandidates, d: Candidate, node: NodeInfo | None,
               claim: ResourceClaim) -> bool:
    cached = w.match_cache.get(d.id)
    if cached is not None:
        return cached
    ok = selectors_match(w.device_class.selectors, d, f"class {w.device_class.name}")
    if ok:
        ok = selectors_match(w.spec.selectors, d, f"claim {claim_label(claim)}")
    if ok and sl.per_device:
        ok = placement_matches(d.placement, node)
    w.match_cache[d.id] = ok
    return ok


@dataclass(slots=True)
class Joint:
    """What the searches of several pods allocated together (a gang) share: each pod's
    search sees the devices, capacity and counters the earlier pods' searches took.
    Claim indices are offset per pod, so that two pods' claims never look alike."""

    ledger: Ledger
    allocating: dict[DeviceID, set[int]] = field(default_factory=dict)
    allocating_capacity: dict[DeviceID, dict[str, Number]] = field(default_factory=dict)
    sharing: dict[DeviceID, int] = field(default_factory=dict)
    steps: int = 0  # over all the pods' searches: the time budget is the gang's

    def tick(self, deadline: float) -> None:
        self.steps += 1
        if self.steps % BUDGET_CHECK_EVERY == 0 and time.monotonic() > deadline:
            raise TooComplex


class Search:
    """One allocation attempt over one node. `run()` -> True/False or raises.

    Within a gang (`joint`), each pod's search shares the others' state, admits only
    the devices of the gang's topology domain (`admit`), and on success continues into
    the next pod (`then`), so a dead end in a later pod backtracks into this pod's
    device choices too."""

    def __init__(self, claims: Sequence[ResourceClaim], node: NodeInfo | None,
                 inventory: Inventory, classes: dict[str, DeviceClass],
                 in_use: Collection[DeviceID], deadline: float,
                 shares: Shares = NO_SHARES, *, joint: Joint | None = None,
                 claim_offset: int = 0,
                 admit: Callable[[Candidate], bool] | None = None,
                 fractional_ranges: bool = False,
                 semantics: Semantics = DEFAULT_SEMANTICS) -> None:
        self.claims = claims
        self.fractional_ranges = fractional_ranges  # DRAFractionalCapacityRange
        self.semantics = semantics  # the release's behaviour where releases differ
        self.node = node
        self.in_use = in_use
        self.shares = shares
        self.offset = claim_offset
        self.joint = joint
        self.then: Callable[[], bool] | None = None
        self.admit = admit
        # KEP-5075: what this attempt gives of each shared device, and how many shares
        self.allocating_capacity: dict[DeviceID, dict[str, Number]] = (
            {} if joint is None else joint.allocating_capacity)
        self.sharing: dict[DeviceID, int] = {} if joint is None else joint.sharing
        self.deadline = deadline
        self.steps = 0
        # KEP-5007: pools with a device that has binding conditions come after all
        # others (upstream orders whole pools so; the sort is stable, ids stay in order)
        self.pools: list[tuple[PoolCandidates, tuple[SliceCandidates, ...]]] = sorted(
            ((p, t) for p in inventory if (t := p.targeting(node))),
            key=lambda pt: any(d.binding_conditions for sl in pt[1] for d in sl.devices))
        # Devices with fields draco does not model never become candidates (fail closed).
        self.usable: list[tuple[SliceCandidates, Candidate]] = [
            (sl, d) for p, t in self.pools if not p.unusable(t)
            for sl in t for d in sl.devices if not d.unsupported and (admit is None or admit(d))
        ]
        self.ledger = (Ledger((p for p, _ in self.pools), Charged(in_use, shares))
                       if joint is None else joint.ledger)
        self.plan: list[list[list[Wanted]]] = []
        self.constraints: list[list[MatchAttribute]] = []
        self.picks: list[list[Pick]] = [[] for _ in claims]
        self.allocating: dict[DeviceID, set[int]] = {} if joint is None else joint.allocating
        self.chosen: dict[tuple[int, int], int] = {}
        for ci, claim in enumerate(claims):
            per_request = wanted_for_claim(ci, claim, classes, self._prepare)
            minimum = sum(min(w.count for w in alts) for alts in per_request)
            if minimum > ALLOCATION_RESULTS_MAX_SIZE:
                raise AllocationError(
                    f"claim {claim_label(claim)}: number of requested devices {minimum} "
                    f"exceeds the claim limit of {ALLOCATION_RESULTS_MAX_SIZE}")
            self.plan.append(per_request)
            self.constraints.append([constraint_for(c, semantics) for c in check_constraints(claim)])

    def _prepare(self, w: Wanted) -> None:
        if w.all_mode:
            w.all_devices = self._all_devices(w, self.claims[w.claim_index])
            w.count = len(w.all_devices)

    def _all_devices(self, w: Wanted, claim: ResourceClaim) -> list[Candidate]:
        # 1.38: a pool being updated or invalid fails this node only (upstream wraps the
        # error so kube-scheduler tries the other nodes)
        bad_pool = NodeFailure if self.semantics.all_mode_node_failure else AllocationError
        found: list[Candidate] = []
        for p, targeting in self.pools:
            if p.unmodelled:
                raise AllocationError(
                    f"claim {claim_label(claim)}, request {w.sub or w.base}: asks for all "
                    f"devices, but resource pool {p.id} has devices using "
                    f"{', '.join(p.unmodelled)}, which draco does not support")
            if p.incomplete:
                raise bad_pool(
                    f"claim {claim_label(claim)}, request {w.sub or w.base}: asks for all "
                    f"devices, but resource pool {p.id} is currently being updated")
            if p.unusable(targeting):
                raise bad_pool(
                    f"claim {claim_label(claim)}, request {w.sub or w.base}: asks for all "
                    f"devices, but resource pool {p.id} is currently invalid")
            for sl in targeting:
                for d in sl.devices:
                    if self.admit is not None and not self.admit(d):
                        continue  # outside the gang's topology domain
                    if selectable(w, sl, d, self.node, claim):
                        if consumption(w.spec.capacity, d, {}, {}, self.fractional_ranges,
                                       self.semantics) is None:
                            continue  # its capacity could never serve the request (upstream)
                        if d.unsupported:
                            raise AllocationError(
                                f"claim {claim_label(claim)}, request {w.sub or w.base}: asks "
                                f"for all devices, but device {d.id} uses "
                                f"{', '.join(d.unsupported)}, which draco does not support")
                        found.append(d)
        return found

    # -- the recursion --------------------------------------------------------------

    def run(self) -> bool:
        try:
            return self._one(0, 0, 0, 0, False, 0)
        except _MaxSize:
            return False

    def _tick(self) -> None:
        self.steps += 1
        if self.joint is not None:
            self.joint.tick(self.deadline)  # many small searches: one budget, counted jointly
        elif self.steps % BUDGET_CHECK_EVERY == 0 and time.monotonic() > self.deadline:
            raise TooComplex

    def _one(self, ci: int, ri: int, si: int, di: int, in_sub: bool, start: int) -> bool:
        self._tick()
        if ci >= len(self.plan):
            return True if self.then is None else self.then()
        requests = self.plan[ci]
        if ri >= len(requests):
            try:
                return self._one(ci + 1, 0, 0, 0, False, 0)
            except _MaxSize:
                return False
        alts = requests[ri]
        if not in_sub and alts[0].sub_index >= 0:
            all_exceeded = True
            for k in range(len(alts)):
                try:
                    ok = self._one(ci, ri, k, di, True, 0)
                except _MaxSize:
                    continue
                all_exceeded = False
                if ok:
                    self.chosen[(ci, ri)] = k
                    return True
            if all_exceeded:
                raise _MaxSize
            return False
        w = alts[si]
        if w.all_devices is not None and not w.all_devices:
            return False
        if di >= w.count:
            return self._one(ci, ri + 1, 0, 0, False, 0)
        if len(self.picks[ci]) + w.count - di > ALLOCATION_RESULTS_MAX_SIZE:
            raise _MaxSize
        claim = self.claims[ci]
        if w.all_devices is not None:
            d = w.all_devices[di]
            if not self._take(w, d, must=True):
                return False
            try:
                done = self._one(ci, ri, si, di + 1, in_sub, 0)
            except BaseException:
                self._release(w, d)
                raise
            if not done:
                self._release(w, d)
            return done
        usable = self.usable
        if len(usable) - start < w.count - di:
            return False
        for pos in range(start, len(usable)):
            sl, d = usable[pos]
            if not d.allow_multiple_allocations and self._busy(w, d.id):
                continue
            if not selectable(w, sl, d, self.node, claim):
                continue
            if not self._take(w, d, must=False):
                continue
            try:
                done = self._one(ci, ri, si, di + 1, in_sub, pos + 1)
            except BaseException:
                self._release(w, d)
                raise
            if done:
                return True
            self._release(w, d)
        return False

    def _busy(self, w: Wanted, device_id: DeviceID) -> bool:
        holders = self.allocating.get(device_id)
        if w.admin_access:
            return holders is not None and self.offset + w.claim_index in holders
        return device_id in self.in_use or bool(holders)

    def _charges_counters(self, d: Candidate) -> bool:
        """A shared device uses up its counters once, with its first share."""
        if not d.allow_multiple_allocations:
            return True
        return d.id not in self.shares and not self.sharing.get(d.id)

    def _take(self, w: Wanted, d: Candidate, must: bool) -> bool:
        """Upstream's order: capacity, in use, counters, taints, constraints."""
        consumed = None
        if d.allow_multiple_allocations or w.spec.capacity:
            consumed = consumption(w.spec.capacity, d, self.shares.held.get(d.id, {}),
                                   self.allocating_capacity.get(d.id, {}), self.fractional_ranges,
                                   self.semantics)
            if consumed is None:
                return False
        if not d.allow_multiple_allocations and self._busy(w, d.id):
            return False
        if (not d.allow_multiple_allocations and not w.admin_access
                and self.semantics.live_share_blocks_exclusive
                and (d.id in self.shares or self.sharing.get(d.id))):
            return False  # 1.38: a share from when it allowed them still holds it
        if d.allow_multiple_allocations and d.id in self.in_use and not w.admin_access:
            return False  # a result without a share ID holds the whole device
        charge = self._charges_counters(d)
        if charge and self.ledger.take(d) is not None:
            return False
        if taint_blocks(d.taints, w.tolerations):
            if charge:
                self.ledger.release(d)
            return False
        cons = self.constraints[w.claim_index]
        for i, c in enumerate(cons):
            if not c.add(w, d):
                if charge:
                    self.ledger.release(d)
                if must:
                    raise AllocationError(
                        f"claim {claim_label(self.claims[w.claim_index])}, request "
                        f"{w.sub or w.base}: cannot add device {d.id} because a claim "
                        "constraint would not be satisfied")
                for prev in cons[:i]:
                    prev.remove(w)
                return False
        if d.allow_multiple_allocations:
            assert consumed is not None
            into = self.allocating_capacity.setdefault(d.id, {})
            for n, q in consumed.items():
                into[n] = into.get(n, 0) + num(q.value)
            self.sharing[d.id] = self.sharing.get(d.id, 0) + 1
            pick = Pick(w, d, consumed)
        else:
            self.allocating.setdefault(d.id, set()).add(self.offset + w.claim_index)
            pick = Pick(w, d)
        self.picks[w.claim_index].append(pick)
        return True

    def _release(self, w: Wanted, d: Candidate) -> None:
        pick = self.picks[w.claim_index].pop()
        for c in self.constraints[w.claim_index]:
            c.remove(w)
        if pick.consumed is not None:
            self.sharing[d.id] -= 1
            into = self.allocating_capacity[d.id]
            for n, q in pick.consumed.items():
                into[n] -= num(q.value)
        else:
            self.allocating[d.id].discard(self.offset + w.claim_index)
        if self._charges_counters(d):
            self.ledger.release(d)
