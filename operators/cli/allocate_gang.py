"""`draco allocate --gang NS/NAME`: where draco would place a gang, all or nothing.

The gang is a `Gang` (resource.draco.dev/v1alpha1; members carry the label
`resource.draco.dev/gang: NAME`) or, when there is no such Gang, a `PodGroup`
(scheduling.k8s.io/v1beta1; members name it in `spec.schedulingGroup`). Members are
the unfinished pods of the gang in its namespace. A member whose claims are all
allocated is placed; the others are allocated jointly (see `gangs.gang`).

Output (`-o json`), one object:
  gang     NS/NAME
  status   "allocated" | "unsatisfiable" | "undecided" (the time budget ran out before
           the search found a placement or ruled every domain out; `reason` says how far
           it got)
  domain   the topology domain chosen, `KEY=VALUE` per topology key, comma-joined
           (null without topology or when nothing is placed)
  members  pod NS/NAME -> claim name -> its allocation results, each with `request`,
           `driver`, `pool`, `device` (and `adminAccess`, `shareID`, ... when set):
           every member placed by this answer or before it; {} when unsatisfiable
  nodes    pod NS/NAME -> the node each placed member is allocated for
  reason   why not (null when allocated)
  waiting  members beyond minCount that fit nowhere in the domain (they wait)
  partial  the best partial placement the search reached: [{member, node}]
Nothing is written; the exit code is 0 whatever the verdict.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from operators.allocator import (
    DEFAULT_BUDGET_S,
    in_use_from_tracker,
    inventory_from_tracker,
    shares_from_tracker,
)
from operators.allocator.features import DEFAULT_GATES, FeatureGates, gated_inventory
from operators.allocator.nodes import NodeIndex
from operators.cli.allocation_records import nodes_from, results
from operators.cli.inputs import UsageError
from operators.cli.output import render_table, warn
from operators.gangs.gang import GangOutcome, Member, place_gang
from operators.model import ModelError, NamespacedName, Pod, ResourceClaim
from operators.model.gangs import Gang, parse_gang, parse_pod_group
from operators.model.objects import parse_pod_object
from operators.tracker import Tracker


def find_gang(objects: Iterable[dict[str, Any]], key: NamespacedName) -> Gang:
    """The Gang named KEY, else the PodGroup; UsageError when neither is there or it
    cannot be read (the error names the field)."""
    found: dict[str, dict[str, Any]] = {}
    for obj in objects:
        kind = obj.get("kind")
        md = obj.get("metadata")
        if not isinstance(md, dict):
            continue
        if kind in ("Gang", "PodGroup") and (md.get("namespace"), md.get("name")) == key:
            found.setdefault(str(kind), obj)
    try:
        if "Gang" in found:
            return parse_gang(found["Gang"])
        if "PodGroup" in found:
            gang = parse_pod_group(found["PodGroup"])
            if gang is None:
                raise UsageError(f"PodGroup {key} has no gang policy: its pods are placed one "
                                 "by one (draco allocate --claim)")
            return gang
    except ModelError as e:
        raise UsageError(str(e)) from None
    raise UsageError(f"no Gang or PodGroup {key} in the input")


def member_pods(objects: Iterable[dict[str, Any]], tracker: Tracker, gang: Gang) -> list[Pod]:
    """The gang's unfinished pods, by name (the tracker's view when it keeps the pod)."""
    pods: dict[str, Pod] = {}
    for obj in objects:
        if obj.get("kind") != "Pod":
            continue
        try:
            pod = parse_pod_object(obj)
        except ModelError as e:
            warn(f"{e}; skipped")
            continue
        if not gang.has_member(pod) or pod.terminal or pod.meta.deleting:
            continue
        pods[pod.meta.name] = tracker.pod(pod.meta.key) or pod
    return [pods[n] for n in sorted(pods)]


def member_of(tracker: Tracker, pod: Pod) -> Member | str:
    """The member with its claims, or why it cannot be placed yet."""
    pending: list[ResourceClaim] = []
    allocated: list[ResourceClaim] = []
    seen: set[str] = set()
    for pc in pod.resource_claims:
        name = pod.claim_name(pc)
        if name is None:
            return f"the claim for {pc.name!r} is not generated yet"
        if name in seen:
            continue
        seen.add(name)
        claim = tracker.claim(NamespacedName(pod.meta.namespace, name))
        if claim is None:
            return f"claim {name} does not exist"
        (pending if claim.allocation is None else allocated).append(claim)
    return Member(f"{pod.meta.namespace}/{pod.meta.name}", pod, tuple(pending), tuple(allocated))


def gang_document(tracker: Tracker, objects: Sequence[dict[str, Any]], key: NamespacedName,
                  budget_s: float = DEFAULT_BUDGET_S, gates: FeatureGates = DEFAULT_GATES) -> dict[str, Any]:
    """The gang's placement as the allocator controller would make it, with GATES (the
    release `draco allocate` answers as)."""
    gang = find_gang(objects, key)
    members: list[Member] = []
    not_ready: list[str] = []
    for pod in member_pods(objects, tracker, gang):
        m = member_of(tracker, pod)
        if isinstance(m, str):
            not_ready.append(f"{pod.meta.namespace}/{pod.meta.name}: {m}")
        else:
            members.append(m)
    index = NodeIndex(gated_inventory(inventory_from_tracker(tracker), gates), nodes_from(objects, tracker))
    classes = {c.name: c for c in tracker.device_classes()}
    outcome = place_gang(gang, members, index, classes, in_use_from_tracker(tracker), budget_s,
                         shares=shares_from_tracker(tracker), features=gates)
    reason = outcome.reason
    if not outcome.allocated and not_ready:
        reason = f"{reason}; not ready: {'; '.join(not_ready)}"
    return _doc(gang, members, outcome, reason)


def _doc(gang: Gang, members: Sequence[Member], outcome: GangOutcome,
         reason: str | None) -> dict[str, Any]:
    placed: dict[str, dict[str, list[dict[str, Any]]]] = {}
    nodes: dict[str, str | None] = {}
    if outcome.allocated:
        new = {p.label: p for p in outcome.placed}
        for m in members:
            if m.label not in new and not m.placed:
                continue
            claims: dict[str, list[dict[str, Any]]] = {}
            for c in m.allocated:
                if c.allocation is not None:
                    claims[c.name] = results(c.allocation)
            if m.label in new:
                for c, allocation in new[m.label].allocations:
                    claims[c.name] = results(allocation)
                nodes[m.label] = new[m.label].node
            else:
                nodes[m.label] = m.pod.node_name or None
            placed[m.label] = claims
        # claims one member allocated for another (shared claims) show under both
        for m in members:
            if m.label in new:
                for c in m.pending:
                    if c.name not in placed[m.label]:
                        for p in outcome.placed:
                            for c2, allocation in p.allocations:
                                if c2.name == c.name:
                                    placed[m.label][c.name] = results(allocation)
    return {
        "gang": gang.label,
        "kind": gang.kind,
        "minCount": gang.min_count,
        "status": outcome.status if outcome.status in ("allocated", "undecided") else "unsatisfiable",
        "domain": outcome.domain if outcome.allocated else None,
        "members": placed,
        "nodes": nodes,
        "reason": None if outcome.allocated else (reason or outcome.status),
        "waiting": list(outcome.waiting),
        "partial": [{"member": m, "node": n} for m, n in outcome.partial],
    }


def gang_table(doc: dict[str, Any]) -> str:
    head = f"Gang {doc['gang']}: {doc['status']}"
    if doc["domain"]:
        head += f" in {doc['domain']}"
    if doc["reason"]:
        head += f"\n  {doc['reason']}"
    rows = []
    for member, claims in doc["members"].items():
        for claim, found in claims.items():
            devices = ", ".join(f"{r['request']}={r['pool']}/{r['device']}" for r in found)
            rows.append((member, doc["nodes"].get(member), claim, devices))
    if not rows:
        return head + "\n"
    return head + "\n" + render_table(("member", "node", "claim", "devices"), rows)
