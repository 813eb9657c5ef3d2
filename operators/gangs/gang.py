"""A gang's placement: its members' claims allocated jointly in one topology domain.

Pure: members, a device view and a node index in, a `GangOutcome` out; nothing is
written. The controller writes the outcome only when it is `allocated`, and the CLI
(`draco allocate --gang`) prints it.

Which members: members whose claims are all allocated already are placed. Of the
others, the first `minCount - placed` (in name order, so an Indexed Job's pods go by
index) are the core, placed jointly, all or nothing; the rest are extras, each placed
after the core in the same domain when it fits, and left waiting when it does not.
A gang with fewer members than `minCount` waits without a search.

Domains: one per value of the node label (nodes without the label are in none), one
per value of the device attribute (devices without it are in none), or one per pair
of both; a gang without topology has one domain, the whole cluster. When members are
placed already, the domain is theirs. Before any search, each domain is checked by
counting: per kind of request (class and selectors), the free matching devices the
domain reaches against what the core asks in total; a domain short by count is never
searched, and the count is its reason. The rest are searched best fit first (the
least spare devices of the scarcest kind, then the domain's name), so a small gang
does not take the one domain a large gang could use; the first placement found wins.
A claim several members name is one claim, counted and allocated once
(`gang_requests`). In a domain the core goes most constrained first, each member to
its tightest node first (`gang_order`). A search that runs out of its time budget
before a verdict is `undecided`, never `unsatisfiable`.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from operators.allocator.capacity import NO_SHARES, Shares
from operators.allocator.features import DEFAULT_GATES, FeatureGates
from operators.allocator.inventory import Candidate, NodeInfo
from operators.allocator.nodes import NodeIndex, PodFit, candidate_nodes, filter_shape, place
from operators.allocator.requests import AllocationError, Wanted, wanted_for_claim
from operators.allocator.results import build_allocation
from operators.allocator.search import TooComplex, same_attribute, taint_blocks
from operators.gangs.gang_order import search_order
from operators.gangs.gang_search import JointSearch, MemberPlan
from operators.model import AllocationResult, Attribute, DeviceClass, DeviceID, Pod, ResourceClaim
from operators.model.gangs import Gang

# "undecided": the time budget ran out before the search either found a placement or
# ruled every domain out; never reported as "unsatisfiable"
GangStatus = Literal["allocated", "unsatisfiable", "error", "undecided"]


@dataclass(frozen=True, slots=True)
class Member:
    """A pod of the gang: `pending` claims to allocate, `allocated` ones already are."""

    label: str  # NS/NAME
    pod: Pod
    pending: tuple[ResourceClaim, ...] = ()
    allocated: tuple[ResourceClaim, ...] = ()

    @property
    def placed(self) -> bool:
        return not self.pending


@dataclass(frozen=True, slots=True)
class Placed:
    """A member placed by this outcome: its node and each new claim's allocation."""

    label: str
    node: str
    allocations: tuple[tuple[ResourceClaim, AllocationResult], ...]


@dataclass(frozen=True, slots=True)
class Domain:
    text: str  # "KEY=VALUE" per topology key, comma-joined; "" without topology
    label_value: str | None = None
    attribute: Attribute | None = None
    nodes: frozenset[str] | None = None  # None: every node

    def admits(self, attribute_name: str | None) -> Callable[[Candidate], bool] | None:
        """The filter of devices inside the domain (None: every device is)."""
        if self.attribute is None or attribute_name is None:
            return None
        want = self.attribute

        def admit(d: Candidate) -> bool:
            got = d.attributes.get(attribute_name)
            return got is not None and same_attribute(got, want)

        return admit


@dataclass(frozen=True, slots=True)
class GangOutcome:
    status: GangStatus
    domain: str | None = None
    placed: tuple[Placed, ...] = ()
    reason: str | None = None
    waiting: tuple[str, ...] = ()  # extras left waiting (they fit nowhere in the domain)
    partial: tuple[tuple[str, str], ...] = ()  # the best partial placement: (member, node)
    domains: int = 0
    searched: int = 0
    steps: int = 0
    # when unsatisfiable: the devices of the domain it came closest in (the deepest
    # partial placement, else the smallest shortfall by count), for a reservation
    closest: frozenset[DeviceID] = field(default=frozenset())

    @property
    def allocated(self) -> bool:
        return self.status == "allocated"


def _attr_text(a: Attribute) -> str:
    return str(a.value).lower() if isinstance(a.value, bool) else str(a.value)


def domains_of(gang: Gang, index: NodeIndex) -> list[Domain]:
    """Every topology domain of the cluster for this gang, by name."""
    key, attr = gang.node_label, gang.device_attribute
    if not key and not attr:
        return [Domain("")]
    by_label: dict[str, set[str]] = {}
    if key:
        for n in index.nodes:
            if key in n.labels:
                by_label.setdefault(n.labels[key], set()).add(n.name)
    if not attr:
        return [Domain(f"{key}={v}", v, None, frozenset(names)) for v, names in sorted(by_label.items())]
    per_label: dict[str, dict[tuple[str, object], Attribute]] = {}
    reach: dict[tuple[str, object], set[str]] = {}  # attribute value -> nodes reaching it
    values: dict[tuple[str, object], Attribute] = {}
    label_of = {n.name: n.labels.get(key) for n in index.nodes} if key else {}
    for n in index.nodes:
        if key and label_of.get(n.name) is None:
            continue
        for d in index.view(n)[1]:
            a = d.attributes.get(attr)
            if a is None:
                continue
            k: tuple[str, object] = (a.kind, a.value)
            values.setdefault(k, a)
            reach.setdefault(k, set()).add(n.name)
            if key:
                per_label.setdefault(label_of[n.name] or "", {}).setdefault(k, a)
    out: list[Domain] = []
    if key:
        for v in sorted(per_label):
            for k, a in per_label[v].items():
                nodes = frozenset(by_label[v] & reach[k])
                out.append(Domain(f"{key}={v},{attr}={_attr_text(a)}", v, a, nodes))
    else:
        out = [Domain(f"{attr}={_attr_text(a)}", None, a, frozenset(reach[k]))
               for k, a in values.items()]
    return sorted(out, key=lambda d: d.text)


def _kind(w: Wanted) -> object:
    return (w.device_class.name, w.device_class.selectors, w.spec.selectors, w.tolerations)


def gang_requests(members: Sequence[Member],
                  classes: Mapping[str, DeviceClass]) -> list[list[list[Wanted]]]:
    """Each member's requests, as `Demand` counts them: a claim several members name
    (one NIC for the whole gang) is one claim, asked once, with the first member that
    names it. Raises AllocationError for a claim that cannot be read."""
    seen: set[tuple[str, str]] = set()
    out: list[list[list[Wanted]]] = []
    for m in members:
        plan: list[list[Wanted]] = []
        for ci, c in enumerate(m.pending):
            if (c.namespace, c.name) in seen:
                continue
            seen.add((c.namespace, c.name))
            plan.extend(wanted_for_claim(ci, c, classes))
        out.append(plan)
    return out


class Demand:
    """What the core asks in total, per kind of request, for the counting check."""

    def __init__(self, plans: Sequence[Sequence[Sequence[Wanted]]]) -> None:
        self.need: dict[object, int] = {}
        self.example: dict[object, Wanted] = {}
        self._shared: dict[object, bool] = {}
        for plan in plans:
            for alts in plan:
                if len(alts) != 1 or alts[0].all_mode or alts[0].admin_access:
                    continue  # alternatives, All and admin access are the search's to judge
                w = alts[0]
                k = _kind(w)
                self.need[k] = self.need.get(k, 0) + w.count
                self.example.setdefault(k, w)

    def matching(self, index: NodeIndex) -> frozenset[DeviceID] | None:
        """The devices some counted request matches (None: no request is counted)."""
        if not self.need:
            return None
        return frozenset(i for k in self.need for i in index.matcher.matching(self.example[k])[0])

    def check(self, devices: Collection[Candidate], index: NodeIndex,
              in_use: Collection[DeviceID]) -> tuple[int, str | None]:
        """(the least spare count over kinds, the first shortfall's reason or None)."""
        spare = 1 << 30
        for k, need in self.need.items():
            w = self.example[k]
            ids, matched = index.matcher.matching(w)
            shared = self._shared.get(k)
            if shared is None:
                shared = self._shared[k] = any(d.allow_multiple_allocations for d in matched)
            if shared:
                continue  # shares: one device can serve several requests
            free = sum(1 for d in devices if d.id in ids and d.id not in in_use
                       and not _blocked(d, w))
            if free < need:
                return free - need, (f"request {w.name} (class {w.device_class.name}) needs "
                                     f"{need} free devices across the gang, the domain has {free}")
            spare = min(spare, free - need)
        return spare, None


def _blocked(d: Candidate, w: Wanted) -> bool:
    return taint_blocks(d.taints, w.tolerations)


def _shape(m: Member) -> object:
    """Members with equal shapes can trade placements (see gang_search). The claims'
    specs compare by their repr (frozen model objects print every field; some hold
    read-only mappings, which do not hash)."""
    claims = repr(tuple((c.requests, c.constraints, c.config, sorted(c.meta.annotations.items()))
                        for c in m.pending))
    try:
        key = (filter_shape(m.pod), claims, tuple(sorted(c.name for c in m.allocated)))
        hash(key)
    except TypeError:
        return None
    return key


def _plans(members: Sequence[Member], nodes: Mapping[str, Sequence[NodeInfo]],
           domain: Domain) -> list[MemberPlan]:
    owner: dict[tuple[str, str], tuple[int, int]] = {}
    out: list[MemberPlan] = []
    for m, member in enumerate(members):
        own: list[ResourceClaim] = []
        shared: list[tuple[int, int]] = []
        for c in member.pending:
            k = (c.namespace, c.name)
            if k in owner:
                shared.append(owner[k])
            else:
                owner[k] = (m, len(own))
                own.append(c)
        allowed = nodes[member.label]
        if domain.nodes is not None:
            allowed = [n for n in allowed if n.name in domain.nodes]
        out.append(MemberPlan(member.label, tuple(own), tuple(allowed), tuple(shared),
                              None if shared else _shape(member)))
    shared_claims = {k for k, (m, _) in owner.items()
                     if sum(1 for mem in members for c in mem.pending if (c.namespace, c.name) == k) > 1}
    if shared_claims:  # a member owning a shared claim is not interchangeable either
        out = [MemberPlan(p.label, p.claims, p.nodes, p.shared,
                          None if any((c.namespace, c.name) in shared_claims for c in p.claims)
                          else p.shape) for p in out]
    return out


def _results(search: JointSearch, plans: Sequence[MemberPlan]) -> tuple[Placed, ...]:
    out = []
    for m, plan in enumerate(plans):
        s, node = search.searches[m], search.nodes[m]
        if s is None or node is None:
            continue
        allocations = []
        for ci, claim in enumerate(s.claims):
            used = [alts[s.chosen.get((ci, ri), 0)] if alts[0].sub_index >= 0 else alts[0]
                    for ri, alts in enumerate(s.plan[ci])]
            allocations.append((claim, build_allocation(claim, s.picks[ci], used, node.name)))
        out.append(Placed(plan.label, node.name, tuple(allocations)))
    return tuple(out)


def _fixed_domain(gang: Gang, placed: Sequence[Member], index: NodeIndex,
                  all_domains: Sequence[Domain]) -> Domain | str | None:
    """The domain of the members placed already, or why there is none; None when they
    fix none (members without claims, a launcher say, tell nothing of the domain)."""
    placed = [m for m in placed if m.allocated]
    by_id = {d.id: d for d in index.matcher.devices}
    labels: set[str] = set()
    attrs: list[Attribute] = []
    node_labels = {n.name: n.labels for n in index.nodes}
    for m in placed:
        if gang.node_label:
            node = m.pod.node_name or _pinned(m.allocated)
            value = node_labels.get(node or "", {}).get(gang.node_label)
            if value is None:
                return f"placed member {m.label} is on no node with label {gang.node_label}"
            labels.add(value)
        if gang.device_attribute:
            for c in m.allocated:
                for r in c.allocation.results if c.allocation is not None else ():
                    cand = by_id.get(DeviceID(r.driver, r.pool, r.device))
                    a = cand.attributes.get(gang.device_attribute) if cand is not None else None
                    if a is not None and not any(same_attribute(a, x) for x in attrs):
                        attrs.append(a)
    if len(labels) > 1 or len(attrs) > 1:
        return "the members placed already are in more than one topology domain"
    if not labels and not attrs:
        return None
    for d in all_domains:
        if (not labels or d.label_value in labels) and (not attrs or (
                d.attribute is not None and same_attribute(d.attribute, attrs[0]))):
            return d
    return "the members placed already are in no topology domain the cluster has now"


def _pinned(claims: Sequence[ResourceClaim]) -> str | None:
    for c in claims:
        sel = c.allocation.node_selector if c.allocation is not None else None
        for term in sel.terms if sel is not None else ():
            for r in term.match_fields:
                if r.key == "metadata.name" and r.operator == "In" and len(r.values) == 1:
                    return r.values[0]
    return None


def _member_alone(member: Member, index: NodeIndex, classes: Mapping[str, DeviceClass],
                  in_use: Collection[DeviceID], shares: Shares, budget_s: float,
                  features: FeatureGates = DEFAULT_GATES) -> str | None:
    """Why the member fits on no node of the cluster even alone (None when it fits)."""
    allowed, refused = candidate_nodes(index.nodes, [PodFit(member.pod, member.allocated)])
    view = copy.copy(index)  # shares the per-node caches; only the candidate list differs
    view.nodes = allowed
    placed = place(member.pending, view, classes, in_use, budget_s, refused=refused,
                   shares=shares, features=features)
    return None if placed.allocated else (placed.outcome.reason or placed.outcome.status)



def candidate_domains(gang: Gang, placed: Sequence[Member], index: NodeIndex) -> list[Domain] | str:
    """The domains the gang may be placed in (those of its placed members, when they fix
    one), or why there is none."""
    all_domains = domains_of(gang, index)
    if placed and (gang.node_label or gang.device_attribute):
        fixed = _fixed_domain(gang, placed, index, all_domains)
        if isinstance(fixed, str):
            return fixed
        candidates = all_domains if fixed is None else [fixed]
    else:
        candidates = all_domains
    if not candidates:
        return f"no topology domain: no node or device has the gang's {gang.domain_keys()}"
    return candidates


def member_nodes(pending: Sequence[Member], index: NodeIndex) -> dict[str, list[NodeInfo]]:
    """Each pending member's candidate nodes (kube-scheduler's filters; members of one
    pod shape share the answer)."""
    nodes: dict[str, list[NodeInfo]] = {}
    by_shape: dict[object, list[NodeInfo]] = {}
    for m in pending:
        shape = None if m.allocated else filter_shape(m.pod)
        allowed = by_shape.get(shape) if shape is not None else None
        if allowed is None:
            allowed, _ = candidate_nodes(index.nodes, [PodFit(m.pod, m.allocated, m.label)])
            if shape is not None:
                by_shape[shape] = allowed
        nodes[m.label] = allowed
    return nodes


def place_gang(
    gang: Gang,
    members: Sequence[Member],
    index: NodeIndex,
    classes: Mapping[str, DeviceClass],
    in_use: Collection[DeviceID],
    budget_s: float,
    *,
    shares: Shares = NO_SHARES,
    only_domain: str | None = None,
    nodes: Mapping[str, list[NodeInfo]] | None = None,
    explain: bool = True,
    features: FeatureGates = DEFAULT_GATES,
) -> GangOutcome:
    """The gang's placement (see the module's docstring); `in_use`/`shares`: what other
    claims hold, as for one pod's `nodes.place`. For preemption's trials, which free
    devices in one domain at a time: ONLY_DOMAIN searches that domain (its text) alone,
    NODES is `member_nodes` computed once, and without EXPLAIN an unsatisfiable outcome
    carries no reason and no closest domain (saving the work of finding them). FEATURES:
    the gates and release behaviour to allocate with, as for one pod's `nodes.place`."""
    deadline = time.monotonic() + budget_s
    members = sorted(members, key=lambda m: m.label)
    placed = [m for m in members if m.placed]
    pending = [m for m in members if not m.placed]
    need = max(0, gang.min_count - len(placed))
    if len(placed) + len(pending) < gang.min_count:
        return GangOutcome("unsatisfiable", reason=(
            f"waiting for members: {len(members)} of {gang.min_count} exist"
            + (f" ({len(placed)} placed)" if placed else "")))
    if not pending:
        return GangOutcome("allocated", reason=None)
    candidates = candidate_domains(gang, placed, index)
    if isinstance(candidates, str):
        return GangOutcome("unsatisfiable", reason=candidates)
    if only_domain is not None:
        candidates = [d for d in candidates if d.text == only_domain]
        if not candidates:
            return GangOutcome("unsatisfiable", reason=f"no topology domain {only_domain}")
    core, extras = pending[:need], pending[need:]
    try:
        plans_all = gang_requests(core, classes)
    except AllocationError as e:
        return GangOutcome("error", reason=str(e))
    broken: list[str] = []  # extras whose claims cannot even be read as requests: they wait
    for m in extras:
        try:
            for ci, c in enumerate(m.pending):
                wanted_for_claim(ci, c, classes)
        except AllocationError:
            broken.append(m.label)
    extras = [m for m in extras if m.label not in broken]
    demand = Demand(plans_all)
    if nodes is None:
        nodes = member_nodes(pending, index)
    usable = {n.name: n for allowed in nodes.values() for n in allowed}
    ranked: list[tuple[int, str, Domain]] = []
    short: list[tuple[int, str, Domain]] = []
    for d in candidates:
        reach = domain_devices(d, gang, index, usable)
        spare, why = demand.check(reach, index, in_use)
        if why is None:
            ranked.append((spare, d.text, d))
        else:
            short.append((spare, why, d))
    ranked.sort(key=lambda t: (t[0], t[1]))
    best: tuple[int, tuple[tuple[str, str], ...], str, Domain] | None = None
    steps = searched = undecided = 0
    too_deep = False
    notes: dict[str, str] = {}  # per member, why it fits nowhere beyond the counts
    for i, (_, _, d) in enumerate(ranked):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        admit = d.admits(gang.device_attribute)
        try:
            ordered, lists = search_order(core, extras, nodes, d.nodes, admit, index, classes,
                                          in_use, _shape)
        except AllocationError as e:
            return GangOutcome("error", domain=d.text or None, reason=str(e), steps=steps)
        plans = _plans(ordered, lists, d)
        share = left / min(len(ranked) - i, 4)
        searched += 1
        try:
            search = JointSearch(plans, index, classes, in_use, time.monotonic() + share, shares,
                                 admit=admit, required=len(core), features=features)
        except AllocationError as e:
            return GangOutcome("error", domain=d.text or None, reason=str(e), steps=steps)
        try:
            found = search.run()
        except (TooComplex, RecursionError) as e:
            # out of time, or deeper than the interpreter's stack allows (a search
            # recursion per device per member): no verdict either way
            undecided += 1
            too_deep = too_deep or isinstance(e, RecursionError)
            steps += search.steps
            if best is None or search.best > best[0]:
                best = (search.best, tuple(zip((p.label for p in plans), search.best_nodes,
                                               strict=False)), "", d)
            continue  # the next domain gets its share of what is left
        except AllocationError as e:
            return GangOutcome("error", domain=d.text or None, reason=str(e), steps=steps)
        steps += search.steps
        if found:
            got = _results(search, plans)
            done = {p.label for p in got}
            return GangOutcome("allocated", d.text or None, got,
                               waiting=tuple(m.label for m in extras if m.label not in done)
                               + tuple(broken),
                               domains=len(candidates), searched=searched, steps=steps)
        stuck = plans[min(search.best, max(len(core) - 1, 0))].label
        for label, note in search.notes.items():
            notes.setdefault(label, note)
        partial = tuple(zip((p.label for p in plans), search.best_nodes, strict=False))
        if best is None or search.best > best[0]:
            best = (search.best, partial, stuck, d)
    if undecided or searched < len(ranked):
        return _undecided(gang, core, ranked, searched, undecided, best, budget_s, index, usable,
                          demand, len(candidates), steps, too_deep)
    if not explain:
        return GangOutcome("unsatisfiable", domains=len(candidates), searched=searched, steps=steps)
    near = best[3] if best is not None else (max(short, key=lambda t: (t[0], t[2].text))[2]
                                             if short else None)
    closest: frozenset[DeviceID] = frozenset()
    if near is not None:
        reach = domain_devices(near, gang, index, usable)
        _, never = demand.check(reach, index, ())  # short even with nothing in use: no use waiting
        if never is None:
            wanted = demand.matching(index)
            closest = frozenset(d.id for d in reach if wanted is None or d.id in wanted)
    return GangOutcome("unsatisfiable", reason=_reason(
        gang, core, candidates, short, ranked, searched, best, index, classes, in_use, shares,
        deadline, notes, features), partial=best[1] if best else (), domains=len(candidates), searched=searched,
        steps=steps, closest=closest)


def _undecided(gang: Gang, core: Sequence[Member], ranked: Sequence[tuple[int, str, Domain]],
               searched: int, undecided: int,
               best: tuple[int, tuple[tuple[str, str], ...], str, Domain] | None, budget_s: float,
               index: NodeIndex, usable: Mapping[str, NodeInfo], demand: Demand, domains: int,
               steps: int, too_deep: bool = False) -> GangOutcome:
    """The budget ran out with domains left that might fit: no verdict, and the
    reservation (`closest`) of the domain the search got deepest in, as a waiting gang
    keeps."""
    left = undecided + len(ranked) - searched
    within = ("before the search went deeper than the interpreter's recursion limit allows"
              if too_deep else f"within the search's {budget_s:g}s budget")
    parts = [f"undecided: no placement found {within}, and "
             f"{left} of {len(ranked)} domain{'s' if len(ranked) != 1 else ''} that fit by "
             "count not ruled out"]
    if searched < len(ranked):
        parts.append(f"{len(ranked) - searched} not searched")
    closest: frozenset[DeviceID] = frozenset()
    if best is not None:
        depth, partial, _, d = best
        label = f" in domain {d.text}" if d.text else ""
        parts.append(f"at best {depth} of {len(core)} placed{label}")
        wanted = demand.matching(index)
        closest = frozenset(x.id for x in domain_devices(d, gang, index, usable)
                            if wanted is None or x.id in wanted)
    return GangOutcome("undecided", reason="; ".join(parts),
                       partial=best[1] if best is not None else (), domains=domains,
                       searched=searched, steps=steps, closest=closest)


def domain_devices(d: Domain, gang: Gang, index: NodeIndex,
                    usable: Mapping[str, NodeInfo]) -> list[Candidate]:
    """The devices the domain's nodes (those some member may use) reach, inside it."""
    admit = d.admits(gang.device_attribute)
    seen: dict[DeviceID, Candidate] = {}
    names = sorted(usable if d.nodes is None else (n for n in d.nodes if n in usable))
    for name in names:
        for dev in index.view(usable[name])[1]:
            if admit is None or admit(dev):
                seen.setdefault(dev.id, dev)
    return list(seen.values())


def _reason(gang: Gang, core: Sequence[Member], candidates: Sequence[Domain],
            short: Sequence[tuple[int, str, Domain]], ranked: Sequence[tuple[int, str, Domain]],
            searched: int, best: tuple[int, tuple[tuple[str, str], ...], str, Domain] | None,
            index: NodeIndex, classes: Mapping[str, DeviceClass], in_use: Collection[DeviceID],
            shares: Shares, deadline: float, notes: Mapping[str, str],
            features: FeatureGates = DEFAULT_GATES) -> str:
    n = len(candidates)
    where = "the cluster" if n == 1 and not candidates[0].text else (
        f"{n} topology domain{'s' if n != 1 else ''} ({gang.domain_keys()})")
    parts = [f"cannot place {len(core)} member{'s' if len(core) != 1 else ''} of the gang "
             f"together in {where}"]
    if short:
        closest = max(short, key=lambda t: (t[0], t[2].text))
        label = f"domain {closest[2].text}: " if closest[2].text else ""
        parts.append(f"{len(short)} short by count (closest, {label}{closest[1]})"
                     if n > 1 else f"short by count: {closest[1]}")
    if ranked and searched < len(ranked):
        parts.append(f"{len(ranked) - searched} not searched within the time budget")
    if best is not None:
        depth, _, stuck, d = best
        label = f" in domain {d.text}" if d.text else ""
        member = next((m for m in core if m.label == stuck), None)
        alone = None if member is None or time.monotonic() > deadline else _member_alone(
            member, index, classes, in_use, shares, max(deadline - time.monotonic(), 0.1), features)
        if alone is None and stuck in notes:
            alone = notes[stuck]
        elif alone is not None:
            alone = f"even alone: {alone}"
        parts.append(f"at best {depth} of {len(core)} placed{label}; member {stuck} fits on "
                     "no node left there" + (f" ({alone})" if alone else ""))
    return "; ".join(parts)


__all__ = ["Demand", "Domain", "GangOutcome", "Member", "Placed", "candidate_domains", "domain_devices",
           "domains_of", "gang_requests", "member_nodes", "place_gang"]
