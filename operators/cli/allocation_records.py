"""The records `draco allocate` prints, shared by its claim and gang forms.

Each claim's record carries `status`: `allocated`, `unsatisfiable` (no fit; `reason`
says why), `error` (what upstream reports as an error: a CEL runtime error, a missing
DeviceClass, `All` over an incomplete pool, ...), `too-complex` (the time budget ran
out), `unreadable` (the claim itself cannot be read) or `waiting` (a pod that uses it
still carries another controller's scheduling gate; `reason` names the pod and gate). `results` is the CLI's
contract for one allocation's devices: `request`, `driver`,
`pool`, `device`, plus `adminAccess`, `tolerations`, `shareID`, `consumedCapacity` and
the binding conditions when set.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from operators.allocator import AllocationOutcome, NodeInfo
from operators.allocator.results import config_to_api
from operators.model import AllocationResult
from operators.model.nodes import parse_node
from operators.tracker import Tracker


def nodes_from(objects: Iterable[dict[str, Any]], tracker: Tracker) -> list[NodeInfo]:
    """Node objects of the input (labels, taints, cordon); without any, the nodes the
    slices name (no labels, no taints)."""
    nodes: dict[str, NodeInfo] = {}
    for obj in objects:
        if obj.get("kind") != "Node":
            continue
        md = obj.get("metadata") or {}
        if isinstance(md.get("labels") or {}, dict):
            parsed = parse_node(obj)
            if parsed.name:
                nodes[parsed.name] = parsed
    if not nodes:
        for s in tracker.resource_slices():
            if s.node_name:
                nodes.setdefault(s.node_name, NodeInfo(s.node_name))
            for d in s.devices:
                if d.placement.node_name:
                    nodes.setdefault(d.placement.node_name, NodeInfo(d.placement.node_name))
    return sorted(nodes.values(), key=lambda n: n.name)


def results(allocation: AllocationResult) -> list[dict[str, Any]]:
    out = []
    for r in allocation.results:
        item: dict[str, Any] = {"request": r.request, "driver": r.driver, "pool": r.pool,
                                "device": r.device}
        if r.admin_access:
            item["adminAccess"] = True
        if r.tolerations:  # the taints it was allowed onto, as the claim's status records them
            item["tolerations"] = [t.to_api() for t in r.tolerations]
        if r.share_id:  # KEP-5075: one share of a device that allows multiple allocations
            item["shareID"] = r.share_id
        if r.consumed_capacity:
            item["consumedCapacity"] = {n: str(q) for n, q in r.consumed_capacity.items()}
        if r.binding_conditions:  # KEP-5007
            item["bindingConditions"] = list(r.binding_conditions)
            item["bindingFailureConditions"] = list(r.binding_failure_conditions)
        out.append(item)
    return out


def allocated_record(allocation: AllocationResult, node: str | None) -> dict[str, Any]:
    return {"status": "allocated", "allocated": True, "node": node,
            "nodeSelector": allocation.node_selector.to_api() if allocation.node_selector else None,
            "results": results(allocation), "config": config_to_api(allocation),
            "reason": None, "explain": None}


def failed_record(outcome: AllocationOutcome, label: str) -> dict[str, Any]:
    explained = next((e for e in outcome.explain if e.claim == label), None)
    return {"status": outcome.status, "allocated": False, "node": None, "nodeSelector": None, "results": [], "config": [],
            "reason": outcome.reason or outcome.status,
            "explain": explained.to_api() if explained is not None else None}


def unreadable_record(why: str) -> dict[str, Any]:
    """A claim of the input that cannot be read: no allocation attempted."""
    return {"status": "unreadable", "allocated": False, "node": None, "nodeSelector": None,
            "results": [], "config": [], "reason": why, "explain": None}


def waiting_record(why: str) -> dict[str, Any]:
    """A claim whose pod still carries another controller's scheduling gate: nothing is
    allocated until that controller removes it (`operators.model.gates`)."""
    return {"status": "waiting", "allocated": False, "node": None, "nodeSelector": None,
            "results": [], "config": [], "reason": why, "explain": None}


__all__ = ["allocated_record", "failed_record", "nodes_from", "results", "unreadable_record",
           "waiting_record"]
