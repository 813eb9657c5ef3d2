"""Kueue and JobSet on a real 1.37 cluster: the fixtures and the few objects tests make.

A session fixture starts one 1.37 cluster of these tests' own (four kwok nodes in two
racks: node-0 and node-1 in rack-a, node-2 and node-3 in rack-b) and on it
`hack/cluster stack up`: Kueue v0.19.2 and JobSet v0.10.1 as their releases install
them, Kueue managing pods only in namespaces labelled with the stack's managed label,
and counting the devices of the DeviceClass `stack-gpu` as `example.com/gpu` (its DRA
integration's deviceClassMappings). The cluster is private to this stack's tests: they
label nodes and make cluster-scoped Kueue objects (ClusterQueues, ResourceFlavors,
Topologies), which `stack_137` removes after each test. `DRACO_STACK_DIR=DIR` reuses a
cluster started by hand (`hack/cluster up --k8s 1.37 --nodes 4 --dir DIR` and
`hack/cluster stack up --dir DIR --device-class-mapping example.com/gpu=stack-gpu`).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from operators.allocator.pod_claims import GATE
from operators.apiserver.testing import wait_for
from tests.e2e.backends import HACK_CLUSTER, RealBackend, RealCluster, quoted
from tests.operator_threads import operator_threads

RACK = "example.com/rack"
RACKS = {"node-0": "rack-a", "node-1": "rack-a", "node-2": "rack-b", "node-3": "rack-b"}
MANAGED = ("draco.dev/workload-stack", "managed")
GPU_CLASS = "stack-gpu"
GPU_RESOURCE = "example.com/gpu"  # what Kueue calls a device of GPU_CLASS in its quotas
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
ADMISSION_GATE = "kueue.x-k8s.io/admission"
KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets"
GANGS = "/apis/resource.draco.dev/v1alpha1/namespaces/{ns}/gangs"
TEMPLATES = "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaimtemplates"
# the kinds of Kueue's that are cluster-scoped: a test's own, removed after it
KUEUE_CLUSTER_SCOPED = ("clusterqueues", "resourceflavors", "topologies")
POLL = 0.5  # seconds between polls of the real API server


def _hack(*args: str, timeout: float = 3000) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(HACK_CLUSTER), *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"hack/cluster {' '.join(args)} failed (exit {proc.returncode}):\n"
                           f"{proc.stderr[-4000:]}")
    return proc


@pytest.fixture(scope="session")
def stack_cluster_137(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    """A 1.37 cluster of the stack tests' own, with Kueue and JobSet running."""
    reuse = os.environ.get("DRACO_STACK_DIR")
    if reuse:
        cluster = RealCluster(Path(reuse), owned=False, private=True).install_crds()
    else:
        cluster = RealCluster.start("1.37", tmp_path_factory.mktemp("stack-137"), nodes=len(RACKS),
                                    private=True)
        try:
            _hack("stack", "up", "--dir", str(cluster.dir),
                  f"--device-class-mapping={GPU_RESOURCE}={GPU_CLASS}", f"--managed-label={'='.join(MANAGED)}")
        except BaseException:
            cluster.stop()
            raise
    try:
        admin = RealBackend(cluster, tmp_path_factory.mktemp("stack-admin"))
        for node, rack in RACKS.items():
            admin.merge_patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": {RACK: rack}}})
        admin.cleanup()
        yield cluster
    finally:
        cluster.stop()  # `hack/cluster down` stops Kueue and JobSet with it


@pytest.fixture
def stack_137(stack_cluster_137: RealCluster, tmp_path: Path) -> Iterator[RealBackend]:
    """A namespace of the stack's cluster that Kueue manages; afterwards the test's
    workloads, pods and Kueue objects go."""
    b = RealBackend(stack_cluster_137, tmp_path)
    try:
        b.merge_patch(f"/api/v1/namespaces/{b.ns}", {"metadata": {"labels": {MANAGED[0]: MANAGED[1]}}})
        yield b
    finally:
        for path in (JOBSETS.format(ns=b.ns), f"/apis/batch/v1/namespaces/{b.ns}/jobs"):
            b.request("DELETE", f"{path}?propagationPolicy=Background")
        # Kueue's finalizer on the pods it manages would hold them until it has caught up
        for pod in (b.get(f"/api/v1/namespaces/{b.ns}/pods") or {}).get("items", []):
            if pod["metadata"].get("finalizers"):
                b.request("PATCH", f"/api/v1/namespaces/{b.ns}/pods/{pod['metadata']['name']}",
                          {"metadata": {"finalizers": None}}, "application/merge-patch+json")
        b.cleanup()
        for kind in KUEUE_CLUSTER_SCOPED:
            for obj in (b.get(f"{KUEUE}/{kind}") or {}).get("items", []):
                b.request("DELETE", f"{KUEUE}/{kind}/{obj['metadata']['name']}")


@pytest.fixture
def stack_operator(stack_137: RealBackend, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """`draco run`'s controllers in threads against the stack's cluster."""
    yield from operator_threads(stack_137.kubeconfig, monkeypatch)


# ----------------------------------------------------------------------- objects


def gpu_class(b: RealBackend) -> None:
    """The DeviceClass Kueue maps to example.com/gpu, limited to the test's own driver."""
    b.create("/apis/resource.k8s.io/v1/deviceclasses", {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": GPU_CLASS},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{b.driver}"'}}]}})


def gpus(b: RealBackend, node: str, count: int) -> list[str]:
    """COUNT GPUs of the test's driver on NODE (one pool per node); their names."""
    names = [f"{node}-gpu-{i}" for i in range(count)]
    b.create("/apis/resource.k8s.io/v1/resourceslices", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{b.ns}-{node}"},
        "spec": {"driver": b.driver, "nodeName": node,
                 "pool": {"name": f"{b.ns}-{node}", "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": n} for n in names]}})
    return names


def claim_template(b: RealBackend, name: str, count: int) -> None:
    b.create(TEMPLATES.format(ns=b.ns), {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS, "allocationMode": "ExactCount",
                                        "count": count}}]}}}})


def pod_spec(template: str, cpu: str | None = None, gates: tuple[str, ...] = (GATE,)) -> dict[str, Any]:
    """A pod that takes its devices from TEMPLATE and carries draco's gate (as a pod
    template for draco does; draco's webhook is not part of these tests)."""
    container: dict[str, Any] = {"name": "c", "image": "registry.invalid/app",
                                 "resources": {"claims": [{"name": "gpu"}]}}
    if cpu:
        container["resources"]["requests"] = {"cpu": cpu}
    return {"schedulingGates": [{"name": g} for g in gates],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
            "containers": [container], "restartPolicy": "Never",
            "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}]}


def flavor(b: RealBackend, name: str, node_labels: dict[str, str] | None = None,
           topology: str | None = None) -> None:
    spec: dict[str, Any] = {}
    if node_labels:
        spec["nodeLabels"] = node_labels
    if topology:
        spec["topologyName"] = topology
    b.create(f"{KUEUE}/resourceflavors", {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                                          "metadata": {"name": name}, "spec": spec})


def cluster_queue(b: RealBackend, name: str, flavor_name: str, quota: dict[str, str]) -> None:
    b.create(f"{KUEUE}/clusterqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name},
        "spec": {"namespaceSelector": {}, "resourceGroups": [{
            "coveredResources": sorted(quota),
            "flavors": [{"name": flavor_name, "resources": [
                {"name": r, "nominalQuota": q} for r, q in sorted(quota.items())]}]}]}})


def local_queue(b: RealBackend, name: str, cq: str) -> None:
    b.create(f"{KUEUE}/namespaces/{b.ns}/localqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": name},
        "spec": {"clusterQueue": cq}})


def queue_active(b: RealBackend, cq: str) -> bool:
    found = b.get(f"{KUEUE}/clusterqueues/{cq}") or {}
    return any(c["type"] == "Active" and c["status"] == "True"
               for c in (found.get("status") or {}).get("conditions") or [])


def gang(b: RealBackend, name: str, min_count: int, **topology: str) -> None:
    spec: dict[str, Any] = {"minCount": min_count}
    if topology:
        spec["topology"] = topology
    b.create(GANGS.format(ns=b.ns), {"apiVersion": "resource.draco.dev/v1alpha1", "kind": "Gang",
                                     "metadata": {"name": name}, "spec": spec})


# ----------------------------------------------------------------------- reading


def pod(b: RealBackend, name: str) -> dict[str, Any]:
    return b.get(f"/api/v1/namespaces/{b.ns}/pods/{name}") or {}


def pods(b: RealBackend, selector: str) -> list[dict[str, Any]]:
    listed = b.get(f"/api/v1/namespaces/{b.ns}/pods?labelSelector={quoted(selector)}") or {}
    return list(listed.get("items") or [])


def gates(p: dict[str, Any]) -> list[str]:
    return [g["name"] for g in p.get("spec", {}).get("schedulingGates") or []]


def claim_of(b: RealBackend, p: dict[str, Any]) -> dict[str, Any] | None:
    """The pod's claim: the one it names, or the one kube-controller-manager made for it
    from its template."""
    for ref in p.get("spec", {}).get("resourceClaims") or []:
        if ref.get("resourceClaimName"):
            return b.get(f"/apis/resource.k8s.io/v1/namespaces/{b.ns}/resourceclaims/{ref['resourceClaimName']}")
    for status in (p.get("status") or {}).get("resourceClaimStatuses") or []:
        if status.get("resourceClaimName"):
            return b.get(f"/apis/resource.k8s.io/v1/namespaces/{b.ns}/resourceclaims/"
                         f"{status['resourceClaimName']}")
    return None


def allocation(b: RealBackend, p: dict[str, Any]) -> tuple[str, list[str]] | None:
    """(the node the pod's claim is pinned to, its devices), once allocated."""
    return placement(claim_of(b, p) or {})


def placement(claim: dict[str, Any]) -> tuple[str, list[str]] | None:
    alloc = (claim.get("status") or {}).get("allocation")
    if not alloc:
        return None
    term = alloc["nodeSelector"]["nodeSelectorTerms"][0]
    node = term["matchFields"][0]["values"][0]
    return str(node), sorted(r["device"] for r in alloc["devices"]["results"])


def draco_condition(p: dict[str, Any]) -> dict[str, Any] | None:
    return next((c for c in (p.get("status") or {}).get("conditions") or []
                 if c["type"] == "DracoAllocation"), None)


def workload_of(b: RealBackend, owner: str) -> dict[str, Any] | None:
    """The Kueue Workload an object (a pod, a Job) of that name owns."""
    listed = b.get(f"{KUEUE}/namespaces/{b.ns}/workloads") or {}
    for wl in listed.get("items") or []:
        if any(ref.get("name") == owner for ref in wl["metadata"].get("ownerReferences") or []):
            return dict(wl)
    return None


def admitted(wl: dict[str, Any] | None) -> bool:
    return any(c["type"] == "Admitted" and c["status"] == "True"
               for c in ((wl or {}).get("status") or {}).get("conditions") or [])


def wait(check: Any, timeout: float, what: str) -> Any:
    """wait_for at a real server's pace: conditions, never timings, decide."""
    return wait_for(check, timeout, interval=POLL, what=what)


class Seen:
    """Each pod's allocation as first seen: under kwok a Job's pods run and complete as
    soon as they are bound, and kube-controller-manager then deletes the claims it made
    for them, so the claims are watched from the test's start and what draco allocated
    is read from the watch when the claim is already gone."""

    def __init__(self, b: RealBackend, events: list[dict[str, Any]]) -> None:
        self.b = b
        self.events = events  # every watch event on the namespace's claims
        self.where: dict[str, tuple[str, list[str]]] = {}

    def look(self, p: dict[str, Any]) -> tuple[str, list[str]] | None:
        name = p["metadata"]["name"]
        if name not in self.where:
            got = allocation(self.b, p)
            if got is None:
                got = next((placement(e["object"]) for e in list(self.events)
                            if placement(e.get("object") or {}) is not None
                            and any(ref.get("kind") == "Pod" and ref.get("name") == name
                                    for ref in e["object"]["metadata"].get("ownerReferences") or [])),
                           None)
            if got is not None:
                self.where[name] = got
        return self.where.get(name)

    def placed(self, selector: str, count: int) -> dict[str, tuple[str, list[str]]]:
        """Pod name -> (node, devices) once COUNT pods of SELECTOR were allocated and ungated."""
        found = pods(self.b, selector)
        out = {}
        for p in found:
            got = self.look(p)
            if got is None or gates(p):
                return {}
            out[p["metadata"]["name"]] = got
        return out if len(out) == count else {}

    def bound_where_allocated(self, name: str) -> bool:
        p = pod(self.b, name)
        got = self.look(p) if p else None
        return got is not None and p["spec"].get("nodeName") == got[0]


@pytest.fixture
def seen(stack_137: RealBackend) -> Iterator[Seen]:
    """The test's pods' allocations, from a watch on its claims started before the test."""
    with stack_137.watching(f"/apis/resource.k8s.io/v1/namespaces/{stack_137.ns}/resourceclaims") as events:
        yield Seen(stack_137, events)
