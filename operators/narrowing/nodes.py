"""Can the nodes a narrowed pod accepts take it? Node taints and cordons, no I/O.

Narrowing hands a pod to kube-scheduler; if every node its devices sit on refuses the pod,
the pod would just sit Pending with no word of why, and draco's gate would be gone. So
before ungating, draco applies the two scheduler filters that depend on the node alone
and not on what runs there:
  * TaintToleration: a node taint with effect NoSchedule or NoExecute that none of the
    pod's tolerations tolerates keeps the pod off the node (PreferNoSchedule does not);
  * NodeUnschedulable: a cordoned node (`spec.unschedulable`) takes only pods that
    tolerate `node.kubernetes.io/unschedulable:NoSchedule`, taint or no taint (the node
    lifecycle controller usually adds that taint too, but not always at once).

A pod is held only when the node cache knows at least one node the narrowed pod accepts
and every such node refuses it. Nodes draco does not know (not yet registered, or a
cache not loaded) are no reason to hold: the pod goes to kube-scheduler as before.
Resources, ports and pod (anti-)affinity are left to kube-scheduler: they change as pods
come and go, while taints and cordons are an administrator's standing decision.

The taint, toleration and cordon rules themselves are kube-scheduler's, shared with the
allocator: `operators.model.nodes`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from operators.model import FieldError, NodeSelector
from operators.model.nodes import (
    UNSCHEDULABLE_KEY,
    NodeInfo,
    NodeTaint,
    PodToleration,
    parse_node,
    parse_tolerations,
    untolerated,
)
from operators.model.selectors import parse_node_selector

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
NAMED_IN_MESSAGE = 3


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why no node the pod accepts takes it: `reason` for Events, `message` for people."""

    reason: str  # UntoleratedNodeTaint | NodeUnschedulable
    message: str
    nodes: tuple[str, ...]


def accepts(node: NodeInfo, node_selector: Mapping[str, str], required: NodeSelector | None) -> bool:
    """kube-scheduler's node selection: the pod's nodeSelector AND its required node affinity."""
    if any(node.labels.get(k) != v for k, v in node_selector.items()):
        return False
    return required is None or required.matches(node.name, node.labels)


def refusal(pod: Mapping[str, Any], nodes: Mapping[str, NodeInfo]) -> Refusal | None:
    """Why the (narrowed) pod fits no known node it accepts, or None when one takes it.

    None too when no known node accepts the pod at all: draco cannot tell then.
    """
    spec = pod.get("spec") or {}
    node_selector = spec.get("nodeSelector") or {}
    raw = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(REQUIRED)
    try:
        required = parse_node_selector(raw) if raw and raw.get("nodeSelectorTerms") else None
    except FieldError:
        return None  # narrow() reports unreadable selectors itself
    tolerations = parse_tolerations(spec.get("tolerations"))
    refused: list[tuple[str, NodeTaint]] = []
    for node in _candidates(required, nodes):
        if not accepts(node, node_selector, required):
            continue
        taint = untolerated(node, tolerations)
        if taint is None:
            return None
        refused.append((node.name, taint))
    if not refused:
        return None
    refused.sort()
    tainted = [(n, t) for n, t in refused if not (t.key == UNSCHEDULABLE_KEY and nodes[n].unschedulable)]
    reason = "UntoleratedNodeTaint" if tainted else "NodeUnschedulable"
    shown = "; ".join(
        f"node {n} is cordoned (spec.unschedulable)" if t.key == UNSCHEDULABLE_KEY and nodes[n].unschedulable
        else f"node {n} has the taint {t}, which the pod does not tolerate"
        for n, t in refused[:NAMED_IN_MESSAGE])
    more = f" (and {len(refused) - NAMED_IN_MESSAGE} more nodes)" if len(refused) > NAMED_IN_MESSAGE else ""
    return Refusal(reason, f"no node that can reach the pod's devices takes the pod: {shown}{more}",
                   tuple(n for n, _ in refused))


def _candidates(required: NodeSelector | None, nodes: Mapping[str, NodeInfo]) -> Iterable[NodeInfo]:
    """The nodes worth testing: those named when every term pins names (`metadata.name In`),
    else all known nodes."""
    if required is not None and required.terms:
        names: set[str] = set()
        for term in required.terms:
            pinned = [r for r in term.match_fields if r.key == "metadata.name" and r.operator == "In"]
            if not pinned:
                return nodes.values()
            names.update(pinned[0].values)
        return [nodes[n] for n in sorted(names) if n in nodes]
    return nodes.values()



__all__ = ["NodeInfo", "NodeTaint", "PodToleration", "Refusal", "accepts", "parse_node",
           "parse_tolerations", "refusal", "untolerated"]
