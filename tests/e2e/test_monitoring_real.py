"""The dashboard and the alerts, proven against a real Prometheus on the real 1.34 cluster.

`draco run` (a process, with its /metrics on loopback) serves a flow that touches every
panel: a gated pod's claim allocated and the pod narrowed, another gated pod that no
device fits, a NoExecute DeviceTaintRule that evicts one pod and cannot evict a second
(a PodDisruptionBudget refuses, draco evicting through policy/v1 Eviction), and a
DeviceHealthPolicy whose maxUnavailable holds one of two degraded devices back.

A real Prometheus (Debian's package, `hack/prometheus`) scrapes it every second and
evaluates the alert rules every second, the rules rendered from the chart by the
generator of manifests/prometheus/ (hack/render-manifests) with the thresholds lowered
(every `for` 0s, a 1 s wait, 0.05 failed API requests a second). Then, through its HTTP API:

- every target of every dashboard panel, with the variables filled in (namespace: the
  target's namespace label; driver: the test's), parses and returns series, and so
  does each variable's label_values query;
- every alert's value (its expr without the threshold) returns series; the alerts the
  flow causes fire (eviction stuck, gated pods waiting, health policy throttled) and
  the others (no leader, a controller not ready, API errors) never did, not even
  pending (ALERTS over the whole run);
- some values are exactly the flow's: 1 pod pending and 1 evicted for the rule, 1 device
  tainted and 1 held back in the health pool, the allocator's latency observed.

`promtool check rules` passes on the lowered file and on manifests/prometheus/, and
`promtool check metrics` finds nothing to say about draco's /metrics.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from operators.allocator.pod_claims import GATE
from operators.apiserver.runner import free_port
from operators.apiserver.testing import wait_for
from tests.chart.helm import helm
from tests.chart.test_chart_files import load_script
from tests.e2e.backends import ROOT, RealBackend
from tests.e2e.prometheus import (
    DASHBOARD,
    Prometheus,
    alert_values,
    binaries,
    label_values,
    panel_targets,
    poll,
    promtool,
    substitute,
)

pytestmark = pytest.mark.real

RULES = "/apis/resource.draco.dev/v1alpha1/devicetaintrules"
POLICIES = "/apis/resource.draco.dev/v1alpha1/devicehealthpolicies"
TARGET_NAMESPACE = "draco-monitoring"  # the namespace label a ServiceMonitor's target would carry
LOWERED = ("--set", "prometheusRule.noLeader.for=0s", "--set", "prometheusRule.controllerNotReady.for=0s",
           "--set", "prometheusRule.evictionStuck.for=0s", "--set", "prometheusRule.gatedPodsWaiting.for=0s",
           "--set", "prometheusRule.gatedPodsWaiting.seconds=1", "--set", "prometheusRule.healthPolicyThrottled.for=0s",
           "--set", "prometheusRule.apiErrors.for=0s", "--set-json", "prometheusRule.apiErrors.perSecond=0.05")
FIRING = {"DracoEvictionStuck", "DracoGatedPodsWaiting", "DracoHealthPolicyThrottled"}
SILENT = {"DracoNoLeader", "DracoControllerNotReady", "DracoAPIErrorsRising"}


class Draco:
    """`python -m operators run` with every controller, leader election in the test's
    namespace, evictions through policy/v1 Eviction, /metrics and /readyz on loopback."""

    def __init__(self, b: RealBackend, workdir: Path) -> None:
        self.metrics = free_port()
        self.health = free_port()
        self.log = workdir / "draco.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("DRACO_")}
        env.update({"KUBECONFIG": str(b.kubeconfig), "POD_NAME": "draco-monitoring", "PYTHONUNBUFFERED": "1"})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "operators", "run", "--leader-elect", "--leader-elect-namespace", b.ns,
             "--metrics-port", str(self.metrics), "--metrics-address", "127.0.0.1",
             "--health-port", str(self.health), "--health-address", "127.0.0.1",
             "--use-eviction-api", "--grace-period", "1", "--log-format", "json"],
            cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=self.log.open("w"), stderr=subprocess.STDOUT)

    def logs(self) -> str:
        return self.log.read_text(errors="replace")[-6000:]

    def wait_leading(self, timeout: float = 60) -> None:
        def leading() -> bool:
            assert self.proc.poll() is None, f"draco run exited {self.proc.returncode}:\n{self.logs()}"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.health}/readyz?verbose", timeout=2) as r:
                    return r.status == 200 and "(leader)" in r.read().decode()
            except OSError:
                return False
        wait_for(leading, timeout, 0.1, what="draco run to lead and be ready")

    def scrape(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics}/metrics", timeout=10) as resp:
            return resp.read().decode()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@pytest.fixture
def draco(real: RealBackend, tmp_path: Path) -> Iterator[Draco]:
    process = Draco(real, tmp_path)
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def prometheus_bin() -> Path:
    return binaries()


def lowered_rules(workdir: Path) -> Path:
    """The alert rules as hack/render-manifests writes manifests/prometheus/, thresholds lowered."""
    render = load_script("render-manifests")
    path = workdir / "rules.yaml"
    path.write_text(render.alert_rules(*LOWERED, helm=Path(helm())))
    return path


# -- the flow's objects ------------------------------------------------------------------


def device_class(b: RealBackend, name: str, role: str) -> None:
    b.create("/apis/resource.k8s.io/v1/deviceclasses", {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression":
                                        f'device.driver == "{b.driver}" && device.attributes["{b.domain}"].role == "{role}"'}}]}})


def pool(b: RealBackend, name: str, role: str, devices: dict[str, dict[str, Any]]) -> str:
    """A ResourceSlice of node-0 that is a pool of its own; returns the pool's name."""
    pool_name = f"{b.ns}-{name}"
    b.create("/apis/resource.k8s.io/v1/resourceslices", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": pool_name},
        "spec": {"driver": b.driver, "nodeName": b.node,
                 "pool": {"name": pool_name, "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": d, "attributes": {f"{b.domain}/role": {"string": role}, **{
                     f"{b.domain}/{k}": {"string": v} for k, v in attrs.items()}}}
                             for d, attrs in devices.items()]}})
    return pool_name


def claim(b: RealBackend, name: str, device_class_name: str) -> None:
    b.create(f"/apis/resource.k8s.io/v1/namespaces/{b.ns}/resourceclaims", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class_name}}]}}})


def running_pod(b: RealBackend, name: str, pool_name: str, device: str, cls: str,
                labels: dict[str, str] | None = None) -> None:
    """A pod running on node-0 whose claim is allocated DEVICE and reserved for it."""
    claim(b, f"{name}-claim", cls)
    pod = b.create(f"/api/v1/namespaces/{b.ns}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}},
        "spec": {"nodeName": b.node, "resourceClaims": [{"name": "gpu", "resourceClaimName": f"{name}-claim"}],
                 "containers": [{"name": "c", "image": "registry.invalid/app"}]}})
    b.merge_patch(f"/api/v1/namespaces/{b.ns}/pods/{name}/status", {"status": {
        "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
    b.merge_patch(f"/apis/resource.k8s.io/v1/namespaces/{b.ns}/resourceclaims/{name}-claim/status", {"status": {
        "allocation": {"devices": {"results": [
            {"request": "gpu", "driver": b.driver, "pool": pool_name, "device": device}]}},
        "reservedFor": [{"resource": "pods", "name": name, "uid": pod["metadata"]["uid"]}]}})


def gated_pod(b: RealBackend, name: str, cls: str) -> None:
    claim(b, f"{name}-claim", cls)
    b.create(f"/api/v1/namespaces/{b.ns}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"schedulingGates": [{"name": GATE}],
                 "resourceClaims": [{"name": "gpu", "resourceClaimName": f"{name}-claim"}],
                 "containers": [{"name": "c", "image": "registry.invalid/app", "resources": {"claims": [{"name": "gpu"}]}}]}})


def make_flow(b: RealBackend) -> dict[str, str]:
    """Every object of the flow; returns the names the checks need."""
    names = {"alloc": f"mon-alloc-{b.id}", "none": f"mon-none-{b.id}", "rule": f"mon-evict-{b.id}",
             "policy": f"mon-health-{b.id}"}
    device_class(b, names["alloc"], "alloc")
    device_class(b, names["none"], "none")  # no device has this role: a pod that waits
    pool(b, "alloc", "alloc", {"a0": {}})
    names["evict_pool"] = pool(b, "evict", "evict", {"e0": {}, "e1": {}})
    names["health_pool"] = pool(b, "health", "health", {"h0": {"state": "degraded"}, "h1": {"state": "degraded"}})
    running_pod(b, "victim", names["evict_pool"], "e0", names["alloc"])
    running_pod(b, "protected", names["evict_pool"], "e1", names["alloc"], {"app": "protected"})
    b.create(f"/apis/policy/v1/namespaces/{b.ns}/poddisruptionbudgets", {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "protected"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "protected"}}}})
    b.create(RULES, {
        "apiVersion": "resource.draco.dev/v1alpha1", "kind": "DeviceTaintRule", "metadata": {"name": names["rule"]},
        "spec": {"deviceSelector": {"driver": b.driver, "pool": names["evict_pool"]},
                 "taint": {"key": "example.com/maintenance", "effect": "NoExecute"}}})
    b.create(POLICIES, {
        "apiVersion": "resource.draco.dev/v1alpha1", "kind": "DeviceHealthPolicy", "metadata": {"name": names["policy"]},
        "spec": {"deviceSelector": {"driver": b.driver, "pool": names["health_pool"]},
                 "signals": [{"device": {"cel": f'device.attributes["{b.domain}"].state == "degraded"'}}],
                 "taint": {"key": "health.draco.dev/unhealthy", "effect": "NoSchedule"}, "maxUnavailable": 1}})
    gated_pod(b, "served", names["alloc"])
    gated_pod(b, "starved", names["none"])
    return names


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    conds = ((obj or {}).get("status") or {}).get("conditions") or []
    return next((c for c in conds if c["type"] == kind), {})


def wait_flow(b: RealBackend, names: dict[str, str]) -> None:
    pods = f"/api/v1/namespaces/{b.ns}/pods"
    wait_for(lambda: b.get(f"{pods}/victim") is None, 45, 0.2, what="the victim evicted")
    wait_for(lambda: condition(b.get(f"{RULES}/{names['rule']}"), "EvictionInProgress").get("reason")
             == "PodsPendingEviction", 30, 0.2, what="the rule to keep the protected pod pending")
    assert b.get(f"{pods}/protected") is not None, "the PodDisruptionBudget did not keep the pod"
    wait_for(lambda: not ((b.get(f"{pods}/served") or {}).get("spec") or {}).get("schedulingGates"), 30, 0.2,
             what="the served pod allocated, narrowed and ungated")
    wait_for(lambda: condition(b.get(f"{pods}/starved"), "DracoAllocation").get("reason") == "Unschedulable",
             30, 0.2, what="the starved pod reported Unschedulable")
    wait_for(lambda: condition(b.get(f"{POLICIES}/{names['policy']}"), "Throttled").get("status") == "True",
             30, 0.2, what="the health policy throttled")


# -- the test ----------------------------------------------------------------------------


def test_every_panel_and_alert_on_a_real_prometheus(real: RealBackend, draco: Draco, prometheus_bin: Path,
                                                    tmp_path: Path) -> None:
    started = time.monotonic()
    b = real
    rules_path = lowered_rules(tmp_path)
    for path in (rules_path, ROOT / "manifests" / "prometheus" / "draco-alerts.rules.yaml"):
        checked = promtool(prometheus_bin, "check", "rules", str(path))
        assert checked.returncode == 0 and "SUCCESS: 6 rules found" in checked.stdout, checked.stdout + checked.stderr
    names = make_flow(b)
    draco.wait_leading()
    prom = Prometheus(prometheus_bin, tmp_path, f"127.0.0.1:{draco.metrics}", {"namespace": TARGET_NAMESPACE})
    try:
        prom.wait_ready()
        # the rules from the first scrape on, as in a Prometheus that has run for a while:
        # before it, no draco_leader at all is rightly "no leader" (draco not scraped)
        wait_for(lambda: prom.value('up{job="draco"}') == 1, 20, 0.2, what="the first scrape of draco")
        prom.load_rules(rules_path)
        wait_flow(b, names)
        variables = {"namespace": TARGET_NAMESPACE, "driver": b.driver, "datasource": "prometheus"}
        dashboard = json.loads(DASHBOARD.read_text())
        panels = [(title, substitute(expr, variables)) for title, expr in panel_targets(dashboard)]
        values = alert_values(yaml.safe_load(rules_path.read_text()))
        assert set(values) == FIRING | SILENT

        def not_yet() -> list[str]:
            missing = [f"panel {title!r}: {expr}" for title, expr in panels if not prom.query(expr)]
            missing += [f"alert {name}'s value: {value}" for name, (value, _) in values.items()
                        if not prom.query(value)]
            firing = {a["labels"]["alertname"] for a in prom.alerts() if a["state"] == "firing"}
            return missing + [f"{name} not firing" for name in sorted(FIRING - firing)]

        poll(not_yet, 45, "every panel and alert value to return series and the flow's alerts to fire")
        for name, (_, expr) in values.items():  # the whole expr: series exactly where it fires
            assert bool(prom.query(expr)) == (name in FIRING), name
        check_alerts(prom, names)
        check_values(prom, names)
        check_variables(prom, dashboard, variables)
        # the silent alerts never fired, nor were pending, since Prometheus started
        for name in sorted(SILENT):
            assert prom.query(f'ALERTS{{alertname="{name}"}}') == []
            assert prom.query(f'count_over_time(ALERTS{{alertname="{name}"}}[10m])') == [], name
    except BaseException:
        print(f"draco's log:\n{draco.logs()}\nprometheus' log:\n{prom.logs()}")
        raise
    finally:
        prom.stop()
    linted = promtool(prometheus_bin, "check", "metrics", stdin=draco.scrape())
    assert linted.returncode == 0 and not (linted.stdout + linted.stderr).strip(), linted.stdout + linted.stderr
    print(f"\nmonitoring: {len(panels)} panel queries, {len(values)} alerts, "
          f"{time.monotonic() - started:.1f} s")


def check_alerts(prom: Prometheus, names: dict[str, str]) -> None:
    """The firing alerts name what the flow made, with a runbook."""
    firing = [a for a in prom.alerts() if a["state"] == "firing"]
    by_name: dict[str, list[dict[str, Any]]] = {}
    for alert in firing:
        by_name.setdefault(alert["labels"]["alertname"], []).append(alert)
    assert not set(by_name) & SILENT, sorted(by_name)
    assert any(a["labels"].get("rule") == names["rule"] for a in by_name["DracoEvictionStuck"])
    assert any(a["labels"].get("policy") == names["policy"] for a in by_name["DracoHealthPolicyThrottled"])
    assert any(a["labels"].get("reason") == "Unschedulable" for a in by_name["DracoGatedPodsWaiting"])
    for alert in firing:
        assert alert["labels"]["namespace"] == TARGET_NAMESPACE
        assert alert["annotations"]["runbook_url"].endswith("#" + alert["labels"]["alertname"].lower())


def check_values(prom: Prometheus, names: dict[str, str]) -> None:
    """Some values are the flow's exactly."""
    rule = f'rule="{names["rule"]}"'
    assert prom.value(f"draco_device_taint_rule_pods_pending{{{rule}}}") == 1  # the protected pod
    assert prom.value(f"draco_device_taint_rule_pods_evicted_total{{{rule}}}") == 1  # the victim
    assert prom.value(f"draco_device_taint_rule_eviction_in_progress{{{rule}}}") == 1
    health = f'policy="{names["policy"]}", pool="{names["health_pool"]}"'
    assert prom.value(f'draco_health_devices{{{health}, state="selected"}}') == 2
    assert prom.value(f'draco_health_devices{{{health}, state="tainted"}}') == 1
    assert prom.value(f'draco_health_devices{{{health}, state="held_back"}}') == 1
    assert prom.value(f'draco_health_policy_throttled{{policy="{names["policy"]}"}}') == 1
    assert (prom.value('draco_gated_pods{reason="Unschedulable"}') or 0) >= 1
    for controller in ("allocator", "narrowing"):
        assert (prom.value(f'draco_allocation_duration_seconds_count{{controller="{controller}"}}') or 0) >= 1
    # a few transient errors are the real cluster's (a CRD's storage starting answers 429, an
    # eviction racing the disruption controller 504): far below the alert's lowered threshold
    errors = [(e["metric"], e["value"][1]) for e in prom.query("draco_api_request_errors_total > 0")]
    assert sum(float(value) for _, value in errors) <= 5, errors
    assert prom.value("sum(draco_leader)") == 1


def check_variables(prom: Prometheus, dashboard: dict[str, Any], variables: dict[str, str]) -> None:
    """Each query variable's label_values finds the value the test filled in."""
    for variable in dashboard["templating"]["list"]:
        if variable["type"] != "query":
            continue
        selector, label = label_values(variable, variables)
        found = prom.api(f"label/{label}/values", **{"match[]": selector})
        assert variables[variable["name"]] in found, (variable["name"], found)
