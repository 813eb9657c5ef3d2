"""The device shapes 1.36 brought, end to end on a real cluster: draco's allocator and
narrowing controllers write what kube-apiserver accepts and kube-scheduler binds. Each
test runs on 1.37 (every CI run) and on 1.36 (on request: `pytest -m release_136`).

- binding conditions (KEP-5007): the claim is allocated with the device's conditions and
  an allocationTimestamp, the pod stays gated (a BindingConditionsPending Event) until
  the driver reports the condition True, then it is ungated and kube-scheduler binds it;
  a failure condition releases the claim (a BindingFailed Warning) and draco allocates
  it again;
- shared devices (KEP-5075): two pods share one device, each with its shareID and
  consumedCapacity, and both are bound;
- partitions (KEP-4815): the whole GPU goes to the first pod, its halves are not given
  to the second (the counter is used up), and the second pod is told so.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from operators.allocator.pod_claims import GATE
from operators.apiserver.testing import wait_for
from tests.e2e.backends import RealBackend
from tests.operator_threads import operator_threads

pytestmark = pytest.mark.real


@pytest.fixture(params=["real_137", "real_136"])
def b(request: pytest.FixtureRequest) -> RealBackend:
    """A namespace of the release's shared cluster (1.36's tests carry `release_136`,
    tests/ordering.py reads the parameter)."""
    backend: RealBackend = request.getfixturevalue(request.param)
    return backend


@pytest.fixture
def draco(b: RealBackend, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """draco's controllers in this process, against B's cluster."""
    yield from operator_threads(b.kubeconfig, monkeypatch)

SETTINGS = SimpleNamespace(qps=200.0, burst=400, allocation_timeout=10.0, narrowing_timeout=300.0)
RESOURCE = "/apis/resource.k8s.io/v1"


def setup(b: RealBackend, slices: list[dict[str, Any]]) -> None:
    b.create(f"{RESOURCE}/deviceclasses", {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": f"{b.ns}-gpu"},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{b.driver}"'}}]}})
    for i, spec in enumerate(slices):
        b.create(f"{RESOURCE}/resourceslices", {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{b.ns}-{i}"},
            "spec": {"driver": b.driver, "nodeName": b.node,
                     "pool": {"name": b.ns, "generation": 1, "resourceSliceCount": len(slices)},
                     **spec}})


def gated(b: RealBackend, name: str, capacity: str | None = None) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": f"{b.ns}-gpu"}
    if capacity:
        exactly["capacity"] = {"requests": {"memory": capacity}}
    b.create(f"{RESOURCE}/namespaces/{b.ns}/resourceclaims", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}})
    return b.create(f"/api/v1/namespaces/{b.ns}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"schedulingGates": [{"name": GATE}],
                 "resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
                 "containers": [{"name": "c", "image": "registry.invalid/app",
                                 "resources": {"claims": [{"name": "gpu"}]}}]}})


def claim(b: RealBackend, name: str) -> dict[str, Any]:
    found = b.get(f"{RESOURCE}/namespaces/{b.ns}/resourceclaims/{name}")
    assert found is not None
    return found


def results(b: RealBackend, name: str) -> list[dict[str, Any]] | None:
    alloc = (claim(b, name).get("status") or {}).get("allocation")
    return alloc["devices"]["results"] if alloc else None


def pod(b: RealBackend, name: str) -> dict[str, Any]:
    found = b.get(f"/api/v1/namespaces/{b.ns}/pods/{name}")
    assert found is not None
    return found


def bound(b: RealBackend, name: str) -> bool:
    return bool(pod(b, name)["spec"].get("nodeName"))


def report(b: RealBackend, claim_name: str, device: str, condition: str) -> None:
    """Play the driver: report CONDITION True for DEVICE in the claim's status.devices."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    b.merge_patch(f"{RESOURCE}/namespaces/{b.ns}/resourceclaims/{claim_name}/status", {"status": {
        "devices": [{"driver": b.driver, "pool": b.ns, "device": device, "conditions": [
            {"type": condition, "status": "True", "lastTransitionTime": now, "reason": "Reported",
             "message": condition}]}]}})


def events(b: RealBackend, name: str) -> list[str]:
    return [e["reason"] for e in b.events() if e["involvedObject"].get("name") == name]


def test_binding_conditions_hold_the_gate_until_the_driver_reports_them(
        b: RealBackend, draco: Any) -> None:
    setup(b, [{"devices": [{"name": "fabric-0", "bindingConditions": ["attached"],
                            "bindingFailureConditions": ["attach-failed"]}]}])
    gated(b, "a")
    draco(("allocator", "narrowing"), SETTINGS)
    got = wait_for(lambda: results(b, "a"), 30, what="the claim allocated")
    assert got[0]["bindingConditions"] == ["attached"]
    assert got[0]["bindingFailureConditions"] == ["attach-failed"]
    assert claim(b, "a")["status"]["allocation"]["allocationTimestamp"]
    wait_for(lambda: "BindingConditionsPending" in events(b, "a"), 30, what="the pending Event")
    time.sleep(2)
    assert [g["name"] for g in pod(b, "a")["spec"]["schedulingGates"]] == [GATE]  # still held
    report(b, "a", "fabric-0", "attached")
    wait_for(lambda: bound(b, "a"), 60, what="kube-scheduler to bind the ungated pod")
    assert not pod(b, "a")["spec"].get("schedulingGates")


def test_a_binding_failure_releases_the_claim_and_the_pod_is_allocated_again(
        b: RealBackend, draco: Any) -> None:
    setup(b, [{"devices": [{"name": "fabric-0", "bindingConditions": ["attached"],
                            "bindingFailureConditions": ["attach-failed"]}]}])
    gated(b, "a")
    draco(("allocator", "narrowing"), SETTINGS)
    wait_for(lambda: results(b, "a"), 30, what="the claim allocated")
    first = claim(b, "a")["metadata"]["resourceVersion"]
    report(b, "a", "fabric-0", "attach-failed")
    wait_for(lambda: "BindingFailed" in events(b, "a"), 30, what="the BindingFailed Warning")
    # released (allocation and device status cleared), then allocated afresh by draco
    again = wait_for(lambda: (c := claim(b, "a")) and (c.get("status") or {}).get("allocation")
                     and not (c.get("status") or {}).get("devices") and c, 30,
                     what="the claim allocated again without the failed status")
    assert again["metadata"]["resourceVersion"] != first
    assert [g["name"] for g in pod(b, "a")["spec"]["schedulingGates"]] == [GATE]


def test_two_pods_share_one_device_and_both_are_bound(b: RealBackend, draco: Any) -> None:
    setup(b, [{"devices": [{"name": "gpu-0", "allowMultipleAllocations": True,
                            "capacity": {"memory": {"value": "40Gi", "requestPolicy": {
                                "default": "4Gi", "validRange": {"min": "4Gi", "step": "4Gi"}}}}}]}])
    gated(b, "a", "10Gi")
    gated(b, "c", "20Gi")
    draco(("allocator", "narrowing"), SETTINGS)
    a = wait_for(lambda: results(b, "a"), 30, what="claim a allocated")
    c = wait_for(lambda: results(b, "c"), 30, what="claim c allocated")
    assert (a[0]["device"], a[0]["consumedCapacity"]) == ("gpu-0", {"memory": "12Gi"})  # 4Gi steps
    assert (c[0]["device"], c[0]["consumedCapacity"]) == ("gpu-0", {"memory": "20Gi"})
    assert a[0]["shareID"] != c[0]["shareID"]
    wait_for(lambda: bound(b, "a") and bound(b, "c"), 60, what="both pods bound")


def test_a_used_up_counter_keeps_the_halves_from_the_second_pod(
        b: RealBackend, draco: Any) -> None:

    def part(name: str, mem: str) -> dict[str, Any]:
        return {"name": name, "consumesCounters": [{"counterSet": "gpu-0", "counters": {
            "memory": {"value": mem}}}]}

    setup(b, [{"sharedCounters": [{"name": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}]},
              {"devices": [part("gpu-0-full", "40Gi"), part("gpu-0-half-a", "20Gi"),
                           part("gpu-0-half-b", "20Gi")]}])
    gated(b, "a")
    draco(("allocator", "narrowing"), SETTINGS)
    assert wait_for(lambda: results(b, "a"), 30, what="claim a allocated")[0]["device"] == "gpu-0-full"
    wait_for(lambda: bound(b, "a"), 60, what="pod a bound")
    gated(b, "z")
    cond = wait_for(lambda: next((c for c in (pod(b, "z").get("status") or {}).get("conditions") or []
                                  if c["type"] == "DracoAllocation"), None), 30, what="the condition")
    assert cond["status"] == "False" and "exhausted counters" in cond["message"], cond
    assert results(b, "z") is None

