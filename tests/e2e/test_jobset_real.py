"""draco's gangs through a JobSet v0.10.1 on real 1.37: the pod template carries the gang.

A JobSet of two replicated Jobs of two pods each, whose pod template carries draco's
gang label and gate, is one gang of four: draco allocates all four members' GPUs inside
one rack (the gang's `nodeLabel` topology), ungates them together, and kube-scheduler
binds each where its devices are. When the JobSet restarts (a member failed; its
failure policy recreates every Job) the new pods, the same gang, are placed anew.

The racks: rack-a (node-0 with two GPUs, node-1 with four) cannot hold the gang's eight
GPUs, rack-b (node-2 and node-3, four each) can, so a gang spread over both racks
would be visible.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from operators.allocator.pod_claims import GATE
from tests.e2e.backends import ROOT, RealBackend
from tests.e2e.test_allocator_e2e import SETTINGS
from tests.e2e.workload_stack import (
    JOBSETS,
    RACKS,
    Seen,
    claim_template,
    gang,
    gates,
    gpu_class,
    gpus,
    pod_spec,
    pods,
    wait,
)

# the stack's cluster starts within the first test's time; waits are for conditions
pytestmark = [pytest.mark.real, pytest.mark.timeout(600)]

GANG_LABEL = "resource.draco.dev/gang"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
RESTART = "jobset.sigs.k8s.io/restart-attempt"
GPU_COUNTS = {"node-0": 2, "node-1": 4, "node-2": 4, "node-3": 4}


def jobset(b: RealBackend, name: str, gang_name: str, template: str, *, cpu: str | None = None,
           max_restarts: int = 0) -> None:
    pod = pod_spec(template, cpu=cpu)
    spec: dict[str, Any] = {"replicatedJobs": [{"name": "workers", "replicas": 2, "template": {"spec": {
        "parallelism": 2, "completions": 2, "backoffLimit": 0,
        "template": {"metadata": {"labels": {GANG_LABEL: gang_name}}, "spec": pod}}}}]}
    if max_restarts:
        spec["failurePolicy"] = {"maxRestarts": max_restarts}
    b.create(JOBSETS.format(ns=b.ns), {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                                       "metadata": {"name": name}, "spec": spec})


def one_rack(where: dict[str, tuple[str, list[str]]]) -> set[str]:
    return {RACKS[node] for node, _ in where.values()}


def setup(b: RealBackend) -> None:
    gpu_class(b)
    for node, count in GPU_COUNTS.items():
        gpus(b, node, count)
    claim_template(b, "two-gpus", 2)


def test_a_jobset_is_one_gang_placed_in_one_rack(stack_137: RealBackend, stack_operator: Any, seen: Seen) -> None:
    b = stack_137
    setup(b)
    gang(b, "train", 4, nodeLabel="example.com/rack")
    stack_operator(("allocator", "narrowing"), SETTINGS)
    jobset(b, "train", "train", "two-gpus")
    where = wait(lambda: seen.placed(f"{JOBSET_NAME}=train", 4), 180, "the JobSet's four pods placed")
    assert one_rack(where) == {"rack-b"}, where
    devices = sorted(d for _, ds in where.values() for d in ds)
    assert len(devices) == len(set(devices)) == 8
    for name in where:  # kube-scheduler binds each where its devices are
        wait(lambda name=name: seen.bound_where_allocated(name), 120, f"{name} bound where its devices are")


def test_a_restarted_jobset_is_placed_anew(stack_137: RealBackend, stack_operator: Any, seen: Seen) -> None:
    b = stack_137
    setup(b)
    gang(b, "train", 4, nodeLabel="example.com/rack")
    stack_operator(("allocator", "narrowing"), SETTINGS)
    # 40 CPUs a pod, 32 a node: kube-scheduler cannot bind them, so they stay Pending
    # (kwok would otherwise run and complete them at once) until the test fails one
    jobset(b, "train", "train", "two-gpus", cpu="40", max_restarts=1)
    first = wait(lambda: seen.placed(f"{JOBSET_NAME}=train,{RESTART}=0", 4), 180, "the first attempt placed")
    assert one_rack(first) == {"rack-b"}
    victim = sorted(first)[0]
    code, body = b.request("GET", f"/api/v1/namespaces/{b.ns}/pods/{victim}")
    assert code == 200, body
    body["status"]["phase"] = "Failed"  # as a crashed container would leave it
    code, body = b.request("PUT", f"/api/v1/namespaces/{b.ns}/pods/{victim}/status", body)
    assert code == 200, body
    again = wait(lambda: seen.placed(f"{JOBSET_NAME}=train,{RESTART}=1", 4), 240,
                 "the JobSet's restart placed as one gang")
    assert one_rack(again) == {"rack-b"}
    assert not set(again) & set(first), "new pods, not the old ones"
    status = (b.get(f"{JOBSETS.format(ns=b.ns)}/train") or {}).get("status") or {}
    assert status.get("restarts") == 1
    assert GATE not in {g for p in pods(b, f"{JOBSET_NAME}=train,{RESTART}=1") for g in gates(p)}


def test_the_docs_worked_example_is_accepted_by_real_kueue_and_jobset(stack_137: RealBackend) -> None:
    """examples/workload-stack.yaml (docs/workload-stack.md) as the real servers judge it:
    every object passes Kueue's and JobSet's webhooks and the CRDs' schemas (a server
    dry-run, in this test's namespace: nothing is created)."""
    docs = [d for d in yaml.safe_load_all((ROOT / "examples" / "workload-stack.yaml").read_text()) if d]
    kept = []
    for doc in docs:
        if doc["kind"] == "Namespace":
            continue
        if doc["metadata"].get("namespace"):
            doc["metadata"]["namespace"] = stack_137.ns
        kept.append(doc)
    assert {d["kind"] for d in kept} == {"Topology", "ResourceFlavor", "ClusterQueue", "LocalQueue", "Gang",
                                         "ResourceClaimTemplate", "JobSet"}
    proc = stack_137.kubectl("apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump_all(kept), check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("(server dry run)") == len(kept), proc.stdout
