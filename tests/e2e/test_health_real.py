"""DeviceHealthPolicy on the real control planes, with the signal each one can carry.

- 1.34 drops ResourceSlice taints on write, so a health monitor that is not the driver
  reports through a ResourceSlicePatch attribute and the policy's CEL `device` signal.
- 1.36 and later keep slice taints (NVIDIA's driver's `gpu.nvidia.com/xid`), and the
  kubelet's per-device health in pod status (written here as a kubelet would): run on
  1.37 (every CI run) and on 1.36 (on request: `pytest -m release_136`).

Each: signal -> the policy's rule -> the pod on the device evicted (draco's eviction
controller; kube-controller-manager on 1.36+ evicts for the slice's own taint only when
it is NoExecute, and the driver's is NoSchedule) -> signal gone -> rule deleted after
`clearAfter`; a replacement claim gets the healthy device while the rule holds, and the
recovered one once it is gone. The policies, rules, classes and patches name the test's
own driver.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

from operators.apiserver.testing import wait_for
from operators.eviction.decisions import DRACO_ALONE, UPSTREAM, Ownership
from operators.health.decisions import rule_name
from operators.model import DeviceID
from tests.e2e.backends import RealBackend
from tests.e2e.test_upstream_taints import (  # noqa: F401  (operator_134: a fixture)
    SLICES,
    make_pod,
    make_slice,
    operator_134,
    pod_exists,
    wait_ownership,
)
from tests.operator_threads import operator_threads

pytestmark = pytest.mark.real

POLICIES = "/apis/resource.draco.dev/v1alpha1/devicehealthpolicies"
RULES = "/apis/resource.draco.dev/v1alpha1/devicetaintrules"
PATCHES = "/apis/resource.draco.dev/v1alpha1/resourceslicepatches"
SETTINGS = SimpleNamespace(qps=200.0, burst=400, eviction_workers=10, grace_period=1.0,
                           use_eviction_api=False, status_interval=0.2, slice_taints="auto",
                           health_debounce=0.05, allocation_timeout=10.0, narrowing_timeout=300.0)
FLOW = ("health", "eviction", "allocator")
# who evicts what on each release with slice taints: kube-controller-manager for the
# slices' own NoExecute taints, draco for its rules (and, before 1.37, for pods whose
# devices came through extended resources)
OWNERSHIP = {"real_137": UPSTREAM, "real_136": replace(UPSTREAM, extended_claims=False)}


@pytest.fixture(params=list(OWNERSHIP))
def taints_cluster(request: pytest.FixtureRequest) -> RealBackend:
    """A namespace of a release that keeps slice taints (1.36's tests carry `release_136`)."""
    backend: RealBackend = request.getfixturevalue(request.param)
    return backend


@pytest.fixture
def ownership(taints_cluster: RealBackend, request: pytest.FixtureRequest) -> Ownership:
    """Who evicts what on the test's release."""
    return OWNERSHIP[request.node.callspec.params["taints_cluster"]]


@pytest.fixture
def draco(taints_cluster: RealBackend, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    yield from operator_threads(taints_cluster.kubeconfig, monkeypatch)


def make_policy(b: RealBackend, name: str, signals: list[dict[str, Any]]) -> None:
    b.create(POLICIES, {
        "apiVersion": "resource.draco.dev/v1alpha1", "kind": "DeviceHealthPolicy", "metadata": {"name": name},
        "spec": {"deviceSelector": {"driver": b.driver}, "signals": signals,
                 "taint": {"key": "health.draco.dev/unhealthy", "effect": "NoExecute"}, "clearAfter": "2s"}})


def rule(b: RealBackend, policy: str, device: str) -> dict[str, Any] | None:
    return b.get(f"{RULES}/{rule_name(policy, DeviceID(b.driver, b.ns, device))}")


def replacement(b: RealBackend, name: str) -> str:
    """A new gated pod with a claim of the test's own class: the device draco's allocator
    gives it (narrowed and bound by kube-scheduler to the kwok node)."""
    from tests.e2e.test_allocator_e2e import allocated, gated_pod

    b.create(f"/apis/resource.k8s.io/v1/namespaces/{b.ns}/resourceclaims", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": f"health-{b.id}"}}]}}})
    gated_pod(b, name, name)
    found = wait_for(lambda: allocated(b, name), 30, what=f"{name}'s claim allocated")
    return str(found["status"]["allocation"]["devices"]["results"][0]["device"])


def flow(b: RealBackend, op: Any, policy: str, signal_on: Any, signal_off: Any) -> None:
    """Signal -> rule -> the pod evicted -> a replacement on the healthy device -> signal
    gone -> rule deleted after clearAfter -> the recovered device allocatable again (once
    the operator's own device view, OP's tracker, shows it untainted)."""
    b.create("/apis/resource.k8s.io/v1/deviceclasses", {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": f"health-{b.id}"},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{b.driver}"'}}]}})
    make_slice(b, ["d0", "d1"])
    make_pod(b, "a", "d0")
    wait_for(lambda: (b.get(f"{POLICIES}/{policy}") or {}).get("status", {}).get("selected") == 2, 30,
             what="the policy's first status")
    signal_on()
    made = wait_for(lambda: rule(b, policy, "d0"), 30, what="the policy's rule on d0")
    assert made["spec"]["taint"]["effect"] == "NoExecute"
    wait_for(lambda: not pod_exists(b, "a"), 30, what="the pod on d0 evicted")
    assert rule(b, policy, "d1") is None
    # as the garbage collector would for a claim made from the pod's template: d0 is free,
    # and only the policy's taint keeps the next claim off it
    b.request("DELETE", f"/apis/resource.k8s.io/v1/namespaces/{b.ns}/resourceclaims/a-claim")
    assert replacement(b, "replacement") == "d1"
    signal_off()
    wait_for(lambda: rule(b, policy, "d0") is None, 30, what="the rule deleted after clearAfter")
    status = wait_for(lambda: (lambda s: s if s.get("recovered") == 1 else None)(
        (b.get(f"{POLICIES}/{policy}") or {}).get("status", {})), 30, what="the recovery in the status")
    assert status["tainted"] == 0
    wait_for(lambda: not any(t.key == "health.draco.dev/unhealthy" for t in
                             getattr(op.tracker.device(DeviceID(b.driver, b.ns, "d0")), "taints", ())),
             30, what="the deleted rule gone from the allocator's view")
    assert replacement(b, "after") == "d0"  # allocatable again: the only free device


def test_134_a_monitors_patch_attribute_through_the_cel_signal(real: RealBackend, operator_134: Any) -> None:  # noqa: F811
    b = real
    policy = f"degraded-{b.id}"
    patch = f"degraded-{b.id}"
    op = operator_134(FLOW, SETTINGS)
    wait_ownership(op, DRACO_ALONE)  # the eviction controller found out about the cluster: it acts
    make_policy(b, policy, [{"device": {"cel": f'device.attributes["{b.domain}"].state == "degraded"'}}])
    try:
        flow(b, op, policy,
             lambda: b.create(PATCHES, {
                 "apiVersion": "resource.draco.dev/v1alpha1", "kind": "ResourceSlicePatch",
                 "metadata": {"name": patch},
                 "spec": {"devices": {"filter": {"driver": b.driver, "device": "d0"},
                                      "attributes": {f"{b.domain}/state": {"string": "degraded"}}}}}),
             lambda: b.request("DELETE", f"{PATCHES}/{patch}"))
    finally:
        b.request("DELETE", f"{POLICIES}/{policy}")
        b.request("DELETE", f"{PATCHES}/{patch}")


def test_a_drivers_slice_taint(taints_cluster: RealBackend, draco: Any, ownership: Ownership) -> None:
    b = taints_cluster
    policy = f"xid-{b.id}"
    op = draco(FLOW, SETTINGS)
    wait_ownership(op, ownership)
    make_policy(b, policy, [{"sliceTaint": {"key": "gpu.nvidia.com/xid", "effects": ["NoSchedule"]}}])

    def taint(on: bool) -> None:
        b.merge_patch(f"{SLICES}/{b.node}-{b.ns}", {"spec": {"devices": [
            {"name": "d0", **({"taints": [{"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}]}
                              if on else {})}, {"name": "d1"}]}})
    try:
        flow(b, op, policy, lambda: taint(True), lambda: taint(False))
    finally:
        b.request("DELETE", f"{POLICIES}/{policy}")


def test_the_kubelets_device_health_in_pod_status(
        taints_cluster: RealBackend, draco: Any, ownership: Ownership) -> None:
    b = taints_cluster
    policy = f"kubelet-{b.id}"
    op = draco(("health", "eviction"), SETTINGS)
    wait_ownership(op, ownership)
    make_policy(b, policy, [{"podHealth": {"health": ["Unhealthy"]}}])
    pods = f"/api/v1/namespaces/{b.ns}/pods"

    def report(health: str) -> None:  # as the kubelet writes it (ResourceHealthStatus, beta in 1.36)
        status, body = b.request("PATCH", f"{pods}/watcher/status", {"status": {"containerStatuses": [{
            "name": "c", "image": "i", "imageID": "", "ready": True, "restartCount": 0,
            "state": {"running": {"startedAt": "2026-11-26T00:00:00Z"}},
            "allocatedResourcesStatus": [{"name": "claim:gpu/gpu", "resources": [
                {"resourceID": f"{b.driver}/{b.ns}/d1", "health": health}]}]}]}},
            "application/strategic-merge-patch+json")
        assert status == 200, body.get("message") if isinstance(body, dict) else body

    try:
        make_slice(b, ["d0", "d1"])
        make_pod(b, "watcher", "d1", container_claim=True)
        wait_for(lambda: (b.get(f"{POLICIES}/{policy}") or {}).get("status", {}).get("selected") == 2, 30,
                 what="the policy's first status")
        report("Unhealthy")
        wait_for(lambda: rule(b, policy, "d1"), 30, what="the policy's rule on d1")
        wait_for(lambda: not pod_exists(b, "watcher"), 30, what="the pod on d1 evicted")
        assert rule(b, policy, "d0") is None
    finally:
        b.request("DELETE", f"{POLICIES}/{policy}")
