"""The eviction controller against the embedded API server, driven with the real kubectl."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from operators.apiserver.testing import EmbeddedCluster, Kubectl, wait_for
from operators.cli.operator_thread import OperatorThread
from tests.apiserver.http import call
from tests.operator_threads import operator_threads

RULES = "/apis/resource.draco.dev/v1alpha1/devicetaintrules"
SETTINGS = SimpleNamespace(qps=200.0, burst=400, eviction_workers=10, grace_period=1.0,
                           use_eviction_api=False, status_interval=0.2)


@pytest.fixture
def operator(cluster: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    threads = operator_threads(cluster.kubeconfig, monkeypatch)
    start_thread = next(threads)

    def start(settings: Any = SETTINGS, controllers: tuple[str, ...] = ("eviction",)) -> OperatorThread:
        return start_thread(controllers, settings)

    yield start
    next(threads, None)


def make_devices(cluster: EmbeddedCluster, devices: list[str]) -> None:
    call(f"{cluster.url}/apis/resource.k8s.io/v1/resourceslices", "POST", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "n1-gpu"},
        "spec": {"driver": "gpu.example.com", "nodeName": "n1",
                 "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": d} for d in devices]}})


def make_pod_with_claim(cluster: EmbeddedCluster, name: str, device: str,
                        annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None,
                        tolerations: list[dict[str, Any]] | None = None) -> str:
    base = cluster.url
    code, pod = call(f"{base}/api/v1/namespaces/default/pods", "POST", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}},
        "spec": {"nodeName": "n1", "resourceClaims": [{"name": "gpu", "resourceClaimName": f"{name}-claim"}],
                 "containers": [{"name": "c", "image": "i"}]}})
    assert code == 201, pod
    call(f"{base}/api/v1/namespaces/default/pods/{name}/status", "PATCH", {"status": {
        "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}, "application/merge-patch+json")
    code, claim = call(f"{base}/apis/resource.k8s.io/v1/namespaces/default/resourceclaims", "POST", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": f"{name}-claim", "annotations": annotations or {}},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}})
    assert code == 201, claim
    result: dict[str, Any] = {"request": "gpu", "driver": "gpu.example.com", "pool": "n1", "device": device}
    if tolerations:
        result["tolerations"] = tolerations
    code, body = call(f"{base}/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/{name}-claim/status",
                      "PATCH", {"status": {"allocation": {"devices": {"results": [result]}},
                                           "reservedFor": [{"resource": "pods", "name": name,
                                                            "uid": pod["metadata"]["uid"]}]}},
                      "application/merge-patch+json")
    assert code == 200, body
    return str(pod["metadata"]["uid"])


def rule(name: str, effect: str, selector: dict[str, Any]) -> str:
    return json.dumps({"apiVersion": "resource.draco.dev/v1alpha1", "kind": "DeviceTaintRule",
                       "metadata": {"name": name},
                       "spec": {"deviceSelector": selector, "taint": {"key": "example.com/maintenance", "effect": effect}}})


def pod_exists(cluster: EmbeddedCluster, name: str) -> bool:
    return cluster.get("", "v1", "pods", name, "default") is not None


def condition(cluster: EmbeddedCluster, name: str) -> dict[str, Any] | None:
    obj = cluster.get("resource.draco.dev", "v1alpha1", "devicetaintrules", name)
    conds = ((obj or {}).get("status") or {}).get("conditions") or []
    return next((c for c in conds if c["type"] == "EvictionInProgress"), None)


def history(cluster: EmbeddedCluster) -> list[tuple[str, dict[str, Any]]]:
    return cluster.thread.call(lambda: [(e[2], e[3]) for e in cluster.server.store.history])


def test_noexecute_rule_evicts_and_kubectl_wait_returns(cluster: EmbeddedCluster, kubectl: Kubectl, operator: Any) -> None:
    make_devices(cluster, ["d0", "d1"])
    uid = make_pod_with_claim(cluster, "a", "d0")
    make_pod_with_claim(cluster, "b", "d1")
    operator()
    kubectl("apply", "-f", "-", input=rule("maint", "NoExecute", {"device": "d0"}))
    kubectl("wait", "--for=condition=EvictionInProgress=false", "devicetaintrule/maint", "--timeout=30s")
    assert not pod_exists(cluster, "a") and pod_exists(cluster, "b")
    cond = condition(cluster, "maint")
    assert cond is not None and cond["reason"] == "Completed"
    assert cond["message"] == "1 pod evicted since starting the controller."
    # the pod got the DisruptionTarget condition before it was deleted with a UID precondition
    marked = [o for t, o in history(cluster) if t == "MODIFIED" and o["kind"] == "Pod"
              and o["metadata"]["uid"] == uid and any(c["type"] == "DisruptionTarget"
                                                     for c in o["status"].get("conditions", []))]
    assert marked and marked[0]["status"]["conditions"][-1]["reason"] == "DeletionByDeviceTaintManager"
    events = json.loads(kubectl("get", "events", "-o", "json").stdout)["items"]
    assert any(e["reason"] == "DeviceTaintManagerEviction" and e["involvedObject"]["name"] == "a" for e in events)
    assert any(e["reason"] == "PodsEvicted" and e["involvedObject"]["name"] == "maint" for e in events)
    # the controller stamped timeAdded (whole seconds), as upstream's apiserver would have
    stored = cluster.get("resource.draco.dev", "v1alpha1", "devicetaintrules", "maint")
    assert stored is not None and stored["spec"]["taint"]["timeAdded"].endswith("Z")


def test_an_empty_selector_stored_before_the_guard_keeps_working(
        cluster: EmbeddedCluster, kubectl: Kubectl, operator: Any) -> None:
    """After an upgrade: a `{}` rule created before the CRD refused it (injected here, past
    validation) still selects every device, its status is still written (validation
    ratcheting lets an unchanged selector through), and it can still be labelled; a new
    one is refused."""
    make_devices(cluster, ["d0", "d1"])
    cluster.inject("resource.draco.dev", "v1alpha1", "devicetaintrules", {
        "apiVersion": "resource.draco.dev/v1alpha1", "kind": "DeviceTaintRule", "metadata": {"name": "old"},
        "spec": {"deviceSelector": {}, "taint": {"key": "k", "effect": "None"}}})
    operator()
    cond = wait_for(lambda: condition(cluster, "old"), 15, what="the old rule's condition")
    assert cond["message"].startswith("2 published devices selected."), cond
    kubectl("label", "dtr", "old", "team=infra")
    refused = kubectl("apply", "-f", "-", check=False, input=rule("new", "None", {}))
    assert refused.returncode != 0 and "an empty deviceSelector selects every device" in refused.stderr


def test_effect_none_previews_and_evicts_nothing(cluster: EmbeddedCluster, kubectl: Kubectl, operator: Any) -> None:
    make_devices(cluster, ["d0", "d1"])
    make_pod_with_claim(cluster, "a", "d0")
    operator()
    kubectl("apply", "-f", "-", input=rule("preview", "None", {"all": True}))
    cond = wait_for(lambda: condition(cluster, "preview"), 15, what="the preview condition")
    assert cond["status"] == "False" and cond["reason"] == "NoEffect"
    assert cond["message"].startswith("2 published devices selected. 1 allocated device selected. "
                                      "1 pod would be evicted in 1 namespace if the effect was NoExecute.")
    time.sleep(1.5)
    assert pod_exists(cluster, "a")


def test_unknown_effect_is_other_effect_with_a_warning(cluster: EmbeddedCluster, kubectl: Kubectl, operator: Any) -> None:
    make_devices(cluster, ["d0"])
    make_pod_with_claim(cluster, "a", "d0")
    cluster.inject("resource.draco.dev", "v1alpha1", "devicetaintrules", {
        "apiVersion": "resource.draco.dev/v1alpha1", "kind": "DeviceTaintRule", "metadata": {"name": "future"},
        "spec": {"deviceSelector": {}, "taint": {"key": "k", "effect": "NoExecuteHarder"}}})
    operator()
    cond = wait_for(lambda: condition(cluster, "future"), 15, what="the OtherEffect condition")
    assert cond["reason"] == "OtherEffect" and cond["status"] == "False"
    events = json.loads(kubectl("get", "events", "-A", "-o", "json").stdout)["items"]
    assert any(e["reason"] == "UnknownEffect" and e["type"] == "Warning" for e in events)
    assert pod_exists(cluster, "a")


def test_malformed_tolerations_annotation_gets_an_event_and_the_rest_is_served(
        cluster: EmbeddedCluster, kubectl: Kubectl, operator: Any) -> None:
    make_devices(cluster, ["d0", "d1"])
    make_pod_with_claim(cluster, "bad", "d0", annotations={"resource.draco.dev/tolerations": "{not json"})
    make_pod_with_claim(cluster, "good", "d1")
    operator()
    kubectl("apply", "-f", "-", input=rule("all", "NoExecute", {"all": True}))
    wait_for(lambda: not pod_exists(cluster, "good") and not pod_exists(cluster, "bad"), 20,
             what="both pods evicted (the bad annotation counts as no tolerations)")
    events = json.loads(kubectl("get", "events", "-A", "-o", "json").stdout)["items"]
    assert any(e["reason"] == "InvalidTolerations" and e["involvedObject"]["name"] == "bad-claim"
               for e in events)


def test_eviction_api_mode_respects_a_disruption_budget(cluster: EmbeddedCluster, kubectl: Kubectl, operator: Any) -> None:
    make_devices(cluster, ["d0"])
    make_pod_with_claim(cluster, "guarded", "d0", labels={"app": "x"})
    kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "keep"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "x"}}}}))
    operator(SimpleNamespace(**{**vars(SETTINGS), "use_eviction_api": True, "eviction_retry_after": 0.3}))
    kubectl("apply", "-f", "-", input=rule("maint", "NoExecute", {"all": True}))
    cond = wait_for(lambda: condition(cluster, "maint"), 15, what="the rule condition")
    assert cond["status"] == "True" and cond["reason"] == "PodsPendingEviction"

    def pod_events() -> list[dict[str, Any]]:
        items = json.loads(kubectl("get", "events", "-o", "json").stdout)["items"]
        return [e for e in items if e["involvedObject"]["name"] == "guarded"]

    wait_for(pod_events, 30, what="the first refused eviction's Event")
    time.sleep(1.5)  # more refused attempts (every 0.3 s): they must not add Events
    assert pod_exists(cluster, "guarded")
    refused = pod_events()
    assert [e["reason"] for e in refused] == ["DeviceTaintEvictionRefused"]  # once, and no "Marking for deletion"
    assert refused[0]["type"] == "Warning" and "PodDisruptionBudget" in refused[0]["message"]
    kubectl("delete", "pdb", "keep")
    wait_for(lambda: not pod_exists(cluster, "guarded"), 20, what="eviction once the budget is gone")
    marked = wait_for(lambda: [e for e in pod_events() if e["reason"] == "DeviceTaintManagerEviction"], 10,
                      what="the Marking for deletion Event")
    assert marked[0]["message"] == "Marking for deletion"


def test_restart_mid_eviction_finishes_without_double_eviction(
        cluster: EmbeddedCluster, kubectl: Kubectl, operator: Any) -> None:
    devices = [f"d{i}" for i in range(12)]
    make_devices(cluster, devices)
    for i, d in enumerate(devices):
        make_pod_with_claim(cluster, f"p{i}", d)
    slow = operator(SimpleNamespace(**{**vars(SETTINGS), "qps": 6.0, "burst": 1, "eviction_workers": 1}))
    kubectl("apply", "-f", "-", input=rule("drain", "NoExecute", {"all": True}))
    wait_for(lambda: sum(pod_exists(cluster, f"p{i}") for i in range(12)) < 12, 20, what="a first eviction")
    slow.stop()
    left = sum(pod_exists(cluster, f"p{i}") for i in range(12))
    assert 0 < left < 12, "the restart must happen mid-eviction"
    operator()
    kubectl("wait", "--for=condition=EvictionInProgress=false", "devicetaintrule/drain", "--timeout=30s")
    assert not any(pod_exists(cluster, f"p{i}") for i in range(12))
    deletions = [o["metadata"]["uid"] for t, o in history(cluster) if t == "DELETED" and o["kind"] == "Pod"]
    assert len(deletions) == len(set(deletions)) == 12
    cond = condition(cluster, "drain")
    assert cond is not None and cond["reason"] == "Completed"
    assert cond["message"] == f"{left} pod{'s' if left != 1 else ''} evicted since starting the controller."
