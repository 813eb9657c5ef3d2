"""The devices check's verdict on one Workload: ready, retry or rejected.

The whole Workload is one gang: Kueue admits all of it or none, so every pod is in the
core (`minCount` = all pods). Its domain, in this order:
- TAS's assignment (`podSetAssignments[].topologyAssignment`): each pod of the PodSet
  is pinned to one of TAS's domains, as many pods per domain as TAS counted (pods of
  one PodSet are alike, so which pod goes where does not matter); the search then
  finds devices for exactly that layout, or says it does not fit;
- else the Gang the templates' `resource.draco.dev/gang` label names (its `topology`:
  node label and/or device attribute);
- else the whole cluster.

Verdicts:
- `ready`: the joint search placed every pod. `podSetUpdates` lead the pods to their
  reservation: the annotation `resource.draco.dev/workload` (the Workload's name) on
  every PodSet, and the domain's `nodeSelector` when the domain is a node label's value
  (with TAS, Kueue puts each pod on its node itself).
- `retry`: not now. The message names what is short (the gang search's reason: a
  request short by count, the member that fits on no node); with TAS it says when the
  devices do not fit the nodes Kueue chose (TAS's domains, the admission's
  ResourceFlavor's nodeLabels) but fit elsewhere now. `requeueAfterSeconds` is set.
- `rejected`: it can never fit: a search over the same cluster with every device free
  and no device taint fails too (more than the cluster has, a selector nothing
  matches), or the Workload's templates cannot be read. That search is bound by the
  pods' own selectors only, not by the nodes Kueue chose this time: a ClusterQueue's
  next flavor, or TAS's next domain, may be where the devices are.
Missing objects (a template, a named claim, a DeviceClass, the Gang) are `retry`:
they may come.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from operators.admission.members import ClaimLookup, Problem, WorkloadMember, workload_members
from operators.admission.workload import Workload
from operators.allocator.capacity import NO_SHARES, Shares
from operators.allocator.features import DEFAULT_GATES, FeatureGates
from operators.allocator.inventory import Inventory
from operators.allocator.nodes import NodeIndex
from operators.allocator.results import allocation_to_api
from operators.gangs.gang import GangOutcome, place_gang
from operators.model import AllocationResult, DeviceClass, DeviceID, ModelError
from operators.model.gangs import GANG_LABEL, MAX_MIN_COUNT, Gang, parse_gang

Status = Literal["ready", "retry", "rejected"]
WORKLOAD_ANNOTATION = "resource.draco.dev/workload"
DEFAULT_REQUEUE_S = 30
MESSAGE_MAX = 2048
GangLookup = Callable[[str, str], Gang | None]


@dataclass(frozen=True, slots=True)
class PlacedPod:
    pod_set: str
    index: int
    node: str | None
    claims: tuple[tuple[str, str, AllocationResult], ...]  # (entry, claim name, allocation)


@dataclass(frozen=True, slots=True)
class Decision:
    status: Status
    message: str
    placed: tuple[PlacedPod, ...] = ()
    pod_set_updates: tuple[Mapping[str, Any], ...] = ()
    requeue_after: int | None = None
    domain: str | None = None
    devices: frozenset[DeviceID] = field(default_factory=frozenset)
    steps: int = 0

    def members_json(self) -> dict[str, dict[str, dict[str, list[dict[str, Any]]]]]:
        """PodSet -> pod index -> resourceClaims entry -> results (`--gang`'s records)."""
        out: dict[str, dict[str, dict[str, list[dict[str, Any]]]]] = {}
        for p in self.placed:
            out.setdefault(p.pod_set, {})[str(p.index)] = {
                entry: list(allocation_to_api(a)["devices"]["results"]) for entry, _, a in p.claims}
        return out

    def allocations_json(self) -> dict[str, dict[str, dict[str, dict[str, Any]]]]:
        """PodSet -> pod index -> entry -> `status.allocation` (the reservation's record)."""
        out: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
        for p in self.placed:
            out.setdefault(p.pod_set, {})[str(p.index)] = {
                entry: allocation_to_api(a) for entry, _, a in p.claims}
        return out

    def nodes_json(self) -> dict[str, dict[str, str | None]]:
        out: dict[str, dict[str, str | None]] = {}
        for p in self.placed:
            out.setdefault(p.pod_set, {})[str(p.index)] = p.node
        return out


def _short(text: str) -> str:
    return text if len(text) <= MESSAGE_MAX else text[:MESSAGE_MAX - 3] + "..."


def _gang(wl: Workload, members: int, node_label: str | None = None,
          attribute: str | None = None) -> Gang:
    topology = {k: v for k, v in (("nodeLabel", node_label), ("deviceAttribute", attribute)) if v}
    return parse_gang({"metadata": {"name": wl.name, "namespace": wl.namespace, "uid": wl.uid},
                       "spec": {"minCount": max(members, 1),
                                **({"topology": topology} if topology else {})}})


def _gang_label(wl: Workload) -> str | None | Problem:
    names: set[str] = set()
    for ps in wl.pod_sets:
        md = ps.template.get("metadata")
        labels = md.get("labels") if isinstance(md, Mapping) else None
        if isinstance(labels, Mapping) and labels.get(GANG_LABEL):
            names.add(str(labels[GANG_LABEL]))
    if len(names) > 1:
        return Problem(f"the PodSets name different gangs ({', '.join(sorted(names))}); a Workload "
                       "is admitted whole, in one domain", True)
    return names.pop() if names else None


def untainted(inventory: Inventory) -> Inventory:
    """The inventory with no device taint: for "could it ever fit" (taints come and go)."""
    return tuple(dataclasses.replace(p, slices=tuple(
        dataclasses.replace(s, devices=tuple(dataclasses.replace(d, taints=()) if d.taints else d
                                             for d in s.devices)) for s in p.slices))
        for p in inventory)


def empty_view(index: NodeIndex) -> NodeIndex:
    """The index to ask "could it ever fit" with: the same one when no device is tainted
    (its match caches are kept), else one over the untainted inventory."""
    if not any(d.taints for p in index.inventory for s in p.slices for d in s.devices):
        return index
    return NodeIndex(untainted(index.inventory), index.nodes)


def _tas_pins(wl: Workload, index: NodeIndex,
              ) -> tuple[dict[tuple[str, int], tuple[str, ...]], list[str], list[str]] | None:
    """(PodSet, pod index) -> the nodes of the TAS domain the pod is pinned to, the
    domains as text, and the domains no node of the cluster is in; None without TAS.
    Pods go to domains in index order, as many per domain as TAS counted (pods of one
    PodSet are alike, so the order does not matter)."""
    if not any(ps.topology for ps in wl.pod_sets):
        return None
    pins: dict[tuple[str, int], tuple[str, ...]] = {}
    texts: list[str] = []
    missing: list[str] = []
    for ps in wl.pod_sets:
        i = 0
        for dom in ps.topology or ():
            names = tuple(sorted(n.name for n in index.nodes if dom.matches(n.name, n.labels)))
            texts.append(f"{ps.name}: {dom.text} x{dom.pods}")
            if not names:
                missing.append(dom.text)
            for _ in range(dom.pods):
                if i < ps.count:
                    pins[(ps.name, i)] = names
                i += 1
    return pins, texts, missing


def _placed(members: Sequence[WorkloadMember], outcome: GangOutcome) -> tuple[PlacedPod, ...]:
    by_claim: dict[str, AllocationResult] = {}
    nodes: dict[str, str] = {}
    for p in outcome.placed:
        nodes[p.label] = p.node
        for claim, allocation in p.allocations:
            by_claim[claim.name] = allocation
    out: list[PlacedPod] = []
    for m in members:
        for c in m.member.allocated:
            if c.allocation is not None:
                by_claim.setdefault(c.name, c.allocation)
    for m in members:
        claims = tuple((entry, cname, by_claim[cname]) for entry, cname in m.entries if cname in by_claim)
        out.append(PlacedPod(m.pod_set, m.index, nodes.get(m.label) or m.member.pod.node_name or None,
                             claims))
    return tuple(out)


def _updates(wl: Workload, gang: Gang, outcome: GangOutcome, tas: bool) -> tuple[dict[str, Any], ...]:
    value = None
    if gang.node_label and outcome.domain and not tas:
        for part in outcome.domain.split(","):
            k, _, v = part.partition("=")
            if k == gang.node_label:
                value = v
    out: list[dict[str, Any]] = []
    for ps in wl.pod_sets:
        update: dict[str, Any] = {"name": ps.name, "annotations": {WORKLOAD_ANNOTATION: wl.name}}
        spec = ps.template.get("spec")
        own = spec.get("nodeSelector") if isinstance(spec, Mapping) else None
        own = own if isinstance(own, Mapping) else {}
        if value is not None and gang.node_label is not None and own.get(gang.node_label) != value:
            update["nodeSelector"] = {gang.node_label: value}
        out.append(update)
    return tuple(out)


def _devices(placed: Sequence[PlacedPod], members: Sequence[WorkloadMember]) -> frozenset[DeviceID]:
    """The devices this verdict newly takes (claims allocated already hold their own)."""
    allocated = {c.name for m in members for c in m.member.allocated}
    return frozenset(r.id for p in placed for _, cname, a in p.claims if cname not in allocated
                     for r in a.results if not r.admin_access and not r.share_id)


def decide(wl: Workload, index: NodeIndex, classes: Mapping[str, DeviceClass],
           in_use: Collection[DeviceID], *, templates: Mapping[str, Mapping[str, Any]],
           claims: ClaimLookup, gangs: GangLookup,
           flavor_nodes: Mapping[str, Mapping[str, str]] | None = None,
           shares: Shares = NO_SHARES, budget_s: float = 10.0,
           requeue_s: int = DEFAULT_REQUEUE_S, empty: NodeIndex | None = None,
           features: FeatureGates = DEFAULT_GATES) -> Decision:
    """The verdict (see the module's docstring). IN_USE: what other claims hold, plus
    what other Workloads' reservations keep. EMPTY: `empty_view(index)`, when the
    caller keeps one. FEATURES: the gates and release behaviour to allocate with."""
    def retry(message: str, steps: int = 0) -> Decision:
        return Decision("retry", _short(message), requeue_after=requeue_s, steps=steps)

    def rejected(message: str, steps: int = 0) -> Decision:
        return Decision("rejected", _short(message), steps=steps)

    if wl.total_pods > MAX_MIN_COUNT:
        return rejected(f"{wl.total_pods} pods: more than the {MAX_MIN_COUNT} draco places as one gang")
    label = _gang_label(wl)
    if isinstance(label, Problem):
        return rejected(label.message)
    tas = _tas_pins(wl, index)
    if tas is not None and tas[2]:
        return retry(f"TAS assigned {', '.join(tas[2])}, where the cluster has no node")
    built = workload_members(wl, templates, claims, flavor_nodes, tas[0] if tas is not None else None)
    if isinstance(built, Problem):
        return rejected(built.message) if built.never else retry(built.message)
    members = built
    if tas is not None:
        gang = _gang(wl, len(members))
    elif label is not None:
        named = gangs(wl.namespace, label)
        if named is None:
            return retry(f"Gang {wl.namespace}/{label} (the pods' {GANG_LABEL} label) does not exist")
        gang = _gang(wl, len(members), named.node_label, named.device_attribute)
    else:
        gang = _gang(wl, len(members))
    plain = [m.member for m in members]
    if not members:
        return Decision("ready", "the Workload has no pods to place")
    outcome = place_gang(gang, plain, index, classes, in_use, budget_s, shares=shares,
                         features=features)
    steps = outcome.steps
    if outcome.allocated:
        placed = _placed(members, outcome)
        where = f" in {outcome.domain}" if outcome.domain else (
            " in TAS's assignment" if tas is not None else "")
        n = len(members)
        devices = _devices(placed, members)
        text = f"devices reserved for {n} pod{'s' if n != 1 else ''}{where}" if devices else \
            "no pod of the Workload asks for devices it does not hold already"
        return Decision("ready", text, placed, _updates(wl, gang, outcome, tas is not None),
                        domain=outcome.domain, devices=devices, steps=steps)
    reason = outcome.reason or outcome.status
    if outcome.status == "error":
        if "could not retrieve device class" in reason:
            return retry(reason, steps)
        return rejected(reason, steps)
    if outcome.status == "undecided":
        return retry(reason, steps)
    # Kueue chose the nodes (TAS's domains, the flavor's nodeLabels) this time only: the
    # next admission may choose others (another domain, the ClusterQueue's next flavor)
    free_members = plain
    bound = tas is not None or any((flavor_nodes or {}).get(f) for ps in wl.pod_sets for f in ps.flavors)
    if bound:
        unbound = workload_members(wl, templates, claims)
        if isinstance(unbound, Problem):
            return retry(unbound.message)
        free_members = [m.member for m in unbound]
        free = place_gang(gang, free_members, index, classes, in_use, budget_s, shares=shares,
                          features=features)
        steps += free.steps
        if free.allocated:
            chosen = f"the nodes TAS assigned ({'; '.join(tas[1])})" if tas is not None else \
                "the nodes of the flavor Kueue assigned"
            return retry(f"the devices do not fit {chosen}: {reason}; they fit elsewhere now", steps)
    never = place_gang(gang, free_members, empty or empty_view(index), classes, (), budget_s,
                       features=features)
    steps += never.steps
    if never.status == "unsatisfiable":
        return rejected(f"can never fit, even with every device free: {never.reason or reason}", steps)
    return retry(reason, steps)


def gang_from_objects(objects: Sequence[Mapping[str, Any]]) -> GangLookup:
    """Gangs by (namespace, name) from plain objects (unreadable ones are missing)."""
    found: dict[tuple[str, str], Gang] = {}
    for obj in objects:
        if obj.get("kind") != "Gang":
            continue
        try:
            g = parse_gang(obj)
        except ModelError:
            continue
        found[(g.meta.namespace, g.meta.name)] = g
    return lambda ns, name: found.get((ns, name))


__all__ = ["DEFAULT_REQUEUE_S", "WORKLOAD_ANNOTATION", "Decision", "GangLookup", "PlacedPod",
           "decide", "empty_view", "gang_from_objects", "untainted"]
