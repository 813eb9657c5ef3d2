"""The objects `cluster_scale` creates, and the bulk steps that create them.

Every object carries `draco-bench/…` labels so a watch or a delete can pick a batch
by label selector instead of listing the namespace (20,000 pods make every list slow).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
import time
import urllib.parse
from types import ModuleType
from typing import Any

from benchmarks.kubeload import Api, PodStates, Watch, loadavg, wait_until
from tests.e2e.backends import HACK_CLUSTER

NAMESPACE = "bench"
DRIVER = "gpu.example.com"
GATE = "resource.draco.dev/allocation"
RESOURCE = "/apis/resource.k8s.io/v1"
PODS = f"/api/v1/namespaces/{NAMESPACE}/pods"
CLAIMS = f"{RESOURCE}/namespaces/{NAMESPACE}/resourceclaims"
RULES = "/apis/resource.draco.dev/v1alpha1/devicetaintrules"
IMAGE = "registry.invalid/app"


def selector(**labels: str) -> str:
    """`?labelSelector=…` for draco-bench/KEY=VALUE labels."""
    text = ",".join(f"draco-bench/{k}={v}" for k, v in labels.items())
    return "?labelSelector=" + urllib.parse.quote(text, safe="")


def _hack_cluster() -> ModuleType:
    """hack/cluster as a module, for its node manifest (a script without .py)."""
    loader = importlib.machinery.SourceFileLoader("draco_hack_cluster", str(HACK_CLUSTER))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


async def make_nodes(api: Api, count: int, limit: float = 900) -> float:
    """COUNT kwok nodes (hack/cluster's own manifest), many at once, until all are Ready
    and kube-controller-manager has lifted their `not-ready` taint (until then neither
    kube-scheduler nor draco places a pod there: a flow started earlier measured nodes
    coming up, not allocation).

    `hack/cluster up --nodes N` creates them one request at a time and gives kwok 90 s
    to make them Ready, too little for 2,000."""
    manifest = _hack_cluster().node_manifest
    ready: set[str] = set()
    lifecycle = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")

    def on_node(kind: str, obj: dict[str, Any], _: float) -> None:
        conditions = (obj.get("status") or {}).get("conditions") or []
        taints = (obj.get("spec") or {}).get("taints") or []
        if kind != "DELETED" and any(c.get("type") == "Ready" and c.get("status") == "True"
                                     for c in conditions) \
                and not any(t.get("key") in lifecycle for t in taints):
            ready.add(obj["metadata"]["name"])
        else:
            ready.discard(obj["metadata"]["name"])

    started = time.monotonic()
    async with Watch(api, "/api/v1/nodes", on_node, limit=limit):
        await api.many(lambda i: api.create("/api/v1/nodes", manifest(f"node-{i}")),
                       range(count), concurrency=16)
        await wait_until(lambda: len(ready) >= count, limit,
                         lambda: f"{len(ready)} of {count} kwok nodes Ready and untainted",
                         step=0.5)
    return time.monotonic() - started


async def namespace_and_class(api: Api) -> None:
    await api.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                            "metadata": {"name": NAMESPACE}})
    await api.create(f"{RESOURCE}/deviceclasses", {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}})


async def slices(api: Api, nodes: int, per_node: int) -> None:
    """One node-local ResourceSlice of PER_NODE devices (gpu-0…) on each of NODES nodes."""
    await api.many(lambda n: api.create(f"{RESOURCE}/resourceslices", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": f"node-{n}-gpu"},
        "spec": {"driver": DRIVER, "nodeName": f"node-{n}",
                 "pool": {"name": f"node-{n}", "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": f"gpu-{d}"} for d in range(per_node)]}}), range(nodes))


def claim(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "labels": {f"draco-bench/{k}": v for k, v in labels.items()}},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}


def dra_pod(name: str, node: str | None, gated: bool, **labels: str) -> dict[str, Any]:
    """A pod using the pre-created claim NAME: bound to NODE, or gated for draco, or neither
    (kube-scheduler allocates)."""
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": 0,
        "resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
        "containers": [{"name": "c", "image": IMAGE, "resources": {"claims": [{"name": "gpu"}]}}]}
    if node:
        spec["nodeName"] = node
    if gated:
        spec["schedulingGates"] = [{"name": GATE}]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {f"draco-bench/{k}": v for k, v in labels.items()}},
            "spec": spec}


def plain_pod(name: str, node: str, batch: str) -> dict[str, Any]:
    """A pod that uses no ResourceClaim and carries no gate, bound so that kwok runs it."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"draco-bench/kind": "plain",
                                                  "draco-bench/batch": batch}},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": IMAGE}]}}


class Allocations:
    """When a claim watch first saw each claim with `status.allocation`."""

    def __init__(self) -> None:
        self.at: dict[str, float] = {}

    def __call__(self, kind: str, obj: dict[str, Any], at: float) -> None:
        if kind != "DELETED" and (obj.get("status") or {}).get("allocation"):
            self.at.setdefault(obj["metadata"]["name"], at)


def allocated_devices(per_node: int, claims_per_node: int, node: int, nodes: int) -> list[int]:
    """Which devices of NODE the base claims take: gpu-0… on the first half of the nodes,
    gpu-1… on the second, so a rule over gpu-0 selects the pods of half of the nodes."""
    shift = 1 if node >= nodes // 2 and claims_per_node < per_node else 0
    return list(range(shift, shift + claims_per_node))


async def allocated_claim_and_pod(api: Api, n: int, d: int) -> dict[str, Any]:
    """Claim `dra-N-D` allocated `gpu-D` of node N and reserved for its pod, bound to that
    node, as kube-scheduler leaves them; returns the pod as created."""
    name, node = f"dra-{n}-{d}", f"node-{n}"
    await api.create(CLAIMS, claim(name, kind="dra", device=f"gpu-{d}"))
    pod = await api.create(PODS, dra_pod(name, node, False, kind="dra", device=f"gpu-{d}"))
    await api.merge_patch(f"{CLAIMS}/{name}/status", {"status": {
        "allocation": {"devices": {"results": [
            {"request": "gpu", "driver": DRIVER, "pool": node, "device": f"gpu-{d}"}]}},
        "reservedFor": [{"resource": "pods", "name": name, "uid": pod["metadata"]["uid"]}]}})
    return pod


async def bare_eviction(api: Api, name: str, uid: str, now: str, who: str) -> None:
    """The requests kube-controller-manager's device-taint eviction makes for one pod (the
    DisruptionTarget condition, a DELETE with a UID precondition, one Event), sent by a
    bare client WHO: the floor an evictor's figures are read against."""
    path = f"{PODS}/{name}"
    await api.call("PATCH", f"{path}/status", {"metadata": {"uid": uid}, "status": {"conditions": [{
        "type": "DisruptionTarget", "status": "True", "reason": "DeletionByDeviceTaintManager",
        "message": who, "lastTransitionTime": now}]}},
        "application/strategic-merge-patch+json", ok=(200,))
    await api.call("DELETE", path, {"apiVersion": "v1", "kind": "DeleteOptions",
                                    "preconditions": {"uid": uid}}, ok=(200, 202, 404, 409))
    await api.create(f"/api/v1/namespaces/{NAMESPACE}/events", {
        "apiVersion": "v1", "kind": "Event", "metadata": {"generateName": f"{name}."},
        "involvedObject": {"kind": "Pod", "apiVersion": "v1", "namespace": NAMESPACE,
                           "name": name, "uid": uid},
        "reason": "DeviceTaintManagerEviction", "message": "Marking for deletion",
        "type": "Normal", "source": {"component": who}, "firstTimestamp": now,
        "lastTimestamp": now, "count": 1})


async def allocated_base(api: Api, nodes: int, per_node: int, claims_per_node: int,
                         limit: float = 1800) -> int:
    """Claims allocated and reserved for Running pods bound to kwok nodes (as after a
    scheduler's work); returns how many. Waits until kwok runs every pod."""
    work = [(n, d) for n in range(nodes)
            for d in allocated_devices(per_node, claims_per_node, n, nodes)]

    async def one(item: tuple[int, int]) -> None:
        await allocated_claim_and_pod(api, *item)

    states = PodStates()
    async with Watch(api, PODS + selector(kind="dra"), states, limit=limit):
        await api.many(one, work)
        await wait_until(lambda: states.running() >= len(work), limit,
                         lambda: f"{states.running()} of {len(work)} DRA pods Running", step=0.5)
    return len(work)


async def plain_batch(api: Api, count: int, nodes: int, batch: str, states: PodStates,
                      limit: float) -> float:
    """Create COUNT plain pods spread over NODES kwok nodes and wait until all run (STATES
    is fed by the caller's watch); returns the seconds it took."""
    started = time.monotonic()
    posted = await api.many(
        lambda i: api.create(PODS, plain_pod(f"{batch}-{i}", f"node-{i % nodes}", batch)), range(count))
    await wait_until(lambda: states.running() >= count, limit,
                     lambda: f"{states.running()} of {count} plain pods of {batch} Running", step=0.2)
    took = time.monotonic() - started
    if count >= 1000:
        print(f"# {count} plain pods of {batch}: POSTed in {posted:.1f} s, Running after {took:.1f} s "
              f"(load {loadavg()})", file=sys.stderr)
    return took


async def delete_batch(api: Api, batch: str, states: PodStates, count: int, limit: float) -> float:
    """Delete a batch with one deletecollection; wait until the watch saw every pod go."""
    started = time.monotonic()
    await api.delete(PODS + selector(batch=batch))
    await wait_until(lambda: len(states.deleted) >= count, limit,
                     lambda: f"{len(states.deleted)} of {count} pods of {batch} deleted", step=0.2)
    return time.monotonic() - started
