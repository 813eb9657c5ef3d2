"""The whole of draco's gate on a real 1.34 cluster: allocator, narrowing, kube-scheduler.

A pod created with draco's scheduling gate and a claim from a ResourceClaimTemplate: the
real resource-claim controller generates the claim, draco's allocator allocates it on
the only node with a free device (node-1, so the choice is visible) and reserves it,
the narrowing controller narrows the pod to that node and removes the gate, and the
real kube-scheduler binds the pod there — it must not allocate again, the claim being
allocated and reserved already — and kwok runs it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from operators.allocator.pod_claims import GATE
from operators.apiserver.testing import wait_for
from operators.cli.operator_thread import OperatorThread
from tests.e2e.backends import RealBackend
from tests.e2e.test_allocator_e2e import CLASS, allocated, device_class, resource_slice

pytestmark = pytest.mark.real

SETTINGS = SimpleNamespace(qps=200.0, burst=400, allocation_timeout=10.0, narrowing_timeout=300.0)
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


@pytest.fixture
def draco(real: RealBackend, monkeypatch: pytest.MonkeyPatch) -> Iterator[OperatorThread]:
    monkeypatch.setenv("KUBECONFIG", str(real.kubeconfig))
    op = OperatorThread(["allocator", "narrowing"], SETTINGS).start()
    try:
        yield op
    finally:
        op.stop()


def test_a_gated_pod_is_allocated_narrowed_ungated_and_bound_to_the_allocators_node(
        real: RealBackend, draco: OperatorThread, tmp_path: Path) -> None:
    device_class(real)
    resource_slice(real, "node-0")  # no devices there
    resource_slice(real, "node-1", "gpu-0")
    real.create(f"/apis/resource.k8s.io/v1/namespaces/{real.ns}/resourceclaimtemplates", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "one-gpu"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": CLASS}}]}}}})
    pods = f"/api/v1/namespaces/{real.ns}/pods"
    pod = real.create(pods, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "job"}, "spec": {
        "schedulingGates": [{"name": GATE}],
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
        "containers": [{"name": "c", "image": "registry.invalid/app",
                        "resources": {"claims": [{"name": "gpu"}]}}]}})
    uid = pod["metadata"]["uid"]

    def stored() -> dict[str, Any]:
        found = real.get(f"{pods}/job")
        assert found is not None
        return found

    running = wait_for(lambda: (lambda p: p if (p.get("status") or {}).get("phase") == "Running" else None)(
        stored()), 60, what="the pod to be bound and running")
    assert running["spec"]["nodeName"] == "node-1"
    assert not running["spec"].get("schedulingGates")
    assert running["spec"]["affinity"]["nodeAffinity"][REQUIRED] == {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]}
    name = running["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    claim = allocated(real, name)
    assert claim is not None
    assert [(r["driver"], r["device"]) for r in claim["status"]["allocation"]["devices"]["results"]] == [
        (real.driver, "gpu-0")]
    assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "job", "uid": uid}]
    # kube-scheduler's Scheduled Event is posted after the binding, by its own broadcaster
    reasons = wait_for(lambda: (lambda r: r if {"Allocated", "Narrowed", "Scheduled"} <= set(r) else None)(
        [e["reason"] for e in real.events() if e["involvedObject"].get("uid") == uid]), 30,
        what="the Allocated, Narrowed and Scheduled Events")
    assert reasons
    assert not [e for e in real.events() if e["involvedObject"].get("uid") == uid and e["type"] == "Warning"]
