"""`draco allocate --preempt NS/NAME`: which running pods draco would evict so that the pod's
claims fit, and which devices it would nominate for it. Nothing is written.

Output (`-o json`), one object:
  preemptor  NS/NAME
  status     "preempt" (victims found), "fits" (no preemption needed) or "impossible"
  node       the node the nominated devices are allocated for (null when none)
  victims    the pods to evict, NS/NAME, sorted
  devices    the nominated devices, driver/pool/device
  reason     why, in one sentence
  pdbViolations  how many victims go beyond a PodDisruptionBudget
When the pod is a member of a gang (a `Gang`, or a PodGroup with a gang policy), the
preemptor is the whole gang (`preemption.gang_preemption`): `devices` are every member's,
`node` is null, and two more keys say where each goes:
  gang       NS/NAME of the Gang or PodGroup
  nodes      member NS/NAME -> the node its nominated devices are allocated for
  domain     the topology domain (null without topology)
See `preemption.preemption` for the order victims and nodes are chosen in.
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
from operators.cli.allocate_gang import find_gang, member_of, member_pods
from operators.cli.allocation_records import nodes_from
from operators.cli.inputs import UsageError
from operators.cli.output import render_table, warn
from operators.gangs.gang import Member
from operators.model import ModelError, NamespacedName
from operators.model.disruption import DisruptionBudget, parse_disruption_budget
from operators.preemption.gang_preemption import select_gang_victims
from operators.preemption.preemption import Preemption, prepare, select_victims
from operators.preemption.preemption_inputs import gang_units, running_pods
from operators.tracker import Tracker
from operators.tracker.gangs import GangMembers, gang_overlay


def budgets_from(objects: Iterable[dict[str, Any]]) -> list[DisruptionBudget]:
    out = []
    for obj in objects:
        if obj.get("kind") == "PodDisruptionBudget":
            try:
                out.append(parse_disruption_budget(obj))
            except ModelError as e:
                warn(f"{e}; skipped (its pods count as unprotected)")
    return out


def preempt_document(tracker: Tracker, objects: Sequence[dict[str, Any]], key: NamespacedName,
                     budget_s: float = DEFAULT_BUDGET_S, gates: FeatureGates = DEFAULT_GATES) -> dict[str, Any]:
    """The victims the preemption controller would choose for the pod, with GATES (the
    release `draco allocate` answers as)."""
    pod = tracker.pod(key)
    if pod is None:
        raise UsageError(f"no Pod {key} with resource claims in the input")
    member = member_of(tracker, pod)
    if isinstance(member, str):
        raise UsageError(f"Pod {key}: {member}")
    index = NodeIndex(gated_inventory(inventory_from_tracker(tracker), gates), nodes_from(objects, tracker))
    classes = {c.name: c for c in tracker.device_classes()}
    in_use = set(in_use_from_tracker(tracker))
    gang_key = _gang_of(tracker, key)
    if gang_key is not None:
        gang = find_gang(objects, gang_key)
        members = [m for p in member_pods(objects, tracker, gang)
                   if isinstance(m := member_of(tracker, p), Member)]
        outcome = select_gang_victims(gang, members, index, classes, in_use,
                                      prepare(running_pods(tracker), tracker.claims()),
                                      budgets_from(objects), gang_units(tracker), budget_s,
                                      shares_from_tracker(tracker), features=gates)
        doc = _doc(str(key), outcome)
        doc.update(gang=gang.label, nodes={p.label: p.node for p in outcome.placed},
                   domain=outcome.domain)
        return doc
    outcome = select_victims(pod, member.pending, member.allocated, running_pods(tracker), index,
                             classes, in_use, tracker.claims(),
                             budgets_from(objects), gang_units(tracker), budget_s, features=gates)
    return _doc(str(key), outcome)


def _gang_of(tracker: Tracker, key: NamespacedName) -> NamespacedName | None:
    """The gang the pod is decided with (a PodGroup without a gang policy is none)."""
    members = GangMembers()
    members.rescan(tracker)
    found = members.of_pod.get(key)
    gangs = gang_overlay(tracker)
    if found is None or gangs is None or gangs.is_basic(*found):
        return None
    return NamespacedName(found[1], found[2])


def _doc(label: str, p: Preemption) -> dict[str, Any]:
    return {"preemptor": label, "status": p.verdict, "node": p.node, "victims": list(p.victims),
            "devices": list(p.devices), "reason": p.reason, "pdbViolations": p.pdb_violations}


def preempt_table(doc: dict[str, Any]) -> str:
    head = f"Pod {doc['preemptor']}: {doc['status']}"
    if doc.get("gang"):
        head = f"Gang {doc['gang']} (for pod {doc['preemptor']}): {doc['status']}"
        if doc["domain"]:
            head += f" in {doc['domain']}"
    if doc["node"]:
        head += f" on {doc['node']}"
    head += f"\n  {doc['reason']}\n"
    rows = [("victim", v) for v in doc["victims"]] + [("nominated", d) for d in doc["devices"]]
    rows += [("member", f"{m} -> {n}") for m, n in (doc.get("nodes") or {}).items()]
    return head + (render_table(("what", "name"), rows) if rows else "")
