"""DeviceHealthPolicy end to end on draco's embedded server: `draco run`'s health and
eviction controllers in a thread, a driver's health taint on a device as NVIDIA's DRA
driver writes it (`gpu.nvidia.com/xid`), and what a cluster admin sees.

The flow: signal -> the policy's DeviceTaintRule -> the pod evicted -> its replacement
allocated elsewhere is not this test's business (no allocator here) -> the signal gone
-> the rule deleted after `clearAfter` -> the device untainted. Then the cap: half of
the devices failing at once with `maxUnavailable: 10%` gives exactly the allowed number
of rules and `Throttled`; and a signal on a whole GPU taints its partitions.
"""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest

from operators.apiserver.testing import wait_for
from operators.health.decisions import rule_name
from operators.model import DeviceID
from tests.e2e.backends import Backend
from tests.e2e.test_upstream_taints import SLICES, make_pod, pod_exists

POLICIES = "/apis/resource.draco.dev/v1alpha1/devicehealthpolicies"
RULES = "/apis/resource.draco.dev/v1alpha1/devicetaintrules"
XID = "gpu.nvidia.com/xid"
SETTINGS = SimpleNamespace(qps=200.0, burst=400, eviction_workers=10, grace_period=1.0,
                           use_eviction_api=False, status_interval=0.2, slice_taints="auto",
                           health_debounce=0.05)


def policy(b: Backend, name: str, **spec: Any) -> dict[str, Any]:
    return b.create(POLICIES, {
        "apiVersion": "resource.draco.dev/v1alpha1", "kind": "DeviceHealthPolicy", "metadata": {"name": name},
        "spec": {"deviceSelector": {"driver": b.driver}, "signals": [{"sliceTaint": {"key": XID}}],
                 "taint": {"key": "health.draco.dev/unhealthy", "effect": "NoExecute"}, **spec}})


def publish(b: Backend, devices: list[str], failing: dict[str, str], partitions: bool = False) -> None:
    """The driver's slice: DEVICES, with an XID taint (value: the XID) on those FAILING."""
    body: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{b.node}-{b.ns}"},
        "spec": {"driver": b.driver, "nodeName": b.node,
                 "pool": {"name": b.ns, "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": d, **({"taints": [{"key": XID, "value": failing[d], "effect": "NoSchedule"}]}
                                            if d in failing else {})} for d in devices]}}
    if partitions:  # one GPU's memory shared by the whole device and its two halves
        body["spec"]["sharedCounters"] = [{"name": "gpu-0-mem", "counters": {"memory": {"value": "80Gi"}}}]
        for dev in body["spec"]["devices"]:
            dev["consumesCounters"] = [{"counterSet": "gpu-0-mem", "counters": {"memory": {
                "value": "80Gi" if dev["name"] == "gpu-0" else "40Gi"}}}]
    path = f"{SLICES}/{b.node}-{b.ns}"
    if b.get(path) is None:
        b.create(SLICES, body)
    else:
        b.request("PUT", path, {**body, "metadata": {**body["metadata"], "resourceVersion": b.get(path)["metadata"]["resourceVersion"]}})


def rule_of(b: Backend, name: str, device: str) -> dict[str, Any] | None:
    return b.get(f"{RULES}/{rule_name(name, DeviceID(b.driver, b.ns, device))}")


def status(b: Backend, name: str) -> dict[str, Any]:
    found = b.get(f"{POLICIES}/{name}")
    assert found is not None
    return dict(found.get("status") or {})


def test_a_driver_health_taint_becomes_a_rule_evicts_and_is_cleared_after_recovery(
        embedded: Backend, operator_embedded: Any) -> None:
    b = embedded
    devices = ["gpu-0", "gpu-1"]
    publish(b, devices, {})
    make_pod(b, "trainer", "gpu-0")
    operator_embedded(("health", "eviction"), SETTINGS)
    created = policy(b, "nvidia", clearAfter="2s")
    assert created["metadata"]["name"] == "nvidia"
    wait_for(lambda: status(b, "nvidia").get("selected") == 2, 20, what="the policy's first status")
    publish(b, devices, {"gpu-0": "79"})
    rule = wait_for(lambda: rule_of(b, "nvidia", "gpu-0"), 20, what="the policy's rule")
    assert rule["spec"] == {"deviceSelector": {"driver": b.driver, "pool": b.ns, "device": "gpu-0"},
                            "taint": {"key": "health.draco.dev/unhealthy", "value": "gpu.nvidia.com-xid-79",
                                      "effect": "NoExecute", **({"timeAdded": rule["spec"]["taint"]["timeAdded"]}
                                                                if "timeAdded" in rule["spec"]["taint"] else {})}}
    (owner,) = rule["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "DeviceHealthPolicy", "nvidia", created["metadata"]["uid"], True)
    assert rule["metadata"]["labels"]["resource.draco.dev/health-policy"] == "nvidia"
    wait_for(lambda: not pod_exists(b, "trainer"), 20, what="the eviction controller to evict the pod")
    s = wait_for(lambda: (lambda s: s if s.get("tainted") == 1 else None)(status(b, "nvidia")), 10,
                 what="the status to count the tainted device")
    assert s["devices"] == [{"driver": b.driver, "pool": b.ns, "device": "gpu-0", "state": "Tainted",
                             "signal": "gpu.nvidia.com/xid=79", "rule": rule["metadata"]["name"]}]
    assert rule_of(b, "nvidia", "gpu-1") is None
    # recovery: the driver clears the taint; the rule goes after clearAfter, not before
    publish(b, devices, {})
    cleared = time.monotonic()
    wait_for(lambda: rule_of(b, "nvidia", "gpu-0") is None, 20, what="the rule to be deleted")
    assert time.monotonic() - cleared >= 1.5
    s = wait_for(lambda: (lambda s: s if s.get("recovered") == 1 else None)(status(b, "nvidia")), 10,
                 what="the status to count the recovery")
    assert s["tainted"] == 0 and s["devices"] == []

    def reasons() -> list[str]:
        return [e["reason"] for e in b.events("default") if e["involvedObject"].get("name") == "nvidia"]

    # the Events follow the writes they report: waited for, then counted
    wait_for(lambda: "DeviceRecovered" in reasons(), 20, what="the DeviceRecovered Event")
    assert reasons().count("DeviceTainted") == 1 and reasons().count("DeviceRecovered") == 1


def test_half_the_devices_failing_at_once_are_capped_by_max_unavailable(
        embedded: Backend, operator_embedded: Any) -> None:
    b = embedded
    devices = [f"gpu-{i}" for i in range(100)]
    publish(b, devices, {})
    operator_embedded(("health",), SETTINGS)
    policy(b, "capped", maxUnavailable="10%")
    wait_for(lambda: status(b, "capped").get("selected") == 100, 20, what="the policy's first status")
    publish(b, devices, {d: "48" for d in devices[:50]})
    s = wait_for(lambda: (lambda s: s if s.get("heldBack") == 40 else None)(status(b, "capped")), 20,
                 what="40 devices held back")
    assert s["tainted"] == 10
    (cond,) = s["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == ("Throttled", "True", "MaxUnavailable")
    assert "40 device(s) with a signal held back" in cond["message"]
    rules = [r for r in (b.get(RULES) or {}).get("items", [])
             if r["metadata"].get("labels", {}).get("resource.draco.dev/health-policy") == "capped"]
    assert len(rules) == 10
    assert len(s["devices"]) == 50  # the bounded list: all 50 here, tainted first
    assert [d["state"] for d in s["devices"]][:10] == ["Tainted"] * 10
    wait_for(lambda: any(e["reason"] == "Throttled" for e in b.events("default")), 20,
             what="the Throttled Event")
    # deleting the policy deletes its rules
    b.request("DELETE", f"{POLICIES}/capped")
    wait_for(lambda: not [r for r in (b.get(RULES) or {}).get("items", [])
                          if r["metadata"].get("labels", {}).get("resource.draco.dev/health-policy") == "capped"],
             20, what="the policy's rules to go with it")


def test_a_signal_on_a_whole_gpu_taints_its_partitions(embedded: Backend, operator_embedded: Any) -> None:
    b = embedded
    devices = ["gpu-0", "gpu-0-half-a", "gpu-0-half-b"]
    publish(b, devices, {}, partitions=True)
    operator_embedded(("health",), SETTINGS)
    policy(b, "parts", partitions=True)
    wait_for(lambda: status(b, "parts").get("selected") == 3, 20, what="the policy's first status")
    publish(b, devices, {"gpu-0": "79"}, partitions=True)
    for dev in devices:
        wait_for(lambda dev=dev: rule_of(b, "parts", dev), 20, what=f"a rule on {dev}")
    half = rule_of(b, "parts", "gpu-0-half-a")
    assert half is not None and half["spec"]["taint"]["value"] == "partition-of-gpu-0-gpu.nvidia.com-xid-79"


@pytest.mark.parametrize("bad", [{"signals": [{"device": {"cel": "device.attributes["}}]}])
def test_a_signal_draco_cannot_evaluate_taints_nothing_and_says_why(
        embedded: Backend, operator_embedded: Any, bad: dict[str, Any]) -> None:
    b = embedded
    publish(b, ["gpu-0"], {"gpu-0": "79"})
    operator_embedded(("health",), SETTINGS)
    policy(b, "broken", **bad)
    s = wait_for(lambda: (lambda s: s if s.get("problems") else None)(status(b, "broken")), 20,
                 what="the problem in the status")
    assert "signals[0].device.cel" in s["problems"][0]
    assert rule_of(b, "broken", "gpu-0") is None


def test_the_replacement_lands_on_a_healthy_device_and_the_recovered_one_is_allocatable_again(
        embedded: Backend, operator_embedded: Any) -> None:
    """With draco's allocator: while the policy's rule holds gpu-0, a new claim gets gpu-1;
    once the driver's taint is gone and `clearAfter` passed, the last free device, gpu-0,
    is allocated again."""
    from tests.e2e.test_allocator_e2e import (
        allocated,
        claim_body,
        claims_path,
        device_class,
        gated_pod,
    )

    b = embedded
    devices = ["gpu-0", "gpu-1"]
    publish(b, devices, {})
    device_class(b)
    settings = SimpleNamespace(**vars(SETTINGS), allocation_timeout=10.0, narrowing_timeout=300.0)
    op = operator_embedded(("health", "allocator"), settings)
    policy(b, "nvidia", clearAfter="1s")

    def taints_seen(device: str) -> tuple[Any, ...]:
        """The taints the operator's own device view holds for DEVICE (a watch's delay is
        waited out on what the allocator reads, not slept over)."""
        view = op.tracker.device(DeviceID(b.driver, b.ns, device))
        return view.taints if view is not None else ()
    wait_for(lambda: status(b, "nvidia").get("selected") == 2, 20, what="the policy's first status")
    publish(b, devices, {"gpu-0": "79"})
    wait_for(lambda: rule_of(b, "nvidia", "gpu-0"), 20, what="the policy's rule")
    wait_for(lambda: any(t.source.startswith("DeviceTaintRule/") for t in taints_seen("gpu-0")), 20,
             what="the rule in the allocator's view")

    def device_of(claim: str) -> str:
        found = wait_for(lambda: allocated(b, claim), 20, what=f"{claim} allocated")
        return str(found["status"]["allocation"]["devices"]["results"][0]["device"])

    b.create(claims_path(b), claim_body("replacement"))
    gated_pod(b, "replacement", "replacement")
    assert device_of("replacement") == "gpu-1"
    publish(b, devices, {})
    wait_for(lambda: rule_of(b, "nvidia", "gpu-0") is None, 20, what="the rule deleted after clearAfter")
    wait_for(lambda: not taints_seen("gpu-0"), 20, what="gpu-0 untainted in the allocator's view")
    b.create(claims_path(b), claim_body("after"))
    gated_pod(b, "after", "after")
    assert device_of("after") == "gpu-0"
