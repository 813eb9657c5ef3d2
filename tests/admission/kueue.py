"""Kueue objects (kueue.x-k8s.io/v1beta2) as plain dicts for the admission tests:
Workloads with PodSets, their admission (flavors, TAS assignments, checks),
AdmissionChecks, ResourceFlavors, and ResourceClaimTemplates. Shapes as Kueue v0.19.2's
Go types spell them (apis/kueue/v1beta2)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from operators.cli.allocate_workload import workload_document
from operators.cli.state import build_tracker
from operators.model import NamespacedName
from tests.allocator.build import claim_api

NS = "default"
T0 = "2026-11-28T00:00:00Z"
API = "kueue.x-k8s.io/v1beta2"
CHECK = "draco-devices"


def claim_template(name: str, requests: Sequence[Mapping[str, Any]], *,
                   constraints: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    c = claim_api({"name": name, "requests": list(requests),
                   **({"constraints": list(constraints)} if constraints else {})})
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": NS}, "spec": {"spec": c["spec"]}}


def gpu_template(name: str = "gpu", count: int = 1, **extra: Any) -> dict[str, Any]:
    return claim_template(name, [{"name": "gpu", "class": "class-a", "count": count, **extra}])


def pod_set(name: str, count: int, *, templates: Mapping[str, str] | None = None,
            claims: Mapping[str, str] | None = None, labels: Mapping[str, str] | None = None,
            node_selector: Mapping[str, str] | None = None) -> dict[str, Any]:
    """TEMPLATES / CLAIMS: resourceClaims entry name -> template / claim name."""
    rcs = [{"name": e, "resourceClaimTemplateName": t} for e, t in (templates or {}).items()]
    rcs += [{"name": e, "resourceClaimName": c} for e, c in (claims or {}).items()]
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "busybox",
                        "resources": {"claims": [{"name": r["name"]} for r in rcs]}}],
        "restartPolicy": "Never"}
    if rcs:
        spec["resourceClaims"] = rcs
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    return {"name": name, "count": count,
            "template": {"metadata": {"labels": dict(labels or {})}, "spec": spec}}


def hosts(*pairs: tuple[str, int]) -> dict[str, Any]:
    """A TAS assignment at the hostname level: (node, pods) per domain."""
    return {"topologyAssignment": {
        "levels": ["kubernetes.io/hostname"],
        "slices": [{"domainCount": len(pairs),
                    "valuesPerLevel": [{"individual": {"roots": [h for h, _ in pairs]}}],
                    "podCounts": {"individual": [n for _, n in pairs]}}]}}


def workload(name: str, pod_sets: Sequence[Mapping[str, Any]], *,
             assignments: Mapping[str, Mapping[str, Any]] | None = None,
             checks: Sequence[str] = (CHECK,), quota: bool = True,
             annotations: Mapping[str, str] | None = None, state: str = "Pending",
             conditions: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": [dict(c) for c in conditions]}
    if quota:
        status["conditions"].append({"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                                     "message": "Quota reserved in ClusterQueue cq",
                                     "lastTransitionTime": T0})
        status["admission"] = {"clusterQueue": "cq", "podSetAssignments": [
            {"name": ps["name"], "flavors": {"cpu": "default"}, "count": ps["count"],
             **(assignments or {}).get(str(ps["name"]), {})} for ps in pod_sets]}
    status["admissionChecks"] = [{"name": c, "state": state, "message": "", "lastTransitionTime": T0}
                                 for c in checks]
    md: dict[str, Any] = {"name": name, "namespace": NS, "uid": f"uid-{name}", "resourceVersion": "1"}
    if annotations:
        md["annotations"] = dict(annotations)
    return {"apiVersion": API, "kind": "Workload", "metadata": md,
            "spec": {"queueName": "lq", "podSets": [dict(p) for p in pod_sets]}, "status": status}


def admission_check(name: str = CHECK, controller: str = "resource.draco.dev/devices") -> dict[str, Any]:
    return {"apiVersion": API, "kind": "AdmissionCheck", "metadata": {"name": name, "uid": f"uid-{name}", "generation": 1},
            "spec": {"controllerName": controller}}


def flavor(name: str, **node_labels: str) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": name},
            "spec": {"nodeLabels": node_labels}}


def decide_doc(objects: Iterable[dict[str, Any]], name: str = "w", budget_s: float = 10.0) -> dict[str, Any]:
    objs = list(objects)
    return workload_document(build_tracker(objs), objs, NamespacedName(NS, name), budget_s)


def devices_of(doc: Mapping[str, Any]) -> list[str]:
    """Every device of the answer as pool/device, once per claim (a shared claim once)."""
    seen: dict[str, list[str]] = {}
    for pods in doc["members"].values():
        for claims in pods.values():
            for results in claims.values():
                key = repr(results)
                seen[key] = [f"{r['pool']}/{r['device']}" for r in results]
    return sorted(d for ds in seen.values() for d in ds)


def decision_of(objects: Iterable[dict[str, Any]], name: str = "w") -> Any:
    """The pure verdict (`admission.decide.Decision`) for Workload NAME of OBJECTS."""
    from operators.admission.decide import decide, gang_from_objects
    from operators.admission.workload import parse_workload
    from operators.allocator import in_use_from_tracker, inventory_from_tracker
    from operators.allocator.nodes import NodeIndex
    from operators.cli.allocation_records import nodes_from

    objs = list(objects)
    tracker = build_tracker(objs)
    wl = next(parse_workload(o) for o in objs if o["kind"] == "Workload" and o["metadata"]["name"] == name)
    templates = {o["metadata"]["name"]: o for o in objs if o["kind"] == "ResourceClaimTemplate"}
    return decide(wl, NodeIndex(inventory_from_tracker(tracker), nodes_from(objs, tracker)),
                  {c.name: c for c in tracker.device_classes()}, in_use_from_tracker(tracker),
                  templates=templates, claims=tracker.claim, gangs=gang_from_objects(objs))
