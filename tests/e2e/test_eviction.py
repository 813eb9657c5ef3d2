"""Device-taint eviction end to end, on the embedded server and on a real kube-apiserver.

The same flows and assertions on both: a NoExecute rule evicts exactly the pods using
its devices and `kubectl wait --for=condition=EvictionInProgress=false` returns; a None
rule previews; a malformed tolerations annotation is reported and the rest served; a
restart mid-eviction finishes without evicting a pod twice.
"""

from __future__ import annotations

import json
import time
from types import SimpleNamespace
from typing import Any

from operators.apiserver.testing import wait_for
from tests.e2e.backends import Backend

RULES = "/apis/resource.draco.dev/v1alpha1/devicetaintrules"
SETTINGS = SimpleNamespace(qps=200.0, burst=400, eviction_workers=10, grace_period=1.0,
                           use_eviction_api=False, status_interval=0.2)


def make_devices(b: Backend, devices: list[str]) -> None:
    b.create("/apis/resource.k8s.io/v1/resourceslices", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": f"{b.node}-gpu"},
        "spec": {"driver": b.driver, "nodeName": b.node,
                 "pool": {"name": b.node, "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": d} for d in devices]}})


def make_pod_with_claim(b: Backend, name: str, device: str,
                        annotations: dict[str, str] | None = None) -> str:
    """A running pod on the backend's node whose claim is allocated DEVICE and reserved for it."""
    ns = f"/api/v1/namespaces/{b.ns}"
    claims = f"/apis/resource.k8s.io/v1/namespaces/{b.ns}/resourceclaims"
    b.create(claims, {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": f"{name}-claim", "annotations": annotations or {}},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}})
    pod = b.create(f"{ns}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"nodeName": b.node,
                 "resourceClaims": [{"name": "gpu", "resourceClaimName": f"{name}-claim"}],
                 "containers": [{"name": "c", "image": "registry.invalid/app"}]}})
    b.merge_patch(f"{ns}/pods/{name}/status", {"status": {
        "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
    b.merge_patch(f"{claims}/{name}-claim/status", {"status": {
        "allocation": {"devices": {"results": [
            {"request": "gpu", "driver": b.driver, "pool": b.node, "device": device}]}},
        "reservedFor": [{"resource": "pods", "name": name, "uid": pod["metadata"]["uid"]}]}})
    return str(pod["metadata"]["uid"])


def rule(name: str, effect: str, selector: dict[str, Any]) -> str:
    """A DeviceTaintRule as YAML/JSON text; on a shared cluster SELECTOR names the test's driver."""
    return json.dumps({"apiVersion": "resource.draco.dev/v1alpha1", "kind": "DeviceTaintRule",
                       "metadata": {"name": name},
                       "spec": {"deviceSelector": selector,
                                "taint": {"key": "example.com/maintenance", "effect": effect}}})


def pod_exists(b: Backend, name: str) -> bool:
    return b.get(f"/api/v1/namespaces/{b.ns}/pods/{name}") is not None


def pod_untouched(b: Backend, name: str) -> bool:
    """The pod exists and nobody has deleted it yet: an evicted pod keeps existing, with a
    deletionTimestamp, until its kubelet (here kwok) finishes it, later under load."""
    pod = b.get(f"/api/v1/namespaces/{b.ns}/pods/{name}")
    return pod is not None and not pod["metadata"].get("deletionTimestamp")


def condition(b: Backend, name: str) -> dict[str, Any] | None:
    conds = (((b.get(f"{RULES}/{name}") or {}).get("status") or {}).get("conditions")) or []
    return next((c for c in conds if c["type"] == "EvictionInProgress"), None)


def events_about(b: Backend, namespace: str, uid: str) -> list[dict[str, Any]]:
    return [e for e in b.events(namespace) if e["involvedObject"].get("uid") == uid]


def test_noexecute_rule_evicts_and_kubectl_wait_returns(backend: Backend, operator: Any) -> None:
    make_devices(backend, ["d0", "d1"])
    with backend.watching(f"/api/v1/namespaces/{backend.ns}/pods") as seen:
        uid = make_pod_with_claim(backend, "a", "d0")
        make_pod_with_claim(backend, "b", "d1")
        operator(("eviction",), SETTINGS)
        backend.kubectl("apply", "-f", "-", input=rule("maint", "NoExecute", {"driver": backend.driver, "device": "d0"}))
        backend.kubectl("wait", "--for=condition=EvictionInProgress=false",
                        "devicetaintrule/maint", "--timeout=60s", timeout=90)
        assert not pod_exists(backend, "a") and pod_exists(backend, "b")
        wait_for(lambda: any(e["type"] == "DELETED" for e in seen), 10, what="the DELETED event")
    cond = condition(backend, "maint")
    assert cond is not None and cond["reason"] == "Completed"
    assert cond["message"] == "1 pod evicted since starting the controller."
    # the pod got the DisruptionTarget condition before it was deleted
    marked = [e["object"] for e in seen if e["type"] == "MODIFIED"
              and e["object"]["metadata"]["uid"] == uid
              and any(c["type"] == "DisruptionTarget"
                      for c in e["object"]["status"].get("conditions", []))]
    assert marked, "the pod was never marked with DisruptionTarget"
    target = next(c for c in marked[0]["status"]["conditions"] if c["type"] == "DisruptionTarget")
    assert target["reason"] == "DeletionByDeviceTaintManager"
    # Events are posted after the writes they report: waited for, never read once
    wait_for(lambda: any(e["reason"] == "DeviceTaintManagerEviction"
                         and e["involvedObject"]["name"] == "a" for e in backend.events()),
             30, what="the DeviceTaintManagerEviction Event")
    stored = backend.get(f"{RULES}/maint")
    assert stored is not None
    # Events about the cluster-scoped rule go to the default namespace
    wait_for(lambda: any(e["reason"] == "PodsEvicted"
                         for e in events_about(backend, "default", stored["metadata"]["uid"])),
             30, what="the rule's PodsEvicted Event")
    # the controller stamped timeAdded (whole seconds), as upstream's apiserver would have
    assert stored["spec"]["taint"]["timeAdded"].endswith("Z")


def test_effect_none_previews_and_evicts_nothing(backend: Backend, operator: Any) -> None:
    make_devices(backend, ["d0", "d1"])
    make_pod_with_claim(backend, "a", "d0")
    operator(("eviction",), SETTINGS)
    backend.kubectl("apply", "-f", "-", input=rule("preview", "None", {"driver": backend.driver}))
    cond = wait_for(lambda: condition(backend, "preview"), 20, what="the preview condition")
    assert cond["status"] == "False" and cond["reason"] == "NoEffect"
    assert cond["message"].startswith(
        "2 published devices selected. 1 allocated device selected. "
        "1 pod would be evicted in 1 namespace if the effect was NoExecute.")
    time.sleep(1.5)
    assert pod_exists(backend, "a")


def test_malformed_tolerations_annotation_gets_an_event_and_the_rest_is_served(
        backend: Backend, operator: Any) -> None:
    make_devices(backend, ["d0", "d1"])
    make_pod_with_claim(backend, "bad", "d0",
                        annotations={"resource.draco.dev/tolerations": "{not json"})
    make_pod_with_claim(backend, "good", "d1")
    operator(("eviction",), SETTINGS)
    backend.kubectl("apply", "-f", "-", input=rule("all", "NoExecute", {"driver": backend.driver}))
    wait_for(lambda: not pod_exists(backend, "good") and not pod_exists(backend, "bad"), 30,
             what="both pods evicted (the bad annotation counts as no tolerations)")
    wait_for(lambda: any(e["reason"] == "InvalidTolerations" and e["involvedObject"]["name"] == "bad-claim"
                         for e in backend.events()), 30, what="the InvalidTolerations Event")


def test_restart_mid_eviction_finishes_without_double_eviction(
        backend: Backend, operator: Any) -> None:
    devices = [f"d{i}" for i in range(12)]
    make_devices(backend, devices)
    for i, d in enumerate(devices):
        make_pod_with_claim(backend, f"p{i}", d)
    with backend.watching(f"/api/v1/namespaces/{backend.ns}/pods") as seen:
        slow = operator(("eviction",), SimpleNamespace(
            **{**vars(SETTINGS), "qps": 6.0, "burst": 1, "eviction_workers": 1}))
        backend.kubectl("apply", "-f", "-", input=rule("drain", "NoExecute", {"driver": backend.driver}))
        wait_for(lambda: sum(pod_exists(backend, f"p{i}") for i in range(12)) < 12, 30,
                 what="a first eviction")
        slow.stop()
        # what the second controller must evict: the pods the first one had not evicted
        left = sum(pod_untouched(backend, f"p{i}") for i in range(12))
        assert 0 < left < 12, "the restart must happen mid-eviction"
        operator(("eviction",), SETTINGS)
        backend.kubectl("wait", "--for=condition=EvictionInProgress=false",
                        "devicetaintrule/drain", "--timeout=60s", timeout=90)
        assert not any(pod_exists(backend, f"p{i}") for i in range(12))
        wait_for(lambda: sum(e["type"] == "DELETED" for e in seen) >= 12, 10,
                 what="12 DELETED events")
    # each pod was marked for deletion once: one deletionTimestamp appearance per uid
    first_deletes: dict[str, int] = {}
    for e in seen:
        meta = e["object"]["metadata"]
        if e["type"] == "DELETED":
            first_deletes[meta["uid"]] = first_deletes.get(meta["uid"], 0) + 1
    assert len(first_deletes) == 12 and set(first_deletes.values()) == {1}
    cond = condition(backend, "drain")
    assert cond is not None and cond["reason"] == "Completed"
    assert cond["message"] == (
        f"{left} pod{'s' if left != 1 else ''} evicted since starting the controller.")


def test_all_true_selects_every_device_of_the_cluster(
        embedded: Backend, operator_embedded: Any) -> None:
    """`deviceSelector: {all: true}` selects every device of every driver: on the embedded
    server alone (a fresh one), since on a shared cluster it would reach other tests'
    devices. (`{}` is refused by the CRD; one stored before: tests/eviction.)"""
    b = embedded
    make_devices(b, ["d0"])
    other = b.driver_for("nic")
    b.create("/apis/resource.k8s.io/v1/resourceslices", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "nic"},
        "spec": {"driver": other, "nodeName": b.node,
                 "pool": {"name": "nics", "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": "nic-0"}]}})
    make_pod_with_claim(b, "a", "d0")
    operator_embedded(("eviction",), SETTINGS)
    b.kubectl("apply", "-f", "-", input=rule("everything", "None", {"all": True}))
    cond = wait_for(lambda: condition(b, "everything"), 20, what="the preview condition")
    assert cond["message"].startswith(
        "2 published devices selected. 1 allocated device selected. "
        "1 pod would be evicted in 1 namespace if the effect was NoExecute."), cond
