"""The narrowing controller end to end, on the embedded server and on a real kube-apiserver.

The same flows and assertions on both: a gated pod whose claim is allocated (node-0) and
reserved for it is narrowed and ungated in one update (on the real cluster kube-scheduler
then binds it to node-0); another controller's gate stays; a pod whose own affinity
excludes the allocation's node, a pod whose claim is never allocated, and a pod whose
allocated node has a taint it does not tolerate (until the taint goes) get a Warning
Event and the DracoNarrowing condition and keep draco's gate. The embedded server has no
scheduler, so binding is checked on the real cluster only.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from operators.apiserver.testing import wait_for
from operators.narrowing import DRACO_GATE
from tests.e2e.backends import Backend

SETTINGS = SimpleNamespace(qps=200.0, burst=400, narrowing_timeout=300.0)
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PIN_NODE_0 = {"nodeSelectorTerms": [{"matchFields": [
    {"key": "metadata.name", "operator": "In", "values": ["node-0"]}]}]}


def claims_path(b: Backend) -> str:
    return f"/apis/resource.k8s.io/v1/namespaces/{b.ns}/resourceclaims"


def pods_path(b: Backend) -> str:
    return f"/api/v1/namespaces/{b.ns}/pods"


def make_gated_pod(b: Backend, name: str, *, gates: tuple[str, ...] = (DRACO_GATE,),
                   affinity: dict[str, Any] | None = None) -> dict[str, Any]:
    b.create(claims_path(b), {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": f"{name}-claim"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}})
    spec: dict[str, Any] = {
        "schedulingGates": [{"name": g} for g in gates],
        "resourceClaims": [{"name": "gpu", "resourceClaimName": f"{name}-claim"}],
        "containers": [{"name": "c", "image": "registry.invalid/app"}]}
    if affinity is not None:
        spec["affinity"] = affinity
    return b.create(pods_path(b), {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                                   "spec": spec})


def allocate(b: Backend, pod: dict[str, Any], device: str = "d0") -> None:
    """What an allocator writes: the allocation on node-0's devices, reserved for the pod."""
    name = pod["metadata"]["name"]
    b.merge_patch(f"{claims_path(b)}/{name}-claim/status", {"status": {
        "allocation": {"devices": {"results": [
            {"request": "gpu", "driver": b.driver, "pool": "node-0", "device": device}]},
            "nodeSelector": PIN_NODE_0},
        "reservedFor": [{"resource": "pods", "name": name, "uid": pod["metadata"]["uid"]}]}})


def stored(b: Backend, name: str) -> dict[str, Any]:
    pod = b.get(f"{pods_path(b)}/{name}")
    assert pod is not None
    return pod


def gates(pod: dict[str, Any]) -> list[str]:
    return [g["name"] for g in pod["spec"].get("schedulingGates") or []]


def without_draco_gate(b: Backend, name: str) -> dict[str, Any] | None:
    pod = stored(b, name)
    return None if DRACO_GATE in gates(pod) else pod


def condition(pod: dict[str, Any], status: str | None = None) -> dict[str, Any] | None:
    return next((c for c in (pod.get("status") or {}).get("conditions") or []
                 if c["type"] == "DracoNarrowing" and status in (None, c["status"])), None)


def warnings_about(b: Backend, uid: str) -> list[str]:
    return [e["reason"] for e in b.events() if e["involvedObject"].get("uid") == uid and e["type"] == "Warning"]


def test_a_gated_pod_is_narrowed_ungated_and_bound_to_the_allocated_node(backend: Backend, operator: Any) -> None:
    operator(("narrowing",), SETTINGS)
    pod = make_gated_pod(backend, "a")
    allocate(backend, pod)
    ungated = wait_for(lambda: without_draco_gate(backend, "a"), 30, what="draco's gate to be removed")
    assert ungated["spec"]["affinity"]["nodeAffinity"][REQUIRED] == PIN_NODE_0
    assert condition(ungated) is None
    assert warnings_about(backend, pod["metadata"]["uid"]) == []
    if backend.name == "real":  # kube-scheduler binds it where its device is
        bound = wait_for(lambda: stored(backend, "a")["spec"].get("nodeName"), 30,
                         what="kube-scheduler to bind the pod")
        assert bound == "node-0"


def test_another_controllers_gate_stays(backend: Backend, operator: Any) -> None:
    """With draco allowed beside the other gate (`--act-beside-gates`), only draco's goes."""
    operator(("narrowing",), SimpleNamespace(**{**vars(SETTINGS), "act_beside_gates": "example.com/quota"}))
    pod = make_gated_pod(backend, "b", gates=("example.com/quota", DRACO_GATE))
    allocate(backend, pod)
    narrowed = wait_for(lambda: without_draco_gate(backend, "b"), 30, what="draco's gate to be removed")
    assert gates(narrowed) == ["example.com/quota"]
    assert narrowed["spec"]["affinity"]["nodeAffinity"][REQUIRED] == PIN_NODE_0
    assert not narrowed["spec"].get("nodeName")  # still gated: nobody may bind it


def test_an_impossible_narrowing_is_reported_and_keeps_the_gate(backend: Backend, operator: Any) -> None:
    operator(("narrowing",), SETTINGS)
    excludes_node_0 = {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "NotIn", "values": ["node-0"]}]}]}}}
    pod = make_gated_pod(backend, "c", affinity=excludes_node_0)
    allocate(backend, pod)
    uid = pod["metadata"]["uid"]
    wait_for(lambda: "NoCommonNodes" in warnings_about(backend, uid), 30, what="the NoCommonNodes Event")
    cond = wait_for(lambda: condition(stored(backend, "c")), 10, what="the DracoNarrowing condition")
    assert (cond["status"], cond["reason"]) == ("False", "NoCommonNodes")
    after = stored(backend, "c")
    assert gates(after) == [DRACO_GATE]
    assert after["spec"]["affinity"] == excludes_node_0
    assert not after["spec"].get("nodeName")


def test_claims_unallocated_past_the_timeout_are_reported(backend: Backend, operator: Any) -> None:
    operator(("narrowing",), SimpleNamespace(**{**vars(SETTINGS), "narrowing_timeout": 1.0}))
    pod = make_gated_pod(backend, "d")
    uid = pod["metadata"]["uid"]
    wait_for(lambda: "ClaimsNotAllocated" in warnings_about(backend, uid), 30,
             what="the ClaimsNotAllocated Event")
    cond = wait_for(lambda: condition(stored(backend, "d")), 10, what="the DracoNarrowing condition")
    assert (cond["status"], cond["reason"]) == ("False", "ClaimsNotAllocated")
    assert "claim d-claim is not allocated" in cond["message"]
    assert gates(stored(backend, "d")) == [DRACO_GATE]
    allocate(backend, pod)  # late, but it comes: narrowed, and the condition says so
    cleared = wait_for(lambda: condition(stored(backend, "d"), "True"), 30, what="the condition to turn True")
    assert cleared["reason"] == "Narrowed"
    assert gates(stored(backend, "d")) == []


def set_taints(b: Backend, node: str, taints: list[dict[str, Any]] | None) -> None:
    b.merge_patch(f"/api/v1/nodes/{node}", {"spec": {"taints": taints}})


def test_a_pod_whose_node_refuses_it_stays_gated_until_the_taint_goes(backend: Backend,
                                                                      operator: Any) -> None:
    """The allocation pins node-0, which carries a NoSchedule taint the pod does not
    tolerate: kube-scheduler could never bind it, so draco keeps the gate and says why;
    the Node update that removes the taint releases it."""
    set_taints(backend, "node-0", [{"key": "example.com/maintenance", "value": "true",
                                    "effect": "NoSchedule"}])
    try:
        pod = make_gated_pod(backend, "t")
        allocate(backend, pod)
        uid = pod["metadata"]["uid"]
        operator(("narrowing",), SETTINGS)
        wait_for(lambda: "UntoleratedNodeTaint" in warnings_about(backend, uid), 30,
                 what="the UntoleratedNodeTaint Event")
        cond = wait_for(lambda: condition(stored(backend, "t")), 10, what="the DracoNarrowing condition")
        assert (cond["status"], cond["reason"]) == ("False", "UntoleratedNodeTaint")
        assert "example.com/maintenance=true:NoSchedule" in cond["message"]
        assert "node-0" in cond["message"]
        held = stored(backend, "t")
        assert gates(held) == [DRACO_GATE]
        assert not held["spec"].get("affinity")  # nothing narrowed either
        set_taints(backend, "node-0", None)
        ungated = wait_for(lambda: without_draco_gate(backend, "t"), 30, what="draco's gate to be removed")
        assert ungated["spec"]["affinity"]["nodeAffinity"][REQUIRED] == PIN_NODE_0
        cleared = wait_for(lambda: condition(stored(backend, "t"), "True"), 30,
                           what="the condition to turn True")
        assert cleared["reason"] == "Narrowed"
        if backend.name == "real":
            bound = wait_for(lambda: stored(backend, "t")["spec"].get("nodeName"), 30,
                             what="kube-scheduler to bind the pod")
            assert bound == "node-0"
    finally:
        set_taints(backend, "node-0", None)


def test_a_tolerated_node_taint_does_not_hold_the_pod(backend: Backend, operator: Any) -> None:
    set_taints(backend, "node-0", [{"key": "example.com/gpu-only", "effect": "NoSchedule"}])
    try:
        operator(("narrowing",), SETTINGS)
        b = backend
        b.create(claims_path(b), {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "u-claim"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}})
        pod = b.create(pods_path(b), {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "u"}, "spec": {
            "schedulingGates": [{"name": DRACO_GATE}],
            "tolerations": [{"key": "example.com/gpu-only", "operator": "Exists", "effect": "NoSchedule"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "u-claim"}],
            "containers": [{"name": "c", "image": "registry.invalid/app"}]}})
        allocate(b, pod)
        wait_for(lambda: without_draco_gate(b, "u"), 30, what="draco's gate to be removed")
        assert warnings_about(b, pod["metadata"]["uid"]) == []
    finally:
        set_taints(backend, "node-0", None)


def test_a_cordoned_node_holds_the_pod_until_uncordoned(backend: Backend, operator: Any) -> None:
    """`kubectl cordon` sets spec.unschedulable (on the real cluster the node lifecycle
    controller adds the node.kubernetes.io/unschedulable taint too): same verdict."""
    backend.merge_patch("/api/v1/nodes/node-0", {"spec": {"unschedulable": True}})
    try:
        operator(("narrowing",), SETTINGS)
        pod = make_gated_pod(backend, "k")
        allocate(backend, pod)
        uid = pod["metadata"]["uid"]
        wait_for(lambda: "NodeUnschedulable" in warnings_about(backend, uid), 30,
                 what="the NodeUnschedulable Event")
        cond = wait_for(lambda: condition(stored(backend, "k")), 10, what="the DracoNarrowing condition")
        assert (cond["status"], cond["reason"]) == ("False", "NodeUnschedulable")
        assert "node node-0 is cordoned" in cond["message"]
        assert gates(stored(backend, "k")) == [DRACO_GATE]
        backend.merge_patch("/api/v1/nodes/node-0", {"spec": {"unschedulable": None}})
        wait_for(lambda: without_draco_gate(backend, "k"), 30, what="draco's gate to be removed")
    finally:
        backend.merge_patch("/api/v1/nodes/node-0", {"spec": {"unschedulable": None}})
