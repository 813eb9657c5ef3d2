"""The allocator controller end to end, on the embedded server and on a real kube-apiserver.

The same flows and assertions on both: a gated pod's claim is allocated on node-0's
device and reserved for the pod, with the delete-protection finalizer; two pods
competing for the last device, exactly one gets it and the other is told why; a pod
that cannot be served gets the Event and the DracoAllocation condition and is served
once a ResourceSlice brings a device; a claim generated from a ResourceClaimTemplate
is found through the pod's status and allocated; a pod whose only device-bearing node
carries a NoSchedule taint it does not tolerate gets no device there (the condition
names the taint) until the taint goes, or at once when it tolerates the taint.

Where the servers differ (tested, not hidden): the embedded server runs no
kube-controller-manager, so it generates no claims from templates (the test writes
what the resource-claim controller would: the claim owned by the pod, and the pod's
`status.resourceClaimStatuses`), and nothing deallocates a claim whose pod was
deleted; on the real 1.34 cluster the resource-claim controller drops the deleted
pod's reservation and then the allocation and the finalizer.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from operators.allocator.pod_claims import GATE
from operators.allocator_controller.claim_writer import FINALIZER
from operators.apiserver.testing import wait_for
from tests.e2e.backends import Backend

SETTINGS = SimpleNamespace(qps=200.0, burst=400, allocation_timeout=10.0, narrowing_timeout=300.0)
CLASS = "alloc-gpu"


def claims_path(b: Backend) -> str:
    return f"/apis/resource.k8s.io/v1/namespaces/{b.ns}/resourceclaims"


def pods_path(b: Backend) -> str:
    return f"/api/v1/namespaces/{b.ns}/pods"


def device_class(b: Backend) -> None:
    b.create("/apis/resource.k8s.io/v1/deviceclasses", {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": CLASS},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{b.driver}"'}}]}})


def resource_slice(b: Backend, node: str, *devices: str) -> None:
    b.create("/apis/resource.k8s.io/v1/resourceslices", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": f"{b.ns}-{node}"},
        "spec": {"driver": b.driver, "nodeName": node,
                 "pool": {"name": f"{b.ns}-{node}", "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": d} for d in devices]}})


def claim_body(name: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": CLASS}}]}}}


def gated_pod(b: Backend, name: str, claim: str | None = None, template: str | None = None,
              tolerations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    ref: dict[str, Any] = {"name": "gpu"}
    if template:
        ref["resourceClaimTemplateName"] = template
    else:
        ref["resourceClaimName"] = claim
    spec: dict[str, Any] = {
        "schedulingGates": [{"name": GATE}], "resourceClaims": [ref],
        "containers": [{"name": "c", "image": "registry.invalid/app",
                        "resources": {"claims": [{"name": "gpu"}]}}]}
    if tolerations:
        spec["tolerations"] = tolerations
    return b.create(pods_path(b), {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})


def stored_claim(b: Backend, name: str) -> dict[str, Any]:
    claim = b.get(f"{claims_path(b)}/{name}")
    assert claim is not None
    return claim


def allocated(b: Backend, name: str) -> dict[str, Any] | None:
    claim = b.get(f"{claims_path(b)}/{name}")
    return claim if claim and (claim.get("status") or {}).get("allocation") else None


def condition(b: Backend, pod: str, status: str | None = None) -> dict[str, Any] | None:
    stored = b.get(f"{pods_path(b)}/{pod}") or {}
    return next((c for c in (stored.get("status") or {}).get("conditions") or []
                 if c["type"] == "DracoAllocation" and status in (None, c["status"])), None)


def warnings_about(b: Backend, uid: str) -> list[str]:
    return [e["reason"] for e in b.events() if e["involvedObject"].get("uid") == uid and e["type"] == "Warning"]


def test_a_gated_pods_claim_is_allocated_and_reserved(backend: Backend, operator: Any) -> None:
    device_class(backend)
    resource_slice(backend, "node-0", "d0")
    backend.create(claims_path(backend), claim_body("a-gpu"))
    pod = gated_pod(backend, "a", "a-gpu")
    operator(("allocator",), SETTINGS)
    claim = wait_for(lambda: allocated(backend, "a-gpu"), 30, what="the claim to be allocated")
    assert claim["metadata"]["finalizers"] == [FINALIZER]
    results = claim["status"]["allocation"]["devices"]["results"]
    assert [(r["request"], r["driver"], r["pool"], r["device"]) for r in results] == [
        ("gpu", backend.driver, f"{backend.ns}-node-0", "d0")]
    assert claim["status"]["allocation"]["nodeSelector"] == {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["node-0"]}]}]}
    assert claim["status"]["reservedFor"] == [
        {"resource": "pods", "name": "a", "uid": pod["metadata"]["uid"]}]
    still = backend.get(f"{pods_path(backend)}/a") or {}
    assert [g["name"] for g in still["spec"]["schedulingGates"]] == [GATE]  # narrowing's job
    assert warnings_about(backend, pod["metadata"]["uid"]) == []


def test_two_pods_competing_for_the_last_device_exactly_one_gets_it(backend: Backend, operator: Any) -> None:
    device_class(backend)
    resource_slice(backend, "node-0", "last")
    for name in ("p", "q"):
        backend.create(claims_path(backend), claim_body(f"{name}-gpu"))
        gated_pod(backend, name, f"{name}-gpu")
    operator(("allocator",), SETTINGS)
    winner = wait_for(lambda: next((n for n in ("p", "q") if allocated(backend, f"{n}-gpu")), None), 30,
                      what="one claim to be allocated")
    loser = "q" if winner == "p" else "p"
    cond = wait_for(lambda: condition(backend, loser, "False"), 30, what="the loser's condition")
    assert cond["reason"] == "Unschedulable"
    assert "in use" in cond["message"]
    assert allocated(backend, f"{loser}-gpu") is None


def test_an_unsatisfiable_pod_is_reported_and_served_once_a_device_appears(
        backend: Backend, operator: Any) -> None:
    device_class(backend)
    backend.create(claims_path(backend), claim_body("w-gpu"))
    pod = gated_pod(backend, "w", "w-gpu")
    uid = pod["metadata"]["uid"]
    operator(("allocator",), SETTINGS)
    wait_for(lambda: "Unschedulable" in warnings_about(backend, uid), 30, what="the Unschedulable Event")
    cond = wait_for(lambda: condition(backend, "w", "False"), 10, what="the DracoAllocation condition")
    assert cond["reason"] == "Unschedulable"
    assert "request gpu: 0 available, 1 needed" in cond["message"]
    resource_slice(backend, "node-0", "fresh")
    claim = wait_for(lambda: allocated(backend, "w-gpu"), 30, what="allocation once the device appears")
    assert claim["status"]["allocation"]["devices"]["results"][0]["device"] == "fresh"
    cleared = wait_for(lambda: condition(backend, "w", "True"), 30, what="the condition to turn True")
    assert cleared["reason"] == "Allocated"
    assert warnings_about(backend, uid) == ["Unschedulable"]  # one Event, not one per retry


def test_a_claim_generated_from_a_template_is_found_and_allocated(backend: Backend, operator: Any) -> None:
    device_class(backend)
    resource_slice(backend, "node-0", "d0")
    backend.create(f"/apis/resource.k8s.io/v1/namespaces/{backend.ns}/resourceclaimtemplates", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "tpl"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": CLASS}}]}}}})
    operator(("allocator",), SETTINGS)
    pod = gated_pod(backend, "t", template="tpl")
    uid = pod["metadata"]["uid"]
    if backend.name == "embedded":  # no resource-claim controller: do what it does
        generated = claim_body("t-gpu-x1")
        generated["metadata"]["ownerReferences"] = [{
            "apiVersion": "v1", "kind": "Pod", "name": "t", "uid": uid, "controller": True,
            "blockOwnerDeletion": True}]
        backend.create(claims_path(backend), generated)
        code, body = backend.request("PATCH", f"{pods_path(backend)}/t/status", {"status": {
            "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "t-gpu-x1"}]}},
            "application/merge-patch+json")
        assert code == 200, body
    name = wait_for(lambda: ((((backend.get(f"{pods_path(backend)}/t") or {}).get("status") or {})
                              .get("resourceClaimStatuses") or [{}])[0].get("resourceClaimName")),
                    30, what="the generated claim's name in the pod status")
    claim = wait_for(lambda: allocated(backend, name), 30, what="the generated claim to be allocated")
    assert claim["metadata"]["ownerReferences"][0]["uid"] == uid
    assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "t", "uid": uid}]


def test_a_pod_deleted_before_ungating_leaves_its_claim_to_the_resource_claim_controller(
        backend: Backend, operator: Any) -> None:
    device_class(backend)
    resource_slice(backend, "node-0", "d0")
    backend.create(claims_path(backend), claim_body("gone-gpu"))
    gated_pod(backend, "gone", "gone-gpu")
    operator(("allocator",), SETTINGS)
    wait_for(lambda: allocated(backend, "gone-gpu"), 30, what="the claim to be allocated")
    code, body = backend.request("DELETE", f"{pods_path(backend)}/gone?gracePeriodSeconds=0")
    assert code == 200, body
    wait_for(lambda: backend.get(f"{pods_path(backend)}/gone") is None, 30, what="the pod to be gone")
    if backend.name == "real":  # kube-controller-manager 1.34 releases and deallocates it
        freed = wait_for(lambda: (lambda c: c if not (c.get("status") or {}).get("allocation") else None)(
            stored_claim(backend, "gone-gpu")), 30, what="the resource-claim controller to deallocate")
        assert not (freed.get("status") or {}).get("reservedFor")
        assert FINALIZER not in (freed["metadata"].get("finalizers") or [])
    else:  # nobody to do it: the claim keeps what draco wrote
        kept = stored_claim(backend, "gone-gpu")
        assert kept["status"]["allocation"]["devices"]["results"][0]["device"] == "d0"
        assert [r["name"] for r in kept["status"]["reservedFor"]] == ["gone"]


MAINT = {"key": "node.example.com/maint", "value": "x", "effect": "NoSchedule"}


def set_taints(b: Backend, node: str, taints: list[dict[str, Any]] | None) -> None:
    b.merge_patch(f"/api/v1/nodes/{node}", {"spec": {"taints": taints}})


def test_no_device_on_a_node_whose_taint_the_pod_does_not_tolerate_until_the_taint_goes(
        backend: Backend, operator: Any) -> None:
    """kube-scheduler's TaintToleration filter would never let the pod onto node-0, so
    draco does not allocate its devices there: allocating would leave the pod gated for
    good. Removing the taint (a Node update, nothing else) serves the pod."""
    set_taints(backend, "node-0", [MAINT])
    try:
        device_class(backend)
        resource_slice(backend, "node-0", "d0")
        backend.create(claims_path(backend), claim_body("m-gpu"))
        pod = gated_pod(backend, "m", "m-gpu")
        uid = pod["metadata"]["uid"]
        operator(("allocator",), SETTINGS)
        wait_for(lambda: "Unschedulable" in warnings_about(backend, uid), 30, what="the Unschedulable Event")
        cond = wait_for(lambda: condition(backend, "m", "False"), 10, what="the DracoAllocation condition")
        assert cond["reason"] == "Unschedulable"
        assert ("1 has a taint the pod does not tolerate (node.example.com/maint=x:NoSchedule on node-0)"
                in cond["message"]), cond["message"]
        assert allocated(backend, "m-gpu") is None
        set_taints(backend, "node-0", None)
        claim = wait_for(lambda: allocated(backend, "m-gpu"), 30, what="allocation once the taint is gone")
        assert claim["status"]["allocation"]["devices"]["results"][0]["device"] == "d0"
        assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "m", "uid": uid}]
        cleared = wait_for(lambda: condition(backend, "m", "True"), 30, what="the condition to turn True")
        assert cleared["reason"] == "Allocated"
    finally:
        set_taints(backend, "node-0", None)


def test_a_pod_tolerating_the_taint_gets_the_device_on_the_tainted_node(
        backend: Backend, operator: Any) -> None:
    set_taints(backend, "node-0", [MAINT])
    try:
        device_class(backend)
        resource_slice(backend, "node-0", "d0")
        backend.create(claims_path(backend), claim_body("tol-gpu"))
        pod = gated_pod(backend, "tol", "tol-gpu", tolerations=[
            {"key": "node.example.com/maint", "operator": "Exists", "effect": "NoSchedule"}])
        operator(("allocator",), SETTINGS)
        claim = wait_for(lambda: allocated(backend, "tol-gpu"), 30, what="the claim to be allocated")
        assert claim["status"]["allocation"]["devices"]["results"][0]["device"] == "d0"
        assert warnings_about(backend, pod["metadata"]["uid"]) == []
    finally:
        set_taints(backend, "node-0", None)
