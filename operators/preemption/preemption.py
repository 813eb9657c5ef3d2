"""Victim selection for a gated pod that cannot be allocated: which running pods to evict
so that its claims fit. Pure: plain data in, a `Preemption` out, nothing written.

kube-scheduler's DRA plugin cannot do this (no preemption hooks in 1.37): removing a
simulated victim frees none of its devices. Here a victim frees the devices of every
claim whose consumers are all victims (a claim shared with a pod that stays keeps its
devices), whole devices and shares alike, wherever they are reachable from.

Following upstream's default preemption where it applies:
- only pods of lower `spec.priority` than the preemptor are victims, and none at all
  when the preemptor's `preemptionPolicy` is `Never`;
- per candidate node (the nodes kube-scheduler's filters leave the pod, as for an
  allocation): every lower-priority pod whose freed devices the node reaches is removed;
  if the claims then fit there, victims are reprieved one by one, those whose eviction
  would violate a PodDisruptionBudget first, then by priority, highest first (then the
  earliest started): a pod is reprieved when the claims still fit with it kept;
- candidate nodes are tried in name order until 100 (or 10 % of the nodes, if more)
  can take the pod with victims and one of them violates no PodDisruptionBudget, as
  upstream's dry run stops; a node where some plain request cannot find enough devices
  that are free or freeable, by counting, is skipped;
- the node is chosen as upstream's pickOneNodeForPreemption chooses: fewest PDB
  violations, then the lowest highest-victim priority, then the lowest sum of victim
  priorities (each raised by 2^31), then the fewest victims, then, per node, the
  earliest start among its highest-priority victims, the node where that is latest
  preferred; ties to the node tried first.
A member of a running gang is evicted alone only while its gang keeps `minCount`
running members (launchers without devices count); otherwise the gang goes whole
(`victim_gangs`: the search reprieves from a wish whose closure is always valid).
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from operators.allocator.capacity import Shares, shares_from_claims
from operators.allocator.features import DEFAULT_GATES, FeatureGates
from operators.allocator.inventory import Candidate, NodeInfo
from operators.allocator.nodes import NodeIndex, PodFit, candidate_nodes, place
from operators.allocator.requests import Wanted, wanted_for_claim
from operators.allocator.reserved import Reserved
from operators.gangs.gang import Placed
from operators.model import (
    AllocationResult,
    DeviceClass,
    DeviceID,
    NamespacedName,
    Pod,
    ResourceClaim,
)
from operators.model.disruption import DisruptionBudget
from operators.preemption.victim_gangs import VictimGangs, reprieve

Verdict = Literal["preempt", "fits", "impossible"]
# kube-scheduler's DefaultPreemption: the dry run stops once it has this many candidate
# nodes (minCandidateNodesAbsolute) or this share of the nodes (minCandidateNodesPercentage)
MIN_CANDIDATES = 100
MIN_CANDIDATE_PERCENT = 10


@dataclass(frozen=True, slots=True)
class Running:
    """A pod that could be a victim, with its allocated claims."""

    pod: Pod
    claims: tuple[ResourceClaim, ...]

    @property
    def label(self) -> str:
        return f"{self.pod.meta.namespace}/{self.pod.meta.name}"


@dataclass(frozen=True, slots=True)
class Preemption:
    verdict: Verdict
    victims: tuple[str, ...] = ()  # NS/NAME
    devices: tuple[str, ...] = ()  # driver/pool/device, the preemptor's nominated devices
    node: str | None = None
    reason: str = ""
    pdb_violations: int = 0
    allocations: tuple[AllocationResult, ...] = field(default=())  # the nominated allocations
    # a gang preemptor: each member placed on the freed devices (node, allocations)
    placed: tuple[Placed, ...] = ()
    domain: str | None = None


def freed_by(victims: Collection[str], running: Mapping[str, Running],
           consumers: Mapping[NamespacedName, frozenset[str]]) -> tuple[set[DeviceID], set[NamespacedName]]:
    """The devices (whole) and the claims the victims free: claims all of whose
    consumers are victims."""
    devices: set[DeviceID] = set()
    claims: set[NamespacedName] = set()
    for label in victims:
        for c in running[label].claims:
            key = c.meta.key
            if key in claims or not consumers.get(key, frozenset({label})) <= set(victims):
                continue
            claims.add(key)
            if c.allocation is not None:
                devices.update(r.id for r in c.allocation.results if not r.admin_access and not r.share_id)
    return devices, claims


def violations(victims: Sequence[str], running: Mapping[str, Running],
                budgets: Sequence[DisruptionBudget]) -> set[str]:
    """The victims whose eviction goes beyond a budget's allowed disruptions (upstream
    counts in the order given: highest priority first)."""
    left = {id(b): b.disruptions_allowed for b in budgets}
    out: set[str] = set()
    for label in victims:
        pod = running[label].pod
        for b in budgets:
            if b.selects(pod.meta.namespace, pod.meta.labels):
                left[id(b)] -= 1
                if left[id(b)] < 0:
                    out.add(label)
    return out


def importance(r: Running) -> tuple[int, float]:
    """Upstream's MoreImportantPod as a sort key: higher priority, then started earlier."""
    started = r.pod.start_time.timestamp() if r.pod.start_time is not None else float("inf")
    return (-r.pod.priority, started)


@dataclass(frozen=True, slots=True)
class Prepared:
    """What victim selection derives from the cluster's claims and running pods, whoever
    the preemptor: computed once per state (`prepare`) and shared by every preemptor
    decided against it, so that one decision costs the nodes it looks at, not the
    cluster's claims."""

    running: Mapping[str, Running]  # label -> pod with its allocated claims
    consumers: Mapping[NamespacedName, frozenset[str]]  # claim -> pods (and groups) using it
    sharing: Mapping[NamespacedName, ResourceClaim]  # claims holding shares
    # device -> (pod label, the highest priority among the consumers of the claim it holds
    # the device through): the pod frees it for a preemptor of higher priority than that
    holders: Mapping[DeviceID, tuple[tuple[str, int], ...]]
    base_shares: Shares


def prepare(running: Iterable[Running], all_claims: Iterable[ResourceClaim]) -> Prepared:
    claims_all = list(all_claims)
    by_label = {r.label: r for r in running if not r.pod.terminal and not r.pod.meta.deleting}
    sharing = {c.meta.key: c for c in claims_all if c.allocation is not None
               and any(r.share_id for r in c.allocation.results)}
    consumers: dict[NamespacedName, frozenset[str]] = {}
    for c in claims_all:
        if c.allocation is not None:
            users = {f"{c.namespace}/{r.name}" for r in c.reserved_for if r.is_pod}
            for ref in c.reserved_for:
                if ref.is_pod_group:  # KEP-5729: the group keeps it whatever pod goes
                    users.add(f"podgroup:{ref.name}")
            consumers[c.meta.key] = frozenset(users)
    holders: dict[DeviceID, list[tuple[str, int]]] = {}
    never = 1 << 62  # a consumer that is no running pod (a group, a pod gone) never frees it
    for label, held in by_label.items():
        for c in held.claims:
            if c.allocation is None:
                continue
            using = consumers.get(c.meta.key, frozenset())
            top = max((by_label[u].pod.priority if u in by_label else never for u in using),
                      default=held.pod.priority)
            for res in c.allocation.results:
                if not res.admin_access and not res.share_id:
                    holders.setdefault(res.id, []).append((label, top))
    return Prepared(by_label, consumers, sharing,
                    {d: tuple(h) for d, h in holders.items()}, shares_from_claims(claims_all))


def select_victims(
    preemptor: Pod,
    pending: Sequence[ResourceClaim],
    allocated: Sequence[ResourceClaim],
    running: Iterable[Running],
    index: NodeIndex,
    classes: Mapping[str, DeviceClass],
    in_use: Collection[DeviceID],
    all_claims: Iterable[ResourceClaim],
    budgets: Sequence[DisruptionBudget] = (),
    units: VictimGangs | None = None,
    budget_s: float = 10.0,
    prepared: Prepared | None = None,
    features: FeatureGates = DEFAULT_GATES,
) -> Preemption:
    """UNITS: the running gangs (`preemption_inputs.gang_units`): a victim gang keeps
    minCount or goes whole.
    PREPARED: `prepare(running, all_claims)`, when the caller decides several preemptors
    against one state (RUNNING and ALL_CLAIMS are then not read).
    FEATURES: the gates and release behaviour to allocate with, as for `nodes.place`."""
    ready = prepared if prepared is not None else prepare(running, all_claims)
    base_shares = ready.base_shares
    allowed, refused = candidate_nodes(index.nodes, [PodFit(preemptor, tuple(allocated))])
    view = copy.copy(index)
    view.nodes = allowed
    first = place(pending, view, classes, in_use, budget_s, refused=refused, shares=base_shares,
                  with_explain=False, features=features)
    if first.allocated:
        return Preemption("fits", devices=device_ids(first.outcome.allocations), node=first.node,
                          reason="the claims fit without preemption",
                          allocations=first.outcome.allocations)
    if preemptor.preemption_policy == "Never":
        return Preemption("impossible", reason="the pod's preemptionPolicy is Never")
    priority = preemptor.priority
    lower = Lower(ready.running, priority)
    if not any(r.pod.priority < priority for r in ready.running.values()):
        return Preemption("impossible", reason=f"no running pod has a lower priority than "
                                               f"{preemptor.priority}")
    sharing, consumers = ready.sharing, ready.consumers
    gangs = units if units is not None else VictimGangs()
    holders = Holders(ready.holders, priority)  # device -> the lower-priority pods freeing it
    best: tuple[tuple[float, ...], Preemption] | None = None
    wanted = [alts[0] for ci, c in enumerate(pending) for alts in wanted_for_claim(ci, c, classes)
              if len(alts) == 1 and not alts[0].all_mode and not alts[0].admin_access]
    enough_found = max(MIN_CANDIDATES, len(allowed) * MIN_CANDIDATE_PERCENT // 100)
    candidates = clean = 0
    for node in allowed:
        if candidates >= enough_found and clean:
            break  # upstream's dry run stops after enough candidates, one without violations
        reachable = index.view(node)[1]
        potential = list(dict.fromkeys(h for d in reachable for h in holders.get(d.id, ())))
        if not potential or not _could_fit(wanted, reachable, index, in_use, holders):
            continue
        fits: tuple[AllocationResult, ...] | None = None
        for wish in gangs.wishes(potential, lower.__contains__, lambda v: importance(lower[v])):
            victims = gangs.closure(wish)
            if victims and all(v in lower for v in victims):
                fits = _fits(victims, node, pending, view, classes, in_use, lower, consumers, sharing,
                             base_shares, budget_s, features)
                if fits is not None:
                    break
        if fits is None:
            continue
        candidates += 1

        def attempt(trial: list[str], _now: list[str], _fits_now: object, node: NodeInfo = node,
                    reachable: Sequence[Candidate] = reachable) -> tuple[AllocationResult, ...] | None:
            if not _could_fit(wanted, reachable, index, Without(in_use, freed_by(trial, lower, consumers)[0]),
                              {}):
                return None  # by counting alone the claims cannot fit with it kept
            return _fits(trial, node, pending, view, classes, in_use, lower, consumers, sharing,
                         base_shares, budget_s, features)

        first_fit: tuple[AllocationResult, ...] = fits
        victims, got = reprieve(wish, victims, first_fit, reprieve_order(victims, lower, budgets), gangs,
                                attempt)
        score = rank(victims, lower, budgets)
        bad = int(score[0])
        clean += not bad
        found = Preemption("preempt", tuple(sorted(victims)), device_ids(got), node.name,
                           why(victims, lower, bad, f"what the claims need on node {node.name}"), bad, got)
        if best is None or score < best[0]:
            best = (score, found)
    if best is None:
        return Preemption("impossible", reason="evicting every lower-priority pod would still not "
                                               "make the claims fit on any node the pod may use")
    return best[1]


def reprieve_order(victims: Sequence[str], lower: Mapping[str, Running],
                   budgets: Sequence[DisruptionBudget]) -> list[str]:
    """The order victims are tried for a reprieve: those whose eviction would violate a
    PodDisruptionBudget first, then the rest; each group the most important first."""
    order = sorted(victims, key=lambda v: importance(lower[v]))
    violating = violations(order, lower, budgets)
    return [v for v in order if v in violating] + [v for v in order if v not in violating]


def rank(victims: Sequence[str], lower: Mapping[str, Running],
         budgets: Sequence[DisruptionBudget]) -> tuple[float, ...]:
    """A candidate's victims as upstream's pickOneNodeForPreemption ranks candidates,
    lowest best: PDB violations, the highest victim priority, the sum of priorities
    (each raised by 2^31, as upstream, so that more victims of a negative priority never
    look cheaper), the count, then the earliest start among the highest-priority victims,
    the latest preferred (negated; a victim not started yet counts as starting now,
    later than any start)."""
    order = sorted(victims, key=lambda v: importance(lower[v]))
    bad = len(violations(order, lower, budgets))
    top = max(lower[v].pod.priority for v in victims) if victims else -(1 << 31)
    starts = [lower[v].pod.start_time for v in victims if lower[v].pod.priority == top]
    earliest = min((s.timestamp() if s is not None else float("inf") for s in starts),
                   default=float("inf"))
    return (bad, top, sum(lower[v].pod.priority + (1 << 31) for v in victims), len(victims),
            -earliest)


class Lower(Mapping[str, Running]):
    """The running pods of lower priority than the preemptor, read through, not copied."""

    def __init__(self, running: Mapping[str, Running], priority: int) -> None:
        self.running, self.priority = running, priority

    def __getitem__(self, label: str) -> Running:
        found = self.running[label]
        if found.pod.priority >= self.priority:
            raise KeyError(label)
        return found

    def __iter__(self) -> Iterator[str]:
        return (k for k, r in self.running.items() if r.pod.priority < self.priority)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, label: object) -> bool:
        found = self.running.get(label) if isinstance(label, str) else None
        return found is not None and found.pod.priority < self.priority


class Holders(Mapping[DeviceID, list[str]]):
    """Device -> the pods that would free it for a preemptor of PRIORITY: the holders of
    claims all of whose consumers have lower priority."""

    def __init__(self, holders: Mapping[DeviceID, tuple[tuple[str, int], ...]], priority: int) -> None:
        self.holders, self.priority = holders, priority

    def __getitem__(self, device: DeviceID) -> list[str]:
        found = [label for label, top in self.holders[device] if top < self.priority]
        if not found:
            raise KeyError(device)
        return found

    def __iter__(self) -> Iterator[DeviceID]:
        return (d for d in self.holders if d in self)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, device: object) -> bool:
        return any(top < self.priority for _, top in self.holders.get(device, ()))  # type: ignore[call-overload]


def _could_fit(wanted: Sequence[Wanted], reachable: Sequence[Candidate], index: NodeIndex,
               in_use: Collection[DeviceID], holders: Mapping[DeviceID, list[str]]) -> bool:
    """By counting: each plain request finds enough matching devices that are free or
    that lower-priority pods would free (the search decides; this skips nodes where it
    surely fails, with no CEL per node: the match sets are the index's)."""
    for w in wanted:
        ids, _ = index.matcher.matching(w)
        have = sum(1 for d in reachable if d.id in ids and (d.id not in in_use or d.id in holders))
        if have < w.count:
            return False
    return True


class Without(Collection[DeviceID]):
    """IN_USE less what the victims free, as a view (no copy per trial)."""

    def __init__(self, in_use: Collection[DeviceID], freed: Collection[DeviceID]) -> None:
        self.in_use, self.freed = in_use, freed

    def __contains__(self, device: object) -> bool:
        return _stays_in_use(device, self.in_use, self.freed)

    def __iter__(self) -> Iterator[DeviceID]:
        return (d for d in self.in_use if d not in self.freed)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _stays_in_use(device: object, in_use: Collection[DeviceID], freed: Collection[DeviceID]) -> bool:
    """In use even with FREED released: what victims free comes out of the devices
    claims hold, never out of what is reserved on top of them (devices nominated to
    another preemptor, a waiting gang's domain): those stay taken."""
    if isinstance(in_use, Reserved):
        return device in in_use.extra or _stays_in_use(device, in_use.base, freed)
    return device not in freed and device in in_use


def minus_shares(base: Shares, freed: Shares) -> Shares:
    if not freed.held:
        return base
    out = Shares({d: dict(c) for d, c in base.held.items()})
    for d, consumed in freed.held.items():
        left = out.held.get(d, {})
        for name, amount in consumed.items():
            left[name] = left.get(name, 0) - amount
        if all(v <= 0 for v in left.values()):
            out.held.pop(d, None)
    return out


def _fits(victims: Collection[str], node: NodeInfo, pending: Sequence[ResourceClaim], view: NodeIndex,
          classes: Mapping[str, DeviceClass], in_use: Collection[DeviceID],
          lower: Mapping[str, Running], consumers: Mapping[NamespacedName, frozenset[str]],
          sharing: Mapping[NamespacedName, ResourceClaim], base_shares: Shares,
          budget_s: float, features: FeatureGates = DEFAULT_GATES) -> tuple[AllocationResult, ...] | None:
    """The preemptor's allocations on NODE with VICTIMS gone, or None if it does not fit.
    SHARING: the claims that hold shares of multi-allocatable devices."""
    freed, freed_claims = freed_by(victims, lower, consumers)
    shares: Shares = shares_from_claims(sharing[k] for k in freed_claims if k in sharing)
    placed = place(pending, view, classes, Without(in_use, freed), budget_s, only=node,
                   shares=minus_shares(base_shares, shares), with_explain=False, features=features)
    return placed.outcome.allocations if placed.allocated else None


def device_ids(allocations: Iterable[AllocationResult]) -> tuple[str, ...]:
    return tuple(f"{r.driver}/{r.pool}/{r.device}" for a in allocations for r in a.results)


def why(victims: Collection[str], lower: Mapping[str, Running], bad: int, what: str) -> str:
    """The answer's reason: how many go, up to which priority, and WHAT they free."""
    top = max(lower[v].pod.priority for v in victims)
    budget = "no PodDisruptionBudget violated" if not bad else f"{bad} PodDisruptionBudget violation(s)"
    return f"evicting {len(victims)} pod(s) of priority at most {top} frees {what} ({budget})"


__all__ = ["Holders", "Lower", "Preemption", "Prepared", "Running", "Without", "device_ids", "freed_by",
           "importance", "minus_shares", "prepare", "rank", "reprieve_order", "select_victims",
           "violations", "why"]
