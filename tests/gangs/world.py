"""Small clusters as API objects for the gang tests: nodes, slices, claims, pods, a Gang.

Everything is the plain dict a `--from` file holds, so a case runs through exactly
what `draco allocate --gang --from FILE` reads.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from operators.cli.allocate_gang import gang_document
from operators.cli.state import build_tracker
from operators.model import NamespacedName
from tests.allocator.build import DEFAULT_CLASSES, claim_api, device_class_api, resource_slice_api

NS = "default"


def node(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


def node_slice(node_name: str, devices: Sequence[Any], *, driver: str = "driver-a",
               counters: Sequence[Mapping[str, Any]] = ()) -> list[dict[str, Any]]:
    """One pool per node (`<node>`); with counters, a counter slice beside it."""
    if counters:
        return [
            resource_slice_api({"driver": driver, "pool": node_name, "node": node_name,
                                "count": 2, "devices": list(devices),
                                "name": f"{node_name}-devices"}, 0),
            resource_slice_api({"driver": driver, "pool": node_name, "count": 2,
                                "sharedCounters": list(counters), "allNodes": True,
                                "name": f"{node_name}-counters"}, 1),
        ]
    return [resource_slice_api({"driver": driver, "pool": node_name, "node": node_name,
                                "devices": list(devices), "name": f"{node_name}-slice"}, 0)]


def gpus(n: int, prefix: str = "gpu", **attributes: Any) -> list[dict[str, Any]]:
    attrs = {k.replace("__", "/"): ({"string": v} if isinstance(v, str) else {"int": v})
             for k, v in attributes.items()}
    return [{"name": f"{prefix}-{i}", **({"attributes": attrs} if attrs else {})} for i in range(n)]


def classes() -> list[dict[str, Any]]:
    return [device_class_api(c) for c in DEFAULT_CLASSES]


def gang(name: str, min_count: int, *, node_label: str | None = None,
         device_attribute: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"minCount": min_count}
    topology = {k: v for k, v in (("nodeLabel", node_label), ("deviceAttribute", device_attribute)) if v}
    if topology:
        spec["topology"] = topology
    return {"apiVersion": "resource.draco.dev/v1alpha1", "kind": "Gang",
            "metadata": {"name": name, "namespace": NS, "uid": f"uid-gang-{name}",
                         "creationTimestamp": "2026-01-01T00:00:00Z"}, "spec": spec}


def pod_group(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """An upstream `scheduling.k8s.io/v1beta1` PodGroup in the test namespace."""
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": NS}, "spec": spec}


def joining(group: str, objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OBJS (from `member`) with each pod moved from draco's gang label to the PodGroup
    GROUP (`spec.schedulingGroup`), as upstream's pods name theirs."""
    for obj in objs:
        if obj["kind"] == "Pod":
            obj["metadata"].pop("labels", None)
            obj["spec"]["schedulingGroup"] = {"podGroupName": group}
    return objs


def allocated_on(node_name: str, *devices: str, request: str = "gpu") -> dict[str, Any]:
    """`status.allocation` of devices of the node's pool, pinned to the node."""
    return {"devices": {"results": [{"request": request, "driver": "driver-a", "pool": node_name,
                                     "device": d} for d in devices]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node_name]}]}]}}


def shared_claim(name: str, requests: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A claim several members name (`member(..., shared=[NAME])`): one NIC for all."""
    c = claim_api({"name": name, "requests": list(requests)})
    c["metadata"]["uid"] = f"uid-{name}"
    return c


def member(pod: str, gang_name: str, requests: Sequence[Mapping[str, Any]], *,
           constraints: Sequence[Mapping[str, Any]] = (), allocation: Mapping[str, Any] | None = None,
           node_name: str = "", shared: Sequence[str] = ()) -> list[dict[str, Any]]:
    """A gated pod of the gang with one claim `<pod>-claim` of REQUESTS (none when
    REQUESTS is empty: a launcher) and the SHARED claims by name; with ALLOCATION (see
    `allocated_on`), its claim is allocated and reserved and the pod ungated."""
    c = claim_api({"name": f"{pod}-claim", "requests": list(requests),
                   **({"constraints": list(constraints)} if constraints else {})})
    c["metadata"]["uid"] = f"uid-{pod}-claim"
    if allocation is not None:
        c["status"] = {"allocation": allocation, "reservedFor": [
            {"resource": "pods", "name": pod, "uid": f"uid-{pod}"}]}
    spec: dict[str, Any] = {
        "schedulingGates": [] if allocation else [{"name": "resource.draco.dev/allocation"}],
        "resourceClaims": ([{"name": "gpu", "resourceClaimName": f"{pod}-claim"}] if requests else [])
        + [{"name": f"shared-{n}", "resourceClaimName": n} for n in shared],
        "containers": [{"name": "c", "image": "busybox"}]}
    if node_name:
        spec["nodeName"] = node_name
    p = {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": pod, "namespace": NS, "uid": f"uid-{pod}",
                      "labels": {"resource.draco.dev/gang": gang_name}},
         "spec": spec, "status": {"phase": "Pending"}}
    return [c, p] if requests else [p]


def place(objects: Iterable[dict[str, Any]], name: str = "g", budget_s: float = 10.0) -> dict[str, Any]:
    objs = list(objects)
    return gang_document(build_tracker(objs), objs, NamespacedName(NS, name), budget_s)


def devices_of(doc: Mapping[str, Any]) -> list[str]:
    """Every allocated device as `pool/device`, over all members and claims."""
    return sorted(f"{r['pool']}/{r['device']}" for claims in doc["members"].values()
                  for results in claims.values() for r in results)
