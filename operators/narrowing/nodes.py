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

Toleration matching (a pod's `spec.tolerations`): an empty effect matches every effect;
an empty key matches every key (the API allows that only with Exists); Exists matches any
value, Equal (or no operator) the same value; Gt and Lt (alpha in Kubernetes 1.35,
KEP-5471) compare the values as integers: Gt tolerates a taint whose value is greater than
the toleration's, Lt one whose value is smaller. Any other operator tolerates nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from operators.model import FieldError, NodeSelector
from operators.model.selectors import parse_node_selector

SCHEDULING_EFFECTS = ("NoSchedule", "NoExecute")
UNSCHEDULABLE_KEY = "node.kubernetes.io/unschedulable"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
NAMED_IN_MESSAGE = 3


@dataclass(frozen=True, slots=True)
class NodeTaint:
    key: str
    value: str = ""
    effect: str = ""

    def __str__(self) -> str:
        return f"{self.key}{'=' + self.value if self.value else ''}:{self.effect}"


@dataclass(frozen=True, slots=True)
class PodToleration:
    key: str = ""
    operator: str = ""
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: NodeTaint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        if self.operator in ("Gt", "Lt"):
            mine, theirs = _integer(self.value), _integer(taint.value)
            if mine is None or theirs is None:
                return False
            return theirs > mine if self.operator == "Gt" else theirs < mine
        return False


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """What scheduling filters read from a Node: name, labels, taints, cordon."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[NodeTaint, ...] = ()
    unschedulable: bool = False


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why no node the pod accepts takes it: `reason` for Events, `message` for people."""

    reason: str  # UntoleratedNodeTaint | NodeUnschedulable
    message: str
    nodes: tuple[str, ...]


def parse_node(body: Mapping[str, Any]) -> NodeInfo:
    meta = body.get("metadata") or {}
    spec = body.get("spec") or {}
    labels = meta.get("labels") or {}
    taints = tuple(NodeTaint(str(t.get("key") or ""), str(t.get("value") or ""), str(t.get("effect") or ""))
                   for t in spec.get("taints") or [] if isinstance(t, Mapping))
    return NodeInfo(str(meta.get("name") or ""),
                    {str(k): str(v) for k, v in labels.items()} if isinstance(labels, Mapping) else {},
                    taints, bool(spec.get("unschedulable")))


def parse_tolerations(items: Iterable[Any] | None) -> tuple[PodToleration, ...]:
    return tuple(PodToleration(str(t.get("key") or ""), str(t.get("operator") or ""),
                               str(t.get("value") or ""), str(t.get("effect") or ""))
                 for t in items or () if isinstance(t, Mapping))


def untolerated(node: NodeInfo, tolerations: Sequence[PodToleration]) -> NodeTaint | None:
    """The first taint that keeps the pod off the node (scheduling effects only), or None.

    A cordon counts as the taint `node.kubernetes.io/unschedulable:NoSchedule`.
    """
    for taint in node.taints:
        if taint.effect in SCHEDULING_EFFECTS and not any(t.tolerates(taint) for t in tolerations):
            return taint
    if node.unschedulable:
        cordon = NodeTaint(UNSCHEDULABLE_KEY, "", "NoSchedule")
        if not any(t.tolerates(cordon) for t in tolerations):
            return cordon
    return None


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


def _integer(value: str) -> int | None:
    try:
        return int(value)
    except ValueError:
        return None
