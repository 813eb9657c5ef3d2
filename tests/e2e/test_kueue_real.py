"""draco under Kueue v0.19.2 on real 1.37: quota first, devices second, binding third.

Plain pods (Kueue's `pod` integration): a pod whose workload has no quota keeps Kueue's
`kueue.x-k8s.io/admission` gate, and draco holds no device for it and says it waits
for that gate; when quota frees up Kueue admits it, removes its gate, draco allocates
and narrows, and kube-scheduler binds the pod where its devices are. Kueue's DRA quota
(the DeviceClass mapped to example.com/gpu) counts what draco allocates.

Topology-aware scheduling: an Indexed Job of four pods of two GPUs each, required in one
rack. Kueue counts CPUs, not devices, per node: it assigns each pod a node (its
ungater writes the pod's nodeSelector) and draco must find the devices on that node.
Where that node's GPUs are taken the pod is told so and nothing is narrowed; once they
are free it gets them there.
"""

from __future__ import annotations

from typing import Any

import pytest

from operators.allocator.pod_claims import GATE
from tests.e2e.backends import RealBackend
from tests.e2e.test_allocator_e2e import SETTINGS
from tests.e2e.workload_stack import (
    ADMISSION_GATE,
    GPU_CLASS,
    GPU_RESOURCE,
    KUEUE,
    QUEUE_LABEL,
    RACK,
    RACKS,
    Seen,
    admitted,
    allocation,
    claim_of,
    claim_template,
    cluster_queue,
    draco_condition,
    flavor,
    gates,
    gpu_class,
    gpus,
    local_queue,
    pod,
    pod_spec,
    pods,
    queue_active,
    wait,
    workload_of,
)

# the stack's cluster starts within the first test's time; waits are for conditions
pytestmark = [pytest.mark.real, pytest.mark.timeout(600)]


def queued_pod(b: RealBackend, name: str, queue: str, template: str) -> dict[str, Any]:
    return b.create(f"/api/v1/namespaces/{b.ns}/pods", {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {QUEUE_LABEL: queue}}, "spec": pod_spec(template)})


def test_a_pod_without_quota_holds_no_device_until_kueue_admits_it(
        stack_137: RealBackend, stack_operator: Any, seen: Seen) -> None:
    b = stack_137
    gpu_class(b)
    gpus(b, "node-0", 4)
    flavor(b, f"plain-{b.id}")
    cluster_queue(b, f"cq-{b.id}", f"plain-{b.id}", {GPU_RESOURCE: "2"})
    local_queue(b, "lq", f"cq-{b.id}")
    wait(lambda: queue_active(b, f"cq-{b.id}"), 60, "the ClusterQueue to be active")
    claim_template(b, "two-gpus", 2)
    stack_operator(("allocator", "narrowing"), SETTINGS)

    queued_pod(b, "first", "lq", "two-gpus")
    wait(lambda: admitted(workload_of(b, "first")), 90, "Kueue to admit the first pod's workload")
    wait(lambda: seen.bound_where_allocated("first"), 120,
         "the first pod allocated by draco and bound there by kube-scheduler")
    # Kueue's DRA quota and draco agree on what the workload uses
    usage = workload_of(b, "first")["status"]["admission"]["podSetAssignments"][0]["resourceUsage"]  # type: ignore[index]
    assert usage == {GPU_RESOURCE: "2"}
    assert len(seen.where["first"][1]) == 2

    queued_pod(b, "second", "lq", "two-gpus")  # the quota is used up: Kueue keeps it gated
    told = wait(lambda: (draco_condition(pod(b, "second")) or {}).get("reason") == "WaitingForGate"
                and draco_condition(pod(b, "second")), 90, "draco to say the second pod waits")
    assert told["status"] == "False" and ADMISSION_GATE in told["message"]
    second = pod(b, "second")
    assert ADMISSION_GATE in gates(second) and GATE in gates(second)
    assert not admitted(workload_of(b, "second"))
    claim = wait(lambda: claim_of(b, pod(b, "second")), 60, "the second pod's claim from its template")
    assert not (claim.get("status") or {}).get("allocation"), "no device for a workload without quota"
    assert not (second["spec"].get("affinity") or {}).get("nodeAffinity"), "nothing narrowed"

    # the first pod goes: its quota frees up, Kueue admits the second, draco serves it
    code, body = b.request("DELETE", f"/api/v1/namespaces/{b.ns}/pods/first")
    assert code in (200, 202), body
    wait(lambda: admitted(workload_of(b, "second")), 120, "Kueue to admit the second pod's workload")
    wait(lambda: seen.bound_where_allocated("second"), 120,
         "the second pod allocated by draco and bound there by kube-scheduler")
    assert gates(pod(b, "second")) == []
    assert (draco_condition(pod(b, "second")) or {}).get("status") == "True"


def topology(b: RealBackend, name: str) -> None:
    b.create(f"{KUEUE}/topologies", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": name},
        "spec": {"levels": [{"nodeLabel": RACK}, {"nodeLabel": "kubernetes.io/hostname"}]}})


def indexed_job(b: RealBackend, name: str, queue: str, template: str, pods_count: int, cpu: str) -> None:
    spec = pod_spec(template, cpu=cpu)
    b.create(f"/apis/batch/v1/namespaces/{b.ns}/jobs", {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": {QUEUE_LABEL: queue}},
        "spec": {"completionMode": "Indexed", "completions": pods_count, "parallelism": pods_count,
                 "suspend": True, "backoffLimit": 0,
                 "template": {"metadata": {"annotations": {
                     "kueue.x-k8s.io/podset-required-topology": RACK}}, "spec": spec}}})


def test_kueue_topology_assigns_the_nodes_draco_finds_the_devices_there(
        stack_137: RealBackend, stack_operator: Any, seen: Seen) -> None:
    b = stack_137
    gpu_class(b)
    for node in RACKS:
        gpus(b, node, 4)
    topology(b, f"racks-{b.id}")
    # rack-a alone in the flavor: Kueue's choice of nodes is the two nodes of rack-a
    flavor(b, f"tas-{b.id}", node_labels={RACK: "rack-a"}, topology=f"racks-{b.id}")
    cluster_queue(b, f"cq-{b.id}", f"tas-{b.id}", {"cpu": "64", GPU_RESOURCE: "8"})
    local_queue(b, "lq", f"cq-{b.id}")
    wait(lambda: queue_active(b, f"cq-{b.id}"), 60, "the ClusterQueue to be active")
    claim_template(b, "two-gpus", 2)
    stack_operator(("allocator", "narrowing"), SETTINGS)
    # node-0's four GPUs are taken: another user's pod (no queue: Kueue leaves it alone)
    b.create(f"/apis/resource.k8s.io/v1/namespaces/{b.ns}/resourceclaims", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "taken"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": GPU_CLASS, "allocationMode": "ExactCount", "count": 4}}]}}})
    holder = pod_spec("unused")
    holder["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "taken"}]
    holder["nodeSelector"] = {"kubernetes.io/hostname": "node-0"}
    b.create(f"/api/v1/namespaces/{b.ns}/pods", {"apiVersion": "v1", "kind": "Pod",
                                                 "metadata": {"name": "holder"}, "spec": holder})
    wait(lambda: seen.bound_where_allocated("holder"), 120, "the other user's pod to hold node-0's GPUs")
    # 16 CPUs a pod, 32 a node: Kueue puts two pods on each of rack-a's nodes
    indexed_job(b, "train", "lq", "two-gpus", 4, "16")
    wait(lambda: admitted(workload_of(b, "train")), 120, "Kueue to admit the Job with a topology")

    def assigned() -> dict[str, str]:
        out = {p["metadata"]["name"]: p["spec"].get("nodeSelector", {}).get("kubernetes.io/hostname", "")
               for p in pods(b, "job-name=train")}
        return out if len(out) == 4 and all(out.values()) else {}

    nodes = wait(assigned, 120, "Kueue's ungater to give each pod its node")
    assert sorted(nodes.values()) == ["node-0", "node-0", "node-1", "node-1"]
    on = {node: [name for name, n in nodes.items() if n == node] for node in ("node-0", "node-1")}
    for name in on["node-1"]:  # free GPUs on Kueue's node: draco allocates them there
        wait(lambda name=name: seen.bound_where_allocated(name), 120, f"{name} served on node-1")
        assert seen.where[name][0] == "node-1"
    for name in on["node-0"]:  # taken: told why, no device elsewhere, nothing narrowed
        cond = wait(lambda name=name: (draco_condition(pod(b, name)) or {}).get("status") == "False"
                    and "node" in draco_condition(pod(b, name))["message"]  # type: ignore[index]
                    and draco_condition(pod(b, name)), 120, f"draco to tell {name} why")
        assert "kubernetes.io/hostname=node-0" in cond["message"], cond
        stuck = pod(b, name)
        assert allocation(b, stuck) is None
        assert GATE in gates(stuck) and not (stuck["spec"].get("affinity") or {}).get("nodeAffinity")
    # the other user's pod and claim go: node-0's GPUs are free, Kueue's pods get them there
    for path in ("/api/v1/namespaces/{ns}/pods/holder", "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/taken"):
        code, body = b.request("DELETE", path.format(ns=b.ns))
        assert code in (200, 202), body
    for name in on["node-0"]:
        wait(lambda name=name: seen.bound_where_allocated(name), 120, f"{name} served on node-0")
        assert seen.where[name][0] == "node-0"
