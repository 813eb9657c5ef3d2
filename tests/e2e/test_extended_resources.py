"""Pods that got their device through an extended resource backed by DRA (KEP-5004), on
the real 1.36 and 1.37 control planes, where kube-scheduler makes their claim.

The pod asks for `<domain>/gpu: 1` in its container resources, a DeviceClass names that
extended resource, and the node does not advertise it: kube-scheduler allocates a device
for it in a claim of its own making, controlled by the pod and named in the pod's
`status.extendedResourceClaimStatus`. A NoExecute taint on that device must evict the
pod. Upstream's eviction controller in 1.36 reads only `spec.resourceClaims` and never
does (kubernetes/kubernetes#141290); 1.37's reads every claim of the pod. So in `auto`
draco evicts such a pod at once on 1.36, and leaves it to kube-controller-manager on
1.37 — each pod exactly once, by the API server's audit log.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from operators.apiserver.testing import wait_for
from operators.eviction.decisions import UPSTREAM
from tests.e2e.backends import RealBackend
from tests.e2e.test_upstream_taints import (
    KEY,
    SETTINGS,
    SLICES,
    audit_offset,
    by_kcm,
    make_slice,
    operator_136,  # noqa: F401  (fixtures)
    operator_137,  # noqa: F401
    pod_exists,
    settle,
    wait_ownership,
)

pytestmark = pytest.mark.real


def extended_pod(b: RealBackend) -> dict[str, Any]:
    """A pod asking for the test's extended resource; Running once kube-scheduler has
    made and allocated its claim and kwok runs it."""
    resource = f"{b.domain}/gpu"
    b.create("/apis/resource.k8s.io/v1/deviceclasses", {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": f"ext-{b.id}"},
        "spec": {"extendedResourceName": resource,
                 "selectors": [{"cel": {"expression": f'device.driver == "{b.driver}"'}}]}})
    pods = f"/api/v1/namespaces/{b.ns}/pods"
    b.create(pods, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "ext"}, "spec": {
        "containers": [{"name": "c", "image": "registry.invalid/app",
                        "resources": {"limits": {resource: "1"}, "requests": {resource: "1"}}}]}})

    def running() -> dict[str, Any] | None:
        pod = b.get(f"{pods}/ext")
        return pod if pod and (pod.get("status") or {}).get("phase") == "Running" else None

    pod = wait_for(running, 60, what="kube-scheduler to allocate the extended resource and kwok to run the pod")
    assert pod is not None
    name = pod["status"]["extendedResourceClaimStatus"]["resourceClaimName"]
    claim = b.get(f"/apis/resource.k8s.io/v1/namespaces/{b.ns}/resourceclaims/{name}")
    assert claim is not None
    assert claim["metadata"]["annotations"]["resource.kubernetes.io/extended-resource-claim"] == "true"
    assert [(r["driver"], r["device"]) for r in claim["status"]["allocation"]["devices"]["results"]] == [
        (b.driver, "d0")]
    assert not pod["spec"].get("resourceClaims")  # only the status leads to the claim
    return pod


def taint_d0(b: RealBackend) -> None:
    b.merge_patch(f"{SLICES}/{b.node}-{b.ns}", {"spec": {"devices": [
        {"name": "d0", "taints": [{"key": KEY, "effect": "NoExecute"}]}]}})


def test_136_draco_evicts_an_extended_resource_pod_for_a_slice_taint_at_once(
        real_136: RealBackend, operator_136: Any) -> None:  # noqa: F811
    b = real_136
    make_slice(b, ["d0"])
    extended_pod(b)
    op = operator_136(("eviction",), SETTINGS)
    wait_ownership(op, replace(UPSTREAM, extended_claims=False))
    since = audit_offset(b)
    taint_d0(b)
    # at once, not after upstream_grace (30 s), which would also do it but with a warning
    wait_for(lambda: not pod_exists(b, "ext"), 15, what="draco to evict the pod")
    removals = settle(b, since, ["ext"])
    assert [(r["pod"], by_kcm(r["agent"]), r["code"]) for r in removals] == [("ext", False, 200)], removals
    assert op.controllers["eviction"].evicted_total == 1


def test_137_leaves_an_extended_resource_pod_to_upstream(
        real_137: RealBackend, operator_137: Any) -> None:  # noqa: F811
    b = real_137
    make_slice(b, ["d0"])
    extended_pod(b)
    op = operator_137(("eviction",), SETTINGS)
    wait_ownership(op, UPSTREAM)
    since = audit_offset(b)
    taint_d0(b)
    removals = settle(b, since, ["ext"])
    assert [(r["pod"], by_kcm(r["agent"])) for r in removals] == [("ext", True)], removals
    assert op.controllers["eviction"].evicted_total == 0
