"""Living beside upstream's own device taints, on the real 1.34, 1.36 and 1.37 control planes.

The oracle is the real API server's audit log: every DELETE (or Eviction) of a pod is
one line there, with the user agent of whoever sent it. "Never twice" means exactly
one such request per evicted pod; a DELETE that lost a race (404, 409) still counts.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from operators.apiserver.testing import wait_for
from operators.eviction.decisions import DRACO_ALONE, UPSTREAM
from operators.kube.client import KubeClient
from operators.kube.discovery import discover
from tests.e2e.backends import Backend, RealBackend

KEY = "example.com/maintenance"
DRACO_RULES = "/apis/resource.draco.dev/v1alpha1/devicetaintrules"
UPSTREAM_RULES = "/apis/resource.k8s.io/v1/devicetaintrules"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"
SETTINGS = SimpleNamespace(qps=200.0, burst=400, eviction_workers=10, grace_period=1.0,
                           use_eviction_api=False, status_interval=0.2, slice_taints="auto")


# ------------------------------------------------------------------ objects

def make_slice(b: Backend, devices: list[str], taints: dict[str, list[dict[str, Any]]] | None = None) -> None:
    b.create(SLICES, {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": f"{b.node}-{b.ns}"},
        "spec": {"driver": b.driver, "nodeName": b.node,
                 "pool": {"name": b.ns, "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": d, **({"taints": taints[d]} if taints and d in taints else {})}
                             for d in devices]}})


def make_pod(b: Backend, name: str, device: str, tolerate_seconds: int | None = None,
             container_claim: bool = False) -> str:
    """A running pod whose claim is allocated DEVICE (pool = the namespace) and reserved
    for it; with `tolerate_seconds` the claim tolerates KEY for that long (in the
    request and in the allocation result, where upstream reads it)."""
    ns = f"/api/v1/namespaces/{b.ns}"
    claims = f"/apis/resource.k8s.io/v1/namespaces/{b.ns}/resourceclaims"
    tolerations = ([{"key": KEY, "operator": "Exists", "effect": "NoExecute",
                     "tolerationSeconds": tolerate_seconds}] if tolerate_seconds is not None else [])
    exactly: dict[str, Any] = {"deviceClassName": "gpu"}
    if tolerations:
        exactly["tolerations"] = tolerations
    b.create(claims, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                      "metadata": {"name": f"{name}-claim"},
                      "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}})
    pod = b.create(f"{ns}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"nodeName": b.node, "resourceClaims": [{"name": "gpu", "resourceClaimName": f"{name}-claim"}],
                 "containers": [{"name": "c", "image": "registry.invalid/app",
                                 **({"resources": {"claims": [{"name": "gpu", "request": "gpu"}]}} if container_claim else {})}]}})
    b.merge_patch(f"{ns}/pods/{name}/status", {"status": {
        "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
    result: dict[str, Any] = {"request": "gpu", "driver": b.driver, "pool": b.ns, "device": device}
    if tolerations:
        result["tolerations"] = tolerations
    b.merge_patch(f"{claims}/{name}-claim/status", {"status": {
        "allocation": {"devices": {"results": [result]}},
        "reservedFor": [{"resource": "pods", "name": name, "uid": pod["metadata"]["uid"]}]}})
    return str(pod["metadata"]["uid"])


def rule_body(api_version: str, name: str, selector: dict[str, str], effect: str = "NoExecute",
              time_added: str | None = None) -> dict[str, Any]:
    taint: dict[str, Any] = {"key": KEY, "effect": effect}
    if time_added:
        taint["timeAdded"] = time_added
    return {"apiVersion": api_version, "kind": "DeviceTaintRule", "metadata": {"name": name},
            "spec": {"deviceSelector": selector, "taint": taint}}


def pod_exists(b: Backend, name: str) -> bool:
    return b.get(f"/api/v1/namespaces/{b.ns}/pods/{name}") is not None


def condition(b: Backend, path: str) -> dict[str, Any] | None:
    conds = (((b.get(path) or {}).get("status") or {}).get("conditions")) or []
    return next((c for c in conds if c["type"] == "EvictionInProgress"), None)


# ------------------------------------------------------------------ the audit log

def pod_removals(b: RealBackend, since: int) -> list[dict[str, Any]]:
    """Audit records of DELETEs and Evictions of single pods of b's namespace, written
    after byte offset `since`: [{"pod", "agent", "code"}]. The kubelet's (here kwok's)
    final DELETE of a pod that is already terminating is not an eviction: left out."""
    out = []
    with open(b.cluster.audit_log, "rb") as log:
        log.seek(since)
        for line in log:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            ref = rec.get("objectRef") or {}
            if rec.get("stage") != "ResponseComplete" or ref.get("resource") != "pods" \
                    or ref.get("namespace") != b.ns or not ref.get("name"):
                continue
            if str(rec.get("userAgent", "")).startswith("kwok/"):
                continue  # the kubelet's (kwok's) final delete of a terminating pod: no eviction
            if rec.get("verb") == "delete" and not ref.get("subresource") or \
                    rec.get("verb") == "create" and ref.get("subresource") == "eviction":
                out.append({"pod": ref["name"], "agent": rec.get("userAgent", ""),
                            "code": (rec.get("responseStatus") or {}).get("code")})
    return out


def audit_offset(b: RealBackend) -> int:
    return b.cluster.audit_log.stat().st_size


def by_kcm(agent: str) -> bool:
    return agent.startswith("kube-controller-manager/")


def settle(b: RealBackend, since: int, pods: list[str], seconds: float = 2.0) -> list[dict[str, Any]]:
    """The removals once every pod is gone and a further while passed (a late second
    DELETE would show up in it)."""
    wait_for(lambda: not any(pod_exists(b, p) for p in pods), 30, what=f"{pods} evicted")
    time.sleep(seconds)
    return pod_removals(b, since)


# ------------------------------------------------------------------ discovery

def discovered() -> Any:
    """What `draco run` finds out about the cluster of $KUBECONFIG."""
    async def go() -> Any:
        client = KubeClient()
        try:
            return await discover(client)
        finally:
            await client.close()
    return asyncio.run(go())


@pytest.mark.real
def test_discovery_on_real_134(real: RealBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(real.kubeconfig))
    caps = discovered()
    assert (caps.keeps_device_taints, caps.detected_by, caps.rule_versions, caps.embedded,
            caps.upstream_evicts) == (False, "probe", (), False, False)
    assert caps.server_version.startswith("v1.34.")


@pytest.mark.real
def test_discovery_on_real_137(real_137: RealBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(real_137.kubeconfig))
    caps = discovered()
    assert (caps.keeps_device_taints, caps.detected_by, caps.rule_versions, caps.embedded,
            caps.upstream_evicts) == (True, "probe", ("v1",), False, True)
    assert caps.server_version.startswith("v1.37.")
    # the probe is a dry run: nothing is stored
    assert real_137.get(f"{SLICES}/draco-device-taint-probe") is None


@pytest.mark.real
def test_discovery_on_real_136(real_136: RealBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    """1.36: the server keeps slice taints (DRADeviceTaints beta, on) and kcm evicts for
    them; upstream's DeviceTaintRule API exists only in beta and alpha versions, off."""
    monkeypatch.setenv("KUBECONFIG", str(real_136.kubeconfig))
    caps = discovered()
    assert (caps.keeps_device_taints, caps.detected_by, caps.rule_versions, caps.embedded,
            caps.upstream_evicts) == (True, "probe", (), False, True)
    assert caps.server_version.startswith("v1.36.")
    assert real_136.get(f"{SLICES}/draco-device-taint-probe") is None


def test_discovery_on_the_embedded_server(embedded: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(embedded.kubeconfig))
    caps = discovered()
    assert caps.embedded and not caps.upstream_evicts
    assert embedded.get(f"{SLICES}/draco-device-taint-probe") is None


# ------------------------------------------------------------------ never twice

def wait_ownership(op: Any, expected: Any) -> None:
    wait_for(lambda: op.controllers["eviction"].ownership == expected, 30, what=f"ownership {expected}")


@pytest.mark.real
def test_137_auto_slice_taint_is_evicted_once_by_upstream(real_137: RealBackend, operator_137: Any) -> None:
    b = real_137
    make_slice(b, ["d0", "d1"])
    make_pod(b, "a", "d0")
    make_pod(b, "b", "d1")
    op = operator_137(("eviction",), SETTINGS)
    wait_ownership(op, UPSTREAM)
    since = audit_offset(b)
    b.merge_patch(f"{SLICES}/{b.node}-{b.ns}", {"spec": {"devices": [
        {"name": "d0", "taints": [{"key": KEY, "effect": "NoExecute"}]}, {"name": "d1"}]}})
    removals = settle(b, since, ["a"])
    assert [(r["pod"], by_kcm(r["agent"])) for r in removals] == [("a", True)], removals
    assert pod_exists(b, "b")
    assert op.controllers["eviction"].evicted_total == 0
    # draco saw the taint (and left the pod, if it was still there when it looked)
    wait_for(lambda: any(t.key == KEY for v in op.tracker.devices() if v.id.pool == b.ns and v.name == "d0"
                         for t in v.taints), 10, what="draco's view of the slice taint")


@pytest.mark.real
def test_137_draco_and_upstream_rule_on_the_same_devices_evict_each_pod_once(
        real_137: RealBackend, operator_137: Any) -> None:
    b = real_137
    pods = [f"p{i}" for i in range(4)]
    make_slice(b, [f"d{i}" for i in range(5)])
    for i, p in enumerate(pods):
        make_pod(b, p, f"d{i}", tolerate_seconds=4)  # both controllers see both rules first
    op = operator_137(("eviction",), SETTINGS)
    wait_ownership(op, UPSTREAM)
    since = audit_offset(b)
    added = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    selector = {"driver": b.driver, "pool": b.ns}
    b.create(UPSTREAM_RULES, rule_body("resource.k8s.io/v1", f"up-{b.ns}", selector, time_added=added))
    b.create(DRACO_RULES, rule_body("resource.draco.dev/v1alpha1", f"dr-{b.ns}", selector, time_added=added))
    removals = settle(b, since, pods)
    assert sorted(r["pod"] for r in removals) == pods, removals  # one request per pod, 404s included
    assert all(by_kcm(r["agent"]) for r in removals), removals
    up = wait_for(lambda: (c := condition(b, f"{UPSTREAM_RULES}/up-{b.ns}")) and c["reason"] == "Completed" and c,
                  30, what="upstream's rule condition Completed")
    dr = wait_for(lambda: (c := condition(b, f"{DRACO_RULES}/dr-{b.ns}")) and c["status"] == "False" and c,
                  30, what="draco's rule condition False")
    assert up["status"] == "False"
    assert dr["reason"] == "NotStarted"  # draco evicted none itself


@pytest.mark.real
def test_136_auto_slice_taint_is_evicted_once_by_upstream_and_draco_rules_by_draco(
        real_136: RealBackend, operator_136: Any) -> None:
    """1.36 in `auto`: kcm evicts for the slice taint, draco for its own rule, each pod once."""
    b = real_136
    make_slice(b, ["d0", "d1", "d2"])
    make_pod(b, "a", "d0")
    make_pod(b, "b", "d1")
    make_pod(b, "c", "d2")
    op = operator_136(("eviction",), SETTINGS)
    wait_ownership(op, replace(UPSTREAM, extended_claims=False))  # 1.36 misses extended-resource pods
    since = audit_offset(b)
    b.merge_patch(f"{SLICES}/{b.node}-{b.ns}", {"spec": {"devices": [
        {"name": "d0", "taints": [{"key": KEY, "effect": "NoExecute"}]}, {"name": "d1"}, {"name": "d2"}]}})
    b.create(DRACO_RULES, rule_body("resource.draco.dev/v1alpha1", f"dr-{b.ns}",
                                    {"driver": b.driver, "device": "d1", "pool": b.ns}))
    removals = settle(b, since, ["a", "b"])
    assert sorted((r["pod"], by_kcm(r["agent"])) for r in removals) == [("a", True), ("b", False)], removals
    assert pod_exists(b, "c")


@pytest.mark.real
def test_134_auto_draco_evicts_itself_once(real: RealBackend, operator_134: Any) -> None:
    b = real
    make_slice(b, ["d0", "d1"], taints={"d1": [{"key": KEY, "effect": "NoExecute"}]})
    # 1.34 (DRADeviceTaints off) drops the slice taint on write: nothing for anyone to act on
    stored = b.get(f"{SLICES}/{b.node}-{b.ns}")
    assert stored is not None and "taints" not in stored["spec"]["devices"][1]
    make_pod(b, "a", "d0")
    make_pod(b, "b", "d1")
    op = operator_134(("eviction",), SETTINGS)
    wait_ownership(op, DRACO_ALONE)
    since = audit_offset(b)
    b.create(DRACO_RULES, rule_body("resource.draco.dev/v1alpha1", f"dr-{b.ns}", {"driver": b.driver, "device": "d0", "pool": b.ns}))
    removals = settle(b, since, ["a"])
    assert [(r["pod"], by_kcm(r["agent"]), r["code"]) for r in removals] == [("a", False, 200)], removals
    assert pod_exists(b, "b")


def test_embedded_slice_taint_is_evicted_by_draco(embedded: Backend, operator_embedded: Any) -> None:
    """No kube-controller-manager behind draco's embedded server: auto means draco
    (on 1.34 the server drops slice taints: test_134_auto_draco_evicts_itself_once)."""
    backend, operator = embedded, operator_embedded
    make_slice(backend, ["d0", "d1"], taints={"d0": [{"key": KEY, "effect": "NoExecute"}]})
    with backend.watching(f"/api/v1/namespaces/{backend.ns}/pods") as seen:
        make_pod(backend, "a", "d0")
        make_pod(backend, "b", "d1")
        op = operator(("eviction",), SETTINGS)
        wait_ownership(op, DRACO_ALONE)
        wait_for(lambda: not pod_exists(backend, "a"), 20, what="a evicted")
        time.sleep(1)
    assert pod_exists(backend, "b")
    assert sum(e["type"] == "DELETED" for e in seen) == 1


# ------------------------------------------------------------------ fixtures

@pytest.fixture
def operator_137(real_137: RealBackend, monkeypatch: pytest.MonkeyPatch) -> Any:
    yield from _operator(real_137.kubeconfig, monkeypatch)


@pytest.fixture
def operator_136(real_136: RealBackend, monkeypatch: pytest.MonkeyPatch) -> Any:
    yield from _operator(real_136.kubeconfig, monkeypatch)


@pytest.fixture
def operator_134(real: RealBackend, monkeypatch: pytest.MonkeyPatch) -> Any:
    yield from _operator(real.kubeconfig, monkeypatch)


def _operator(kubeconfig: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    from tests.operator_threads import operator_threads

    yield from operator_threads(kubeconfig, monkeypatch)


# ------------------------------------------------------------------ migration

def draco_cli(b: Backend, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(b.kubeconfig)}
    return subprocess.run([sys.executable, "-m", "operators", *args], capture_output=True, text=True,
                          env=env, stdin=subprocess.DEVNULL, timeout=120)


@pytest.mark.real
def test_137_migrate_moves_draco_rules_to_upstream(real_137: RealBackend) -> None:
    b = real_137
    selector = {"driver": b.driver, "pool": b.ns}
    b.create(DRACO_RULES, rule_body("resource.draco.dev/v1alpha1", f"a-{b.ns}", selector, "NoSchedule",
                                    time_added="2026-01-02T03:04:05Z"))
    b.create(DRACO_RULES, rule_body("resource.draco.dev/v1alpha1", f"b-{b.ns}", {"driver": b.driver, "device": "d9"}, "None"))
    b.create(DRACO_RULES, rule_body("resource.draco.dev/v1alpha1", f"c-{b.ns}", selector, "NoSchedule"))
    b.create(UPSTREAM_RULES, rule_body("resource.k8s.io/v1", f"c-{b.ns}", {"driver": b.driver, "device": "other"}, "NoSchedule"))
    dry = draco_cli(b, "taint", "--migrate", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert f"devicetaintrule.resource.draco.dev/a-{b.ns}: would be migrated to " \
           f"devicetaintrules.resource.k8s.io/a-{b.ns} (dry run)" in dry.stdout
    assert b.get(f"{UPSTREAM_RULES}/a-{b.ns}") is None
    done = draco_cli(b, "taint", "--migrate")
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(": ", 1) for line in done.stdout.splitlines())
    assert lines[f"devicetaintrule.resource.draco.dev/a-{b.ns}"] == f"migrated to devicetaintrules.resource.k8s.io/a-{b.ns}"
    assert lines[f"devicetaintrule.resource.draco.dev/b-{b.ns}"] == f"migrated to devicetaintrules.resource.k8s.io/b-{b.ns}"
    assert lines[f"devicetaintrule.resource.draco.dev/c-{b.ns}"].startswith("left: devicetaintrules.resource.k8s.io/")
    moved = b.get(f"{UPSTREAM_RULES}/a-{b.ns}")
    assert moved is not None and moved["spec"] == {
        "deviceSelector": selector,
        "taint": {"key": KEY, "effect": "NoSchedule", "timeAdded": "2026-01-02T03:04:05Z"}}
    wait_for(lambda: condition(b, f"{UPSTREAM_RULES}/a-{b.ns}"), 30,
             what="upstream's controller to take the migrated rule over")
    none_rule = b.get(f"{UPSTREAM_RULES}/b-{b.ns}")
    assert none_rule is not None and none_rule["spec"]["taint"]["effect"] == "None"
    assert b.get(f"{DRACO_RULES}/a-{b.ns}") is None and b.get(f"{DRACO_RULES}/b-{b.ns}") is None
    assert b.get(f"{DRACO_RULES}/c-{b.ns}") is not None  # the conflicting one stays


@pytest.mark.real
def test_134_migrate_says_upstream_has_no_rules(real: RealBackend) -> None:
    b = real
    b.create(DRACO_RULES, rule_body("resource.draco.dev/v1alpha1", f"a-{b.ns}", {"driver": b.driver, "pool": b.ns}, "NoSchedule"))
    out = draco_cli(b, "taint", "--migrate")
    assert out.returncode == 1
    assert "does not serve upstream's DeviceTaintRule" in out.stderr
    assert b.get(f"{DRACO_RULES}/a-{b.ns}") is not None


# ------------------------------------------------------------------ views and kubectl

@pytest.mark.real
def test_137_views_report_upstream_rules_and_the_detection(real_137: RealBackend) -> None:
    b = real_137
    make_slice(b, ["d0", "d1"])
    make_pod(b, "a", "d0", tolerate_seconds=3600)
    b.create(UPSTREAM_RULES, rule_body("resource.k8s.io/v1", f"up-{b.ns}", {"driver": b.driver, "pool": b.ns, "device": "d0"}))
    # kube-controller-manager may first write NotStarted (before it has seen the pod's
    # allocation) and then PodsPendingEviction: wait for the state the pod makes true
    wait_for(lambda: (condition(b, f"{UPSTREAM_RULES}/up-{b.ns}") or {}).get("reason") == "PodsPendingEviction",
             30, what="upstream's PodsPendingEviction condition")
    devices = draco_cli(b, "devices", "-o", "json")
    assert devices.returncode == 0, devices.stderr
    doc = json.loads(devices.stdout)
    d0 = next(d for d in doc["devices"] if d["driver"] == b.driver and d["device"] == "d0")
    assert [t["source"] for t in d0["taints"]] == [f"DeviceTaintRule.resource.k8s.io/up-{b.ns}"]
    cluster = doc["cluster"]
    assert (cluster["keepsDeviceTaints"], cluster["deviceTaintRuleVersions"], cluster["sliceTaintsEvictedBy"],
            cluster["upstreamRulesEvictedBy"]) == (True, ["v1"], "upstream", "upstream")
    evictions = draco_cli(b, "evictions", "-o", "json")
    assert evictions.returncode == 0, evictions.stderr
    ev = json.loads(evictions.stdout)
    mine = ev["upstreamRules"][f"up-{b.ns}"]
    assert (mine["podsToEvict"], mine["EvictionInProgress"], mine["reason"]) == (1, "True", "PodsPendingEviction")
    assert {pod: by for pod, by in ev["evictedBy"].items() if pod.startswith(f"{b.ns}/")} == {
        f"{b.ns}/a": "upstream"}


@pytest.mark.real
def test_134_views_report_draco_evicts(real: RealBackend) -> None:
    devices = draco_cli(real, "devices", "-o", "json")
    assert devices.returncode == 0, devices.stderr
    cluster = json.loads(devices.stdout)["cluster"]
    assert (cluster["keepsDeviceTaints"], cluster["deviceTaintRuleVersions"], cluster["sliceTaintsEvictedBy"]) \
        == (False, [], "draco")


@pytest.mark.real
def test_137_kubectl_names_upstreams_rule_first(real_137: RealBackend) -> None:
    """Both groups have a `devicetaintrules` resource: kubectl resolves the bare name to
    the built-in group, so draco's rules are `devicetaintrules.resource.draco.dev/NAME`
    (or the short name `dtr`) there."""
    b = real_137
    b.create(UPSTREAM_RULES, rule_body("resource.k8s.io/v1", f"u-{b.ns}", {"driver": b.driver, "pool": b.ns}, "None"))
    b.create(DRACO_RULES, rule_body("resource.draco.dev/v1alpha1", f"d-{b.ns}", {"driver": b.driver, "pool": b.ns}, "None"))
    bare = b.kubectl("get", "devicetaintrule", "-o", "name").stdout.split()
    assert f"devicetaintrule.resource.k8s.io/u-{b.ns}" in bare and not any(f"d-{b.ns}" in n for n in bare)
    full = b.kubectl("get", f"devicetaintrules.resource.draco.dev/d-{b.ns}", "-o", "name").stdout.split()
    short = b.kubectl("get", "dtr", "-o", "name").stdout.split()
    assert full == [f"devicetaintrule.resource.draco.dev/d-{b.ns}"]
    assert f"devicetaintrule.resource.draco.dev/d-{b.ns}" in short
