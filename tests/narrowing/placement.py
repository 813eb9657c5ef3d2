"""Test helpers: build gated pods and decide which nodes a pod or an allocation accepts.

Acceptance follows kube-scheduler: the pod's nodeSelector AND its required node affinity
(OR of terms, each an AND); an allocation's nodeSelector (null: every node).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from operators.model.selectors import parse_node_selector
from operators.narrowing import DRACO_GATE


def gated_pod(spec: Mapping[str, Any], name: str = "p") -> dict[str, Any]:
    full = copy.deepcopy(dict(spec))
    full.setdefault("schedulingGates", [{"name": DRACO_GATE}])
    full.setdefault("containers", [{"name": "c", "image": "registry.example/app:1"}])
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "resourceVersion": "7"},
            "spec": full}


def pod_accepts(pod: Mapping[str, Any], node: str, labels: Mapping[str, str]) -> bool:
    spec = pod.get("spec") or {}
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution"))
    if required is None:
        return True
    return parse_node_selector(required).matches(node, labels)


def allocation_accepts(selector: Mapping[str, Any] | None, node: str,
                       labels: Mapping[str, str]) -> bool:
    return selector is None or parse_node_selector(selector).matches(node, labels)
