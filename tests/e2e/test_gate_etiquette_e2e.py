"""Gates wait their turn and nominations speak kube-scheduler's words, end to end.

A pod carrying another controller's gate (Kueue's `kueue.x-k8s.io/admission`) beside
draco's gets no device and is told `WaitingForGate`; once that controller removes its gate
the pod is allocated, narrowed and ungated. A preemptor's nominated node is in its
`status.nominatedNodeName` (written through pods/status) while the nomination stands and
is cleared when it ends. The same assertions on the embedded server and a real cluster
(where the victims' claims are released by kube-controller-manager, so the nomination may
end within a poll: the standing node is read only where the test releases them).
"""

from __future__ import annotations

import time
from typing import Any

from operators.allocator.pod_claims import GATE
from operators.apiserver.testing import wait_for
from tests.e2e.backends import Backend
from tests.e2e.test_allocator_e2e import (
    SETTINGS,
    allocated,
    claim_body,
    claims_path,
    condition,
    device_class,
    pods_path,
    resource_slice,
    warnings_about,
)
from tests.e2e.test_gangs_real import device_class as gang_device_class
from tests.e2e.test_gangs_real import node_slice
from tests.e2e.test_preemption_real import (
    PREEMPTING,
    devices,
    gated,
    gpu_pod,
    release_orphaned_claims,
)

ADMISSION = "kueue.x-k8s.io/admission"


def _pod(b: Backend, name: str, claim: str, gates: list[str]) -> dict[str, Any]:
    return b.create(pods_path(b), {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {
        "schedulingGates": [{"name": g} for g in gates],
        "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
        "containers": [{"name": "c", "image": "registry.invalid/app",
                        "resources": {"claims": [{"name": "gpu"}]}}],
        "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}]}})


def _gates(b: Backend, name: str) -> list[str]:
    found = b.get(f"{pods_path(b)}/{name}") or {}
    return [g["name"] for g in found.get("spec", {}).get("schedulingGates") or []]


def test_a_pod_behind_another_gate_waits_then_is_served(backend: Backend, operator: Any) -> None:
    b = backend
    device_class(b)
    resource_slice(b, "node-0", "d0")
    b.create(claims_path(b), claim_body("q-gpu"))
    pod = _pod(b, "q", "q-gpu", [ADMISSION, GATE])
    operator(("allocator", "narrowing"), SETTINGS)
    cond = wait_for(lambda: condition(b, "q", "False"), 30, what="the DracoAllocation condition")
    assert cond["reason"] == "WaitingForGate" and f"waiting for gate {ADMISSION}" in cond["message"]
    time.sleep(1.0)  # a pass or two later: still nothing
    assert allocated(b, "q-gpu") is None
    assert _gates(b, "q") == [ADMISSION, GATE]
    assert warnings_about(b, pod["metadata"]["uid"]) == []
    b.merge_patch(f"{pods_path(b)}/q", {"spec": {"schedulingGates": [{"name": GATE}]}})  # admitted
    wait_for(lambda: allocated(b, "q-gpu"), 30, what="the claim to be allocated")
    wait_for(lambda: _gates(b, "q") == [], 30, what="draco's gate to be removed")
    narrowed = b.get(f"{pods_path(b)}/q") or {}
    assert narrowed["spec"]["affinity"]["nodeAffinity"]
    wait_for(lambda: condition(b, "q", "True"), 30, what="the condition to turn True")


def _nominated_node(b: Backend, pod: str) -> str | None:
    found = b.get(f"{pods_path(b)}/{pod}") or {}
    value: str | None = (found.get("status") or {}).get("nominatedNodeName")
    return value


def test_the_preemptor_carries_and_then_drops_its_nominated_node(backend: Backend, operator: Any) -> None:
    b = backend
    cls = gang_device_class(b)
    node_slice(b, "node-0", [{"name": "gpu-0"}])
    operator(("allocator", "narrowing"), PREEMPTING)
    gpu_pod(b, "low", cls, 10)
    wait_for(lambda: devices(b, "low") and not gated(b, "low"), timeout=60)
    gpu_pod(b, "vip", cls, 1000)
    if b.name == "embedded":  # nothing releases the victim's claim until the test does
        assert wait_for(lambda: _nominated_node(b, "vip"), 60, what="nominatedNodeName") == "node-0"
        wait_for(lambda: b.get(f"{pods_path(b)}/low") is None, timeout=60)
        release_orphaned_claims(b)
    wait_for(lambda: devices(b, "vip") == ["gpu-0"], timeout=90)
    # draco clears it when the nomination ends (at the allocation, before the ungating;
    # kube-scheduler then binds a pod that fits and nominates nothing)
    wait_for(lambda: _nominated_node(b, "vip") is None, timeout=30,
             what="the nominated node to be cleared with the nomination")
