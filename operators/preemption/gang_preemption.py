"""Victim selection for a gang that cannot be placed: which running pods to evict so
that the gang's core fits, all together, in one topology domain. Pure, as
`preemption.preemption` is for one pod, and built from the same parts: the victims'
freed devices and shares, the same order of reprieve and the same ranking; where a
pod's search looks at one node at a time, a gang's looks at one domain at a time.

- The gang preempts with the lowest priority among its members still to place: a
  victim has a lower priority than every member that may get its devices. A member
  whose `preemptionPolicy` is `Never`, or a PodGroup's own `spec.preemptionPolicy:
  Never` (1.38), keeps the whole gang from preempting.
- Per candidate domain (those of `gang.candidate_domains`, in order): every
  lower-priority pod holding a device the domain's usable nodes reach, in a pool where
  some request of the gang matches a device (a partition's neighbours share its
  counters), or a device outside a device-attribute domain that consumes a counter set
  of one inside it, is removed, with its running gang unless that keeps minCount
  (`victim_gangs`); the domain is counted first (`gang.Demand`, a claim members share
  counted once) and searched (`gang.place_gang`, that domain only) with them gone. If
  the gang fits, victims are reprieved one by one as for a pod (PDB violators first,
  then by priority, highest first), each kept when the gang still fits: at once when
  what it frees lies in no pool of the placement found, else by a search.
- Domains are ranked as nodes are for a pod (fewest PDB violations, lowest highest
  priority, lowest sum, fewest victims, latest start); the search stops after
  `CANDIDATE_DOMAINS` domains that work (draco's choice: upstream has no gang preemption,
  and a domain costs a search per victim where a node costs one per node), or when the
  time budget is spent (the best found so far stands: a valid answer, maybe with a
  victim more than needed).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence

from operators.allocator.capacity import Shares, shares_from_claims
from operators.allocator.features import DEFAULT_GATES, FeatureGates
from operators.allocator.inventory import Candidate, NodeInfo
from operators.allocator.nodes import NodeIndex
from operators.allocator.requests import AllocationError, Wanted
from operators.gangs.gang import (
    Demand,
    Domain,
    GangOutcome,
    Member,
    candidate_domains,
    domain_devices,
    gang_requests,
    member_nodes,
    place_gang,
)
from operators.model import DeviceClass, DeviceID
from operators.model.disruption import DisruptionBudget
from operators.model.gangs import Gang
from operators.preemption.preemption import (
    Holders,
    Lower,
    Preemption,
    Prepared,
    Verdict,
    Without,
    device_ids,
    freed_by,
    importance,
    minus_shares,
    rank,
    reprieve_order,
    why,
)
from operators.preemption.victim_gangs import VictimGangs, reprieve

CANDIDATE_DOMAINS = 10


def select_gang_victims(
    gang: Gang,
    members: Sequence[Member],
    index: NodeIndex,
    classes: Mapping[str, DeviceClass],
    in_use: Collection[DeviceID],
    prepared: Prepared,
    budgets: Sequence[DisruptionBudget] = (),
    units: VictimGangs | None = None,
    budget_s: float = 10.0,
    shares: Shares | None = None,
    known: GangOutcome | None = None,
    features: FeatureGates = DEFAULT_GATES,
) -> Preemption:
    """SHARES: what other claims' shares consume now (default: PREPARED's, from the
    claims alone); IN_USE as for `place_gang`. KNOWN: the gang's placement over these
    same inputs when the caller has it already (the controller does): not searched again.
    FEATURES: the gates and release behaviour to allocate with, as for `place_gang`."""
    deadline = time.monotonic() + budget_s
    base = prepared.base_shares if shares is None else shares
    first = known if known is not None else place_gang(
        gang, members, index, classes, in_use, budget_s, shares=base, explain=False,
        features=features)
    if first.allocated:
        return _answer("fits", first, (), "the gang fits without preemption")
    if first.status != "unsatisfiable":
        return Preemption("impossible", reason=f"the gang cannot be placed: {first.reason}")
    pending = sorted((m for m in members if not m.placed), key=lambda m: m.label)
    placed = [m for m in members if m.placed]
    if len(members) < gang.min_count:
        return Preemption("impossible", reason=first.reason or "waiting for members")
    if gang.preemption_policy == "Never":
        return Preemption("impossible", reason=f"{gang.kind} {gang.label}'s preemptionPolicy is Never")
    never = [m.label for m in pending if m.pod.preemption_policy == "Never"]
    if never:
        return Preemption("impossible", reason=f"member {never[0]}'s preemptionPolicy is Never")
    priority = min(m.pod.priority for m in pending)
    lower = Lower(prepared.running, priority)
    own = {m.label for m in members}
    if not any(label not in own for label in lower):
        return Preemption("impossible", reason=f"no running pod has a lower priority than "
                                               f"{priority}, the gang's lowest")
    domains = candidate_domains(gang, placed, index)
    if isinstance(domains, str):
        return Preemption("impossible", reason=domains)
    need = max(0, gang.min_count - len(placed))
    try:  # the core's requests (pending is by name, as place_gang's core): extras may wait
        plans = gang_requests(pending[:need], classes)  # a shared claim counted once
    except AllocationError as e:
        return Preemption("impossible", reason=str(e))
    demand = Demand(plans)  # what must fit
    pools = _pools_wanted(plans, index)
    nodes = member_nodes(pending, index)
    usable = {n.name: n for allowed in nodes.values() for n in allowed}
    holders = Holders(prepared.holders, priority)
    gangs = units if units is not None else VictimGangs()
    trial = _Trial(gang, members, index, classes, in_use, lower, prepared, base, deadline, nodes,
                   features)
    best: tuple[tuple[float, ...], Preemption] | None = None
    found_in = 0

    def may_go(label: str) -> bool:
        return label in lower and label not in own

    for domain in domains:
        if found_in >= CANDIDATE_DOMAINS or time.monotonic() >= deadline:
            break
        reach = domain_devices(domain, gang, index, usable)
        freeing = _freeing(domain, gang, index, usable, reach, pools)
        potential = list(dict.fromkeys(h for d in freeing for h in holders.get(d, ())))
        fits: GangOutcome | None = None
        for wish in gangs.wishes(potential, may_go, lambda v: importance(lower[v])):
            victims = gangs.closure(wish)
            if not victims or not all(may_go(v) for v in victims) \
                    or demand.check(reach, index, trial.without(victims))[1] is not None:
                continue  # short by count even with every lower-priority holder gone
            fits = trial.fits(victims, domain.text)
            if fits is not None:
                break
        if fits is None:
            continue
        found_in += 1

        def attempt(kept: list[str], now: list[str], fits: GangOutcome,
                    reach: list[Candidate] = reach, domain_text: str = domain.text) -> GangOutcome | None:
            if time.monotonic() >= deadline:
                return None
            staying = set(kept)
            if trial.untouched(now, [v for v in now if v not in staying], fits):
                return fits  # what it frees is no part of the placement: it stays
            if demand.check(reach, index, trial.without(kept))[1] is not None:
                return None
            return trial.fits(kept, domain_text)

        first_fit: GangOutcome = fits
        victims, got = reprieve(wish, victims, first_fit, reprieve_order(victims, lower, budgets), gangs,
                                attempt)
        score = rank(victims, lower, budgets)
        where = f"topology domain {domain.text}" if domain.text else "the cluster"
        answer = _answer("preempt", got, tuple(sorted(victims)), why(
            victims, lower, int(score[0]),
            f"what the gang's {len(got.placed)} member(s) need in {where}"), int(score[0]))
        if best is None or score < best[0]:
            best = (score, answer)
    if best is None:
        return Preemption("impossible", reason="evicting every lower-priority pod would still not "
                                               "let the gang be placed in any topology domain")
    return best[1]


def _freeing(domain: Domain, gang: Gang, index: NodeIndex, usable: Mapping[str, NodeInfo],
             reach: Sequence[Candidate], pools: Collection[tuple[str, str]]) -> list[DeviceID]:
    """The devices whose holders may free what the gang needs in DOMAIN: those it reaches
    in a pool some request of the gang matches (a partition's neighbours share its
    counters), and, with a device-attribute domain, the devices outside it that the
    domain's nodes reach and that consume a counter set an inside device consumes (a
    whole GPU without the attribute uses up the counters of its in-domain halves)."""
    out = [d.id for d in reach if (d.id.driver, d.id.pool) in pools]
    admit = domain.admits(gang.device_attribute)
    if admit is None:
        return out
    sets = {(d.id.driver, d.id.pool, cc.counter_set) for d in reach for cc in d.consumes}
    if not sets:
        return out
    inside = set(out)
    names = sorted(usable if domain.nodes is None else (n for n in domain.nodes if n in usable))
    for name in names:
        for dev in index.view(usable[name])[1]:
            if dev.id in inside or admit(dev):
                continue
            if any((dev.id.driver, dev.id.pool, cc.counter_set) in sets for cc in dev.consumes):
                inside.add(dev.id)
                out.append(dev.id)
    return out


def _pools_wanted(plans: Sequence[Sequence[Sequence[Wanted]]], index: NodeIndex) -> set[tuple[str, str]]:
    """The pools with a device some request of the gang matches (any alternative)."""
    out: set[tuple[str, str]] = set()
    for plan in plans:
        for alts in plan:
            for w in alts:
                ids, _ = index.matcher.matching(w)
                out.update((i.driver, i.pool) for i in ids)
    return out


class _Trial:
    """The gang placed in one domain with some victims gone."""

    def __init__(self, gang: Gang, members: Sequence[Member], index: NodeIndex,
                 classes: Mapping[str, DeviceClass], in_use: Collection[DeviceID], lower: Lower,
                 prepared: Prepared, base: Shares, deadline: float,
                 nodes: Mapping[str, list[NodeInfo]], features: FeatureGates = DEFAULT_GATES) -> None:
        self.gang, self.members, self.index, self.classes = gang, members, index, classes
        self.in_use, self.lower, self.prepared, self.base = in_use, lower, prepared, base
        self.deadline, self.nodes, self.features = deadline, nodes, features

    def without(self, victims: Collection[str]) -> Collection[DeviceID]:
        return Without(self.in_use, freed_by(victims, self.lower, self.prepared.consumers)[0])

    def untouched(self, victims: Collection[str], unit: Collection[str], fits: GangOutcome) -> bool:
        """The placement FITS stands with the pods of UNIT reprieved: what they alone free
        among VICTIMS (their claims no other pod keeps; whole devices and shares) lies in
        no pool of a placed device (counters are per pool, so a partition's neighbours
        count too). No search needed then."""
        going = set(victims)
        pools = {(r.driver, r.pool) for p in fits.placed for _, a in p.allocations for r in a.results}
        for label in unit:
            for c in self.lower[label].claims:
                key = c.meta.key
                if not self.prepared.consumers.get(key, frozenset({label})) <= going:
                    continue  # freed by no one: kept by a pod that stays anyway
                if key in self.prepared.sharing:
                    return False
                if c.allocation is not None and any((r.driver, r.pool) in pools
                                                    for r in c.allocation.results):
                    return False
        return True

    def fits(self, victims: Collection[str], domain: str) -> GangOutcome | None:
        left = self.deadline - time.monotonic()
        if left <= 0:
            return None
        devices, claims = freed_by(victims, self.lower, self.prepared.consumers)
        freed_shares = shares_from_claims(self.prepared.sharing[k] for k in claims
                                          if k in self.prepared.sharing)
        outcome = place_gang(self.gang, self.members, self.index, self.classes,
                             Without(self.in_use, devices), left, shares=minus_shares(self.base, freed_shares),
                             only_domain=domain, nodes=self.nodes, explain=False,
                             features=self.features)
        return outcome if outcome.allocated else None


def _answer(verdict: Verdict, outcome: GangOutcome, victims: tuple[str, ...], reason: str,
            bad: int = 0) -> Preemption:
    allocations = tuple(a for p in outcome.placed for _, a in p.allocations)
    return Preemption(verdict, victims, device_ids(allocations), None, reason,
                      bad, allocations, outcome.placed, outcome.domain)


__all__ = ["select_gang_victims"]
