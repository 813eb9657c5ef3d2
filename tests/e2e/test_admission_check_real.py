"""Kueue v0.19.2 alone, and Kueue with draco's devices check, side by side on real 1.37.

Kueue counts devices as quota (its DRA integration maps the DeviceClass `stack-gpu`
to example.com/gpu); it never matches them. draco answers the AdmissionChecks whose
controllerName is `resource.draco.dev/devices` (`draco run --admission-check`).

Quota for two, devices for one: a ClusterQueue with quota for two groups of four pods
of two GPUs each, and GPUs on rack-a's two nodes only (eight). Kueue alone admits both
groups; the second's pods are ungated by Kueue and then stay Pending, holding quota,
because no device is left. With draco's check on the ClusterQueue the second group is
answered `Retry` (Kueue evicts it, releases its quota and requeues it) for as long as
the first holds the devices, and once the first has finished it is admitted and runs.

The pods are plain pods in one Kueue pod group each (`kueue.x-k8s.io/pod-group-name`):
under kwok a Job's pods complete as soon as they run, a plain pod runs until the test
ends it, so "the first finishes" is the test's move.

TAS side by side: an Indexed Job of four pods (10 CPUs, two GPUs each) required in one
rack, on a flavor with a Topology of racks and hosts over all four nodes. The GPUs are
in rack-b; rack-b's CPUs are partly someone else's (plain pods without a queue: 4 CPUs
a node for good, 20 more for a while), so when the Job comes only rack-a has the CPUs.
Kueue alone admits it into rack-a, where its pods stay Pending without devices. With
draco's check the answer is `Retry` ("the devices do not fit the nodes TAS assigned
... they fit elsewhere now"); Kueue requeues it, and once rack-b's CPUs free up TAS's
next assignment is rack-b (its best fit: two pods a node there, three in rack-a), the
check is `Ready` and the pods get rack-b's devices. Kueue v0.19.2 has no way for a
check to steer TAS (a Retry is assigned afresh from the cluster's state), so the
landing needs rack-b to fit Kueue's counts: draco's part is to keep the Job queued,
holding no quota, instead of admitted where it can never run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from operators.allocator.pod_claims import GATE
from tests.e2e.backends import RealBackend
from tests.e2e.workload_stack import (
    ADMISSION_GATE,
    GPU_RESOURCE,
    KUEUE,
    QUEUE_LABEL,
    RACK,
    RACKS,
    Seen,
    admitted,
    allocation,
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

CONTROLLER = "resource.draco.dev/devices"
GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
GROUP_COUNT = "kueue.x-k8s.io/pod-group-total-count"
# draco's controllers as `draco run --admission-check` starts them; a short requeue
# keeps the retried group's wait small
SETTINGS = SimpleNamespace(qps=200.0, burst=400, allocation_timeout=10.0, narrowing_timeout=300.0,
                           admission_check=True, admission_requeue_after=3, admission_pod_timeout=600.0)
GROUP = 4  # pods of a group, two GPUs each


@pytest.fixture
def checks(stack_137: RealBackend) -> Iterator[RealBackend]:
    """The stack's namespace; afterwards the test's AdmissionChecks go too (cluster-scoped)."""
    yield stack_137
    for obj in (stack_137.get(f"{KUEUE}/admissionchecks") or {}).get("items", []):
        if obj["metadata"]["name"].endswith(stack_137.id):
            stack_137.request("DELETE", f"{KUEUE}/admissionchecks/{obj['metadata']['name']}")


def admission_check(b: RealBackend, name: str) -> None:
    b.create(f"{KUEUE}/admissionchecks", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck", "metadata": {"name": name},
        "spec": {"controllerName": CONTROLLER}})


def with_check(b: RealBackend, cq: str, check: str) -> None:
    b.merge_patch(f"{KUEUE}/clusterqueues/{cq}",
                  {"spec": {"admissionChecksStrategy": {"admissionChecks": [{"name": check}]}}})


def group(b: RealBackend, name: str, queue: str, template: str, count: int = GROUP) -> list[str]:
    """A Kueue pod group of COUNT alike pods (one PodSet of COUNT); their names."""
    names = [f"{name}-{i}" for i in range(count)]
    for pod_name in names:
        b.create(f"/api/v1/namespaces/{b.ns}/pods", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod_name, "labels": {QUEUE_LABEL: queue, GROUP_LABEL: name},
                         "annotations": {GROUP_COUNT: str(count)}},
            "spec": pod_spec(template)})
    return names


def group_workload(b: RealBackend, name: str) -> dict[str, Any] | None:
    return workload_of(b, f"{name}-0")


def check_state(wl: dict[str, Any] | None, check: str) -> dict[str, Any]:
    for state in ((wl or {}).get("status") or {}).get("admissionChecks") or []:
        if state.get("name") == check:
            return dict(state)
    return {}


def running(b: RealBackend, names: list[str]) -> dict[str, str]:
    """Pod -> node once every one of NAMES runs (bound, ungated)."""
    out = {}
    for name in names:
        p = pod(b, name)
        if (p.get("status") or {}).get("phase") != "Running" or gates(p):
            return {}
        out[name] = p["spec"]["nodeName"]
    return out


def unserved(b: RealBackend, name: str) -> dict[str, Any] | None:
    """draco's condition on the pod once it says the devices are not there (not that it
    waits for Kueue's gate)."""
    cond = draco_condition(pod(b, name))
    if cond is None or cond.get("status") != "False" or cond.get("reason") == "WaitingForGate":
        return None
    return cond


def reserved_for(b: RealBackend) -> dict[str, str]:
    """`draco devices -o json` against the cluster: device -> the Workload draco's check
    keeps it for, for the test's own driver."""
    proc = subprocess.run([sys.executable, "-m", "operators", "devices", "-o", "json"], capture_output=True,
                          text=True, env={**os.environ, "KUBECONFIG": str(b.kubeconfig)}, timeout=120, check=True)
    return {d["device"]: d["workload"] for d in json.loads(proc.stdout)["devices"]
            if d["driver"] == b.driver and "workload" in d}


def finish(b: RealBackend, names: list[str]) -> None:
    """Each pod's container exits 0: the pod Succeeded, as the kubelet would report it."""
    for name in names:
        code, body = b.request("GET", f"/api/v1/namespaces/{b.ns}/pods/{name}")
        assert code == 200, body
        body["status"]["phase"] = "Succeeded"
        code, body = b.request("PUT", f"/api/v1/namespaces/{b.ns}/pods/{name}/status", body)
        assert code == 200, body


def one_rack_of_gpus(b: RealBackend) -> None:
    """Quota for two groups (16 GPUs), devices for one: four GPUs on each of rack-a's nodes."""
    gpu_class(b)
    for node in ("node-0", "node-1"):
        gpus(b, node, 4)
    flavor(b, f"plain-{b.id}")
    cluster_queue(b, f"cq-{b.id}", f"plain-{b.id}", {GPU_RESOURCE: str(2 * GROUP * 2)})
    local_queue(b, "lq", f"cq-{b.id}")
    claim_template(b, "two-gpus", 2)


def test_kueue_alone_admits_two_groups_for_one_rack_of_devices(
        checks: RealBackend, stack_operator: Any, seen: Seen) -> None:
    b = checks
    started = time.monotonic()
    one_rack_of_gpus(b)
    stack_operator(("allocator", "narrowing"), SETTINGS)  # the check runs; this queue has none
    wait(lambda: queue_active(b, f"cq-{b.id}"), 60, "the ClusterQueue to be active")

    first = group(b, "first", "lq", "two-gpus")
    where = wait(lambda: running(b, first), 180, "the first group running")
    assert {RACKS[n] for n in where.values()} == {"rack-a"}

    second = group(b, "second", "lq", "two-gpus")
    wait(lambda: admitted(group_workload(b, "second")), 120, "Kueue to admit the second group as well")
    for name in second:  # ungated by Kueue, told by draco there is no device, Pending
        cond = wait(lambda name=name: unserved(b, name), 120, f"draco to tell {name} it has no devices")
        assert cond["reason"] == "Unschedulable", cond
        stuck = pod(b, name)
        assert ADMISSION_GATE not in gates(stuck), "Kueue admitted it"
        assert GATE in gates(stuck) and stuck["status"]["phase"] == "Pending"
        assert allocation(b, stuck) is None
    # both groups' quota is taken while one rack of devices serves one of them
    usage = group_workload(b, "second")["status"]["admission"]["podSetAssignments"][0]["resourceUsage"]  # type: ignore[index]
    assert usage == {GPU_RESOURCE: str(GROUP * 2)}
    print(f"\nKueue alone: both groups admitted, the second's {GROUP} pods Pending without devices "
          f"({time.monotonic() - started:.1f}s)")


def test_with_dracos_check_the_second_group_retries_until_the_first_finishes(
        checks: RealBackend, stack_operator: Any, seen: Seen) -> None:
    b = checks
    started = time.monotonic()
    one_rack_of_gpus(b)
    admission_check(b, f"devices-{b.id}")
    with_check(b, f"cq-{b.id}", f"devices-{b.id}")
    check = f"devices-{b.id}"
    with b.watching(f"{KUEUE}/namespaces/{b.ns}/workloads") as events:
        stack_operator(("allocator", "narrowing"), SETTINGS)
        # draco marks its AdmissionCheck Active; only then is the ClusterQueue active
        wait(lambda: queue_active(b, f"cq-{b.id}"), 60, "the ClusterQueue with draco's check to be active")

        first = group(b, "first", "lq", "two-gpus")
        wait(lambda: admitted(group_workload(b, "first")), 120, "the first group admitted")
        ready = check_state(group_workload(b, "first"), check)
        assert ready["state"] == "Ready", ready
        where = wait(lambda: running(b, first), 180, "the first group running")
        assert {RACKS[n] for n in where.values()} == {"rack-a"}
        # `draco devices` names the Workload the check keeps rack-a's eight GPUs for
        assert reserved_for(b) == {f"{node}-gpu-{i}": f"{b.ns}/first" for node in ("node-0", "node-1")
                                   for i in range(4)}

        second = group(b, "second", "lq", "two-gpus")
        second_wl = wait(lambda: (group_workload(b, "second") or {}).get("metadata", {}).get("name"), 60,
                         "Kueue's Workload for the second group")

        def retried() -> dict[str, Any] | None:
            for e in list(events):
                obj = e.get("object") or {}
                if obj.get("metadata", {}).get("name") == second_wl:
                    state = check_state(obj, check)
                    if state.get("state") == "Retry":
                        return state
            return None

        retry = wait(retried, 120, "draco's check to answer Retry for the second group")
        assert f"needs {GROUP * 2} free devices across the gang, the domain has 0" in retry["message"], retry
        retried_at = time.monotonic()
        # Kueue evicts and requeues it: quota released, never admitted, pods still gated by Kueue
        wait(lambda: int(check_state(group_workload(b, "second"), check).get("retryCount") or 0) >= 2, 120,
             "Kueue to requeue the second group and draco to answer Retry again")
        assert not admitted(group_workload(b, "second"))
        for name in second:
            p = pod(b, name)
            assert ADMISSION_GATE in gates(p) and allocation(b, p) is None, p["metadata"]["name"]

        finish(b, first)  # the first group's work is done: Kueue finishes its Workload
        wait(lambda: admitted(group_workload(b, "second")), 180, "the second group admitted once the first is done")
        assert check_state(group_workload(b, "second"), check)["state"] == "Ready"
        where = wait(lambda: running(b, second), 180, "the second group running")
        assert {RACKS[n] for n in where.values()} == {"rack-a"}
        for name in second:
            wait(lambda name=name: seen.bound_where_allocated(name), 60, f"{name} bound where its devices are")
    print(f"\nwith draco's check: the second group in Retry for {time.monotonic() - retried_at:.1f}s "
          f"until the first finished, then ran ({time.monotonic() - started:.1f}s in all)")


# ----------------------------------------------------------------------- TAS side by side


def topology(b: RealBackend, name: str) -> None:
    b.create(f"{KUEUE}/topologies", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": name},
        "spec": {"levels": [{"nodeLabel": RACK}, {"nodeLabel": "kubernetes.io/hostname"}]}})


def cpu_pod(b: RealBackend, name: str, node: str, cpu: str) -> None:
    """Someone else's pod (no queue: Kueue leaves it alone) using CPUs, no device, on NODE;
    Kueue's TAS counts it against the node."""
    b.create(f"/api/v1/namespaces/{b.ns}/pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                                                 "spec": {"nodeSelector": {"kubernetes.io/hostname": node},
                                                          "containers": [{"name": "c", "image": "registry.invalid/app",
                                                                          "resources": {"requests": {"cpu": cpu}}}],
                                                          "tolerations": pod_spec("none")["tolerations"]}})


def indexed_job(b: RealBackend, name: str, queue: str, template: str, pods_count: int, cpu: str) -> None:
    b.create(f"/apis/batch/v1/namespaces/{b.ns}/jobs", {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": {QUEUE_LABEL: queue}},
        "spec": {"completionMode": "Indexed", "completions": pods_count, "parallelism": pods_count,
                 "suspend": True, "backoffLimit": 0,
                 "template": {"metadata": {"annotations": {
                     "kueue.x-k8s.io/podset-required-topology": RACK}},
                     "spec": pod_spec(template, cpu=cpu)}}})


TAS_POD_CPU = "10"  # three pods fit a node of 32 CPUs


def tas_setup(b: RealBackend, with_draco: bool) -> list[str]:
    """GPUs in rack-b only (four on each node). Rack-b's CPUs are partly someone else's:
    4 on each node for good (rack-b then fits two of the Job's pods a node, rack-a three,
    so TAS's best fit is rack-b) and 20 more each for a while (rack-b fits none). The
    names of the pods that finish."""
    gpu_class(b)
    for node in ("node-2", "node-3"):
        gpus(b, node, 4)
    busy = []
    for node in ("node-2", "node-3"):
        cpu_pod(b, f"steady-{node}", node, "4")
        cpu_pod(b, f"batch-{node}", node, "20")
        busy.append(f"batch-{node}")
    wait(lambda: all((pod(b, f"{kind}-{node}").get("status") or {}).get("phase") == "Running"
                     for kind in ("steady", "batch") for node in ("node-2", "node-3")), 120,
         "the other pods on rack-b running")
    topology(b, f"racks-{b.id}")
    flavor(b, f"tas-{b.id}", node_labels={"type": "kwok"}, topology=f"racks-{b.id}")  # every node
    cluster_queue(b, f"cq-{b.id}", f"tas-{b.id}", {"cpu": "128", GPU_RESOURCE: "16"})
    if with_draco:
        admission_check(b, f"devices-{b.id}")
        with_check(b, f"cq-{b.id}", f"devices-{b.id}")
    local_queue(b, "lq", f"cq-{b.id}")
    claim_template(b, "two-gpus", 2)
    return busy


def tas_nodes(wl: dict[str, Any] | None) -> set[str]:
    """The nodes of the Workload's TAS assignment."""
    out: set[str] = set()
    for psa in ((wl or {}).get("status") or {}).get("admission", {}).get("podSetAssignments") or []:
        ta = psa.get("topologyAssignment") or {}
        for slice_ in ta.get("slices") or []:
            values = ((slice_.get("valuesPerLevel") or [{}])[-1] or {})
            out |= set(values.get("universal") and [values["universal"]] or
                       [(values.get("individual") or {}).get("prefix", "") + r +
                        (values.get("individual") or {}).get("suffix", "")
                        for r in (values.get("individual") or {}).get("roots") or []])
        for dom in ta.get("domains") or []:
            out.add(dom["values"][-1])
    return out


def test_kueue_topology_alone_puts_the_job_in_the_rack_without_devices(
        checks: RealBackend, stack_operator: Any, seen: Seen) -> None:
    b = checks
    started = time.monotonic()
    tas_setup(b, with_draco=False)
    stack_operator(("allocator", "narrowing"), SETTINGS)
    wait(lambda: queue_active(b, f"cq-{b.id}"), 60, "the ClusterQueue to be active")
    indexed_job(b, "train", "lq", "two-gpus", 4, TAS_POD_CPU)
    wait(lambda: admitted(workload_of(b, "train")), 120, "Kueue to admit the Job")

    def assigned() -> dict[str, str]:
        out = {p["metadata"]["name"]: p["spec"].get("nodeSelector", {}).get("kubernetes.io/hostname", "")
               for p in pods(b, "job-name=train")}
        return out if len(out) == 4 and all(out.values()) else {}

    nodes = wait(assigned, 120, "Kueue's ungater to give each pod its node")
    assert {RACKS[n] for n in nodes.values()} == {"rack-a"}, nodes
    for name, node in nodes.items():  # TAS's nodes have the CPUs, not the devices
        cond = wait(lambda name=name: unserved(b, name), 120, f"draco to tell {name} it has no devices")
        assert f"kubernetes.io/hostname={node}" in cond["message"], cond
        assert allocation(b, pod(b, name)) is None and pod(b, name)["status"]["phase"] == "Pending"
    print(f"\nKueue alone (TAS): admitted into rack-a, its 4 pods Pending without devices "
          f"({time.monotonic() - started:.1f}s)")


def test_with_dracos_check_topology_is_retried_into_the_rack_with_devices(
        checks: RealBackend, stack_operator: Any, seen: Seen) -> None:
    b = checks
    started = time.monotonic()
    busy = tas_setup(b, with_draco=True)
    check = f"devices-{b.id}"
    with b.watching(f"{KUEUE}/namespaces/{b.ns}/workloads") as events:
        stack_operator(("allocator", "narrowing"), SETTINGS)
        wait(lambda: queue_active(b, f"cq-{b.id}"), 60, "the ClusterQueue with draco's check to be active")
        indexed_job(b, "train", "lq", "two-gpus", 4, TAS_POD_CPU)

        def retried() -> list[dict[str, Any]]:
            """Each Retry answer once (a watch shows one in several events)."""
            seen_at: dict[str, dict[str, Any]] = {}
            for e in list(events):
                state = check_state(e.get("object"), check)
                if state.get("state") == "Retry":
                    seen_at.setdefault(str(state.get("lastTransitionTime")), state)
            return list(seen_at.values())

        first = wait(retried, 120, "draco to answer Retry for TAS's rack-a")[0]
        assert "do not fit the nodes TAS assigned" in first["message"], first
        assert "fit elsewhere now" in first["message"], first
        assert not admitted(workload_of(b, "train"))
        finish(b, busy)  # rack-b's CPUs free up: TAS's next assignment is rack-b
        wait(lambda: admitted(workload_of(b, "train")), 180, "the Job admitted")
        assert {RACKS[n] for n in tas_nodes(workload_of(b, "train"))} == {"rack-b"}
        where = wait(lambda: seen.placed("job-name=train", 4), 120, "the Job's pods placed")
        assert {RACKS[n] for n, _ in where.values()} == {"rack-b"}
        retries = retried()
    print(f"\nwith draco's check (TAS): {len(retries)} Retry answers while TAS chose rack-a, admitted "
          f"into rack-b and ran ({time.monotonic() - started:.1f}s): {first['message']}")
