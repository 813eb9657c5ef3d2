"""Node taints, cordons and pod tolerations: what kube-scheduler's node-only filters read.

Two scheduler filters depend on the node alone and not on what runs there, and both
the allocator (which node may a pod's devices be on) and narrowing (which nodes will
kube-scheduler accept) must agree with them:
  * TaintToleration: a node taint with effect NoSchedule or NoExecute that none of the
    pod's tolerations tolerates keeps the pod off the node (PreferNoSchedule only
    lowers the node's score, it filters nothing);
  * NodeUnschedulable: a cordoned node (`spec.unschedulable`) takes only pods that
    tolerate `node.kubernetes.io/unschedulable:NoSchedule`, taint or no taint (the node
    lifecycle controller usually adds that taint too, but not always at once).
kube-scheduler runs NodeUnschedulable before TaintToleration, so a cordoned node is
reported as cordoned first (`cordoned`, then `untolerated_taint`).

Toleration matching (a pod's `spec.tolerations`): an empty effect matches every effect;
an empty key matches every key (the API allows that only with Exists); Exists matches any
value, Equal (or no operator) the same value; Gt and Lt (alpha in Kubernetes 1.35,
KEP-5471) compare the values as integers: Gt tolerates a taint whose value is greater than
the toleration's, Lt one whose value is smaller. Any other operator tolerates nothing.
`tolerationSeconds` only delays eviction by NoExecute taints; it plays no part in
filtering, so it is not kept.

Parsing is lenient: the API server validated these objects, and a pod or node that
could not be read would otherwise vanish from the controllers' view.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType
from typing import Any

SCHEDULING_EFFECTS = ("NoSchedule", "NoExecute")
UNSCHEDULABLE_KEY = "node.kubernetes.io/unschedulable"

_EMPTY: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class NodeTaint:
    key: str
    value: str = ""
    effect: str = ""

    def __str__(self) -> str:
        return f"{self.key}{'=' + self.value if self.value else ''}:{self.effect}"


CORDON = NodeTaint(UNSCHEDULABLE_KEY, "", "NoSchedule")  # what a cordon counts as


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
    """What scheduling reads from a Node: name and labels (placement, node selectors),
    taints and cordon (the filters above)."""

    name: str
    labels: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    taints: tuple[NodeTaint, ...] = ()
    unschedulable: bool = False


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
    if not isinstance(items, (list, tuple)):
        return ()
    key = tuple((str(t.get("key") or ""), str(t.get("operator") or ""),
                 str(t.get("value") or ""), str(t.get("effect") or ""))
                for t in items if isinstance(t, Mapping))
    return _shared(key)


@lru_cache(maxsize=512)
def _shared(key: tuple[tuple[str, str, str, str], ...]) -> tuple[PodToleration, ...]:
    """One tuple per distinct toleration list: most pods carry the same defaults, and the
    tracker keeps every pod."""
    return tuple(PodToleration(*t) for t in key)


def tolerated(taint: NodeTaint, tolerations: Sequence[PodToleration]) -> bool:
    return any(t.tolerates(taint) for t in tolerations)


def cordoned(node: NodeInfo, tolerations: Sequence[PodToleration]) -> bool:
    """NodeUnschedulable: the node is cordoned and the pod does not tolerate the cordon."""
    return node.unschedulable and not tolerated(CORDON, tolerations)


def untolerated_taint(node: NodeInfo, tolerations: Sequence[PodToleration]) -> NodeTaint | None:
    """TaintToleration: the first NoSchedule/NoExecute taint (in the node's order) the pod
    does not tolerate, or None."""
    for taint in node.taints:
        if taint.effect in SCHEDULING_EFFECTS and not tolerated(taint, tolerations):
            return taint
    return None


def untolerated(node: NodeInfo, tolerations: Sequence[PodToleration]) -> NodeTaint | None:
    """The first taint that keeps the pod off the node (scheduling effects only), or None.

    A cordon counts as the taint `node.kubernetes.io/unschedulable:NoSchedule`, looked at
    after the node's own taints.
    """
    taint = untolerated_taint(node, tolerations)
    if taint is not None:
        return taint
    return CORDON if cordoned(node, tolerations) else None


_INT64 = re.compile(r"[+-]?[0-9]+")


def _integer(value: str) -> int | None:
    """A base-10 int64 as upstream parses it (a sign allowed; no spaces, no underscores)."""
    if not _INT64.fullmatch(value):
        return None
    number = int(value)
    return number if -(2**63) <= number < 2**63 else None


__all__ = ["CORDON", "SCHEDULING_EFFECTS", "UNSCHEDULABLE_KEY", "NodeInfo", "NodeTaint",
           "PodToleration", "cordoned", "parse_node", "parse_tolerations", "tolerated",
           "untolerated", "untolerated_taint"]
