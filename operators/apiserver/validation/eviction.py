"""policy/v1 Eviction decisions against PodDisruptionBudgets.

kube-apiserver reads `status.disruptionsAllowed`, which the disruption controller keeps;
the embedded server has no such controller, so it derives the same number from the
namespace's pods at request time (healthy = Running and Ready, not terminating).
"""

from __future__ import annotations

import math
from typing import Any

REFUSED = "Cannot evict pod as it would violate the pod's disruption budget."


def _matches(selector: Any, labels: dict[str, str]) -> bool:
    if selector is None:
        return False
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e.get("key"), e.get("operator"), e.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def _healthy(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    if (pod.get("metadata") or {}).get("deletionTimestamp") or status.get("phase") != "Running":
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in status.get("conditions") or [])


def _scaled(value: Any, total: int) -> int:
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(int(value[:-1]) * total / 100)
    return int(value)


def disruptions_allowed(pdb: dict[str, Any], pods: list[dict[str, Any]]) -> tuple[int, int, int]:
    """(allowed, desired healthy, current healthy) for one budget."""
    spec = pdb.get("spec") or {}
    matched = [p for p in pods
               if _matches(spec.get("selector"), (p.get("metadata") or {}).get("labels") or {})]
    expected = len(matched)
    healthy = sum(1 for p in matched if _healthy(p))
    if spec.get("maxUnavailable") is not None:
        desired = max(expected - _scaled(spec["maxUnavailable"], expected), 0)
    elif spec.get("minAvailable") is not None:
        desired = _scaled(spec["minAvailable"], expected)
    else:
        desired = expected
    return max(healthy - desired, 0), desired, healthy


def eviction_allowed(pod: dict[str, Any], pdbs: list[dict[str, Any]],
                     pods: list[dict[str, Any]]) -> tuple[bool, str]:
    status = pod.get("status") or {}
    if status.get("phase") in ("Succeeded", "Failed", "Pending") or \
            (pod.get("metadata") or {}).get("deletionTimestamp"):
        return True, ""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    matching = [p for p in pdbs if _matches((p.get("spec") or {}).get("selector"), labels)]
    if not matching:
        return True, ""
    if len(matching) > 1:
        return False, ("This pod has more than one PodDisruptionBudget, which the eviction "
                       "subresource does not support.")
    pdb = matching[0]
    allowed, desired, healthy = disruptions_allowed(pdb, pods)
    if not _healthy(pod):
        policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") or "IfHealthyBudget"
        if policy == "AlwaysAllow" or healthy >= desired:
            return True, ""
    if allowed <= 0:
        name = (pdb.get("metadata") or {}).get("name", "")
        return False, (f"{REFUSED} The disruption budget {name} needs {desired} healthy pods "
                       f"and has {healthy} currently")
    return True, ""
