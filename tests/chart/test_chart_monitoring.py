"""The chart's dashboard ConfigMap and PrometheusRule (helm template, no cluster), the plain
rules file rendered from the same template, and the dashboard's JSON against the metrics
draco exports. tests/e2e/test_monitoring_real.py runs the queries on a real Prometheus."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml
from prometheus_client import REGISTRY

from tests.chart.helm import CHART, ROOT, find, objects, run_helm, template
from tests.e2e.prometheus import THRESHOLD, panel_targets

DASHBOARD = CHART / "dashboards" / "draco.json"
ALERTS_DOC = ROOT / "docs" / "operations" / "alerts.md"
RULES_FILE = ROOT / "manifests" / "prometheus" / "draco-alerts.rules.yaml"
ALERTS = ("DracoNoLeader", "DracoControllerNotReady", "DracoEvictionStuck", "DracoGatedPodsWaiting",
          "DracoHealthPolicyThrottled", "DracoAPIErrorsRising")


def rules_of(*values: str) -> dict[str, dict[str, Any]]:
    rule = find(objects(template("--set", "prometheusRule.enabled=true", *values)), "PrometheusRule")
    (group,) = rule["spec"]["groups"]
    return {r["alert"]: r for r in group["rules"]}


def test_both_are_off_by_default() -> None:
    kinds = [(o["kind"], o["metadata"]["name"]) for o in objects(template())]
    assert ("PrometheusRule", "draco") not in kinds
    assert ("ConfigMap", "draco-dashboard") not in kinds


def test_the_dashboard_configmap_carries_the_json_and_the_sidecars_label() -> None:
    cm = find(objects(template("--set", "dashboard.enabled=true")), "ConfigMap", "draco-dashboard")
    assert cm["metadata"]["namespace"] == "draco-system"
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["metadata"]["labels"]["app.kubernetes.io/part-of"] == "draco"
    assert "annotations" not in cm["metadata"]
    assert json.loads(cm["data"]["draco.json"]) == json.loads(DASHBOARD.read_text())
    moved = find(objects(template("--set", "dashboard.enabled=true", "--set", "dashboard.namespace=monitoring",
                                  "--set-json", 'dashboard.labels={"grafana_dashboard": "draco"}',
                                  "--set-json", 'dashboard.annotations={"grafana_folder": "DRA"}')),
                 "ConfigMap", "draco-dashboard")
    assert moved["metadata"]["namespace"] == "monitoring"
    assert moved["metadata"]["labels"]["grafana_dashboard"] == "draco"
    assert moved["metadata"]["annotations"] == {"grafana_folder": "DRA"}


def test_the_prometheus_rule_has_every_alert_with_its_threshold_from_the_values() -> None:
    defaults = rules_of()
    assert tuple(defaults) == ALERTS
    assert defaults["DracoGatedPodsWaiting"]["expr"].endswith("> 900")
    assert defaults["DracoAPIErrorsRising"]["expr"].endswith("> 0.1")
    assert {name: r["for"] for name, r in defaults.items()} == {
        "DracoNoLeader": "2m", "DracoControllerNotReady": "5m", "DracoEvictionStuck": "15m",
        "DracoGatedPodsWaiting": "5m", "DracoHealthPolicyThrottled": "15m", "DracoAPIErrorsRising": "10m"}
    assert {r["labels"]["severity"] for r in defaults.values()} == {"critical", "warning"}
    tuned = rules_of("--set", "prometheusRule.gatedPodsWaiting.seconds=60", "--set-json",
                     "prometheusRule.apiErrors.perSecond=0.5", "--set", "prometheusRule.evictionStuck.for=1h",
                     "--set", "prometheusRule.alertLabels.team=ml", "--set",
                     "prometheusRule.runbookBaseURL=https://docs.example.com/operations/alerts/")
    assert tuned["DracoGatedPodsWaiting"]["expr"].endswith("> 60")
    assert tuned["DracoAPIErrorsRising"]["expr"].endswith("> 0.5")
    assert tuned["DracoEvictionStuck"]["for"] == "1h"
    assert "more than 1h" in tuned["DracoEvictionStuck"]["annotations"]["description"]
    for name, rule in tuned.items():
        assert rule["labels"] == {"severity": defaults[name]["labels"]["severity"], "team": "ml"}
        assert rule["annotations"]["runbook_url"] == f"https://docs.example.com/operations/alerts/#{name.lower()}"


def test_the_rule_objects_labels_are_the_charts_and_the_values() -> None:
    rule = find(objects(template("--set", "prometheusRule.enabled=true", "--set",
                                 "prometheusRule.labels.release=prometheus")), "PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    assert rule["metadata"]["namespace"] == "draco-system"


def test_every_expr_is_a_value_compared_with_a_number() -> None:
    """The form the monitoring test relies on to run each alert's value on its own."""
    for name, rule in rules_of().items():
        match = THRESHOLD.match(rule["expr"])
        assert match is not None, f"{name}: {rule['expr']}"
        assert THRESHOLD.match(match["value"]) is None, f"{name}: two comparisons"


def test_every_alert_has_a_runbook_section_its_url_points_at() -> None:
    headings = re.findall(r"^## (\S+)$", ALERTS_DOC.read_text(), re.M)
    for name, rule in rules_of().items():
        assert name in headings, f"docs/operations/alerts.md has no `## {name}`"
        assert rule["annotations"]["runbook_url"] == f"docs/operations/alerts.md#{name.lower()}"


def test_the_plain_rules_file_is_the_prometheus_rules_spec() -> None:
    """Cut from the same rendering by hack/render-manifests (its --check, in
    test_chart_render, says the file is current): the same rules, nothing else."""
    spec = find(objects(template("--set", "prometheusRule.enabled=true")), "PrometheusRule")["spec"]
    assert yaml.safe_load(RULES_FILE.read_text()) == spec
    monitoring = ROOT / "manifests" / "monitoring"
    rendered = {o["kind"]: o for path in monitoring.glob("*.yaml") for o in objects(path.read_text())}
    assert rendered["PrometheusRule"]["spec"] == spec
    assert set(rendered) == {"PrometheusRule", "ConfigMap"}
    assert not [o for o in objects((ROOT / "manifests" / "draco.yaml").read_text())
                if o["kind"] == "PrometheusRule"], "kubectl apply -f manifests/ needs no prometheus-operator"


@pytest.mark.parametrize(("args", "message"), [
    (("--set", "prometheusRule.noLeader.for=soon"), "/prometheusRule/noLeader/for"),
    (("--set-json", "prometheusRule.gatedPodsWaiting.seconds=-1"), "/prometheusRule/gatedPodsWaiting/seconds"),
    (("--set", "prometheusRule.bogus=1"), "additional properties 'bogus' not allowed"),
    (("--set", "dashboard.bogus=1"), "additional properties 'bogus' not allowed"),
])
def test_the_schema_refuses(args: tuple[str, ...], message: str) -> None:
    proc = run_helm("template", "draco", str(CHART), *args, check=False)
    assert proc.returncode != 0
    assert message in proc.stderr


def exported_names() -> set[str]:
    """The sample names draco's /metrics can carry (every metrics module imported)."""
    import operators.allocator_controller.controller
    import operators.allocator_controller.gang_loop
    import operators.allocator_controller.preempt_loop
    import operators.cli.run_metrics
    import operators.eviction.controller
    import operators.health.controller
    import operators.kube.discovery
    import operators.kube.events
    import operators.kube.leader
    import operators.narrowing.controller
    import operators.patches.metrics  # noqa: F401
    from operators.cli.run_metrics import RunCollector, Snapshot

    names = set()
    families = list(REGISTRY.collect()) + list(RunCollector(None, Snapshot, "v").describe())  # type: ignore[arg-type]
    for family in families:
        suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum")}.get(family.type, ("",))
        names |= {family.name + s for s in suffixes}
    return names


def test_every_panel_reads_metrics_draco_exports() -> None:
    exported = exported_names()
    for title, expr in panel_targets(json.loads(DASHBOARD.read_text())):
        for name in re.findall(r"\b((?:draco|process)_[a-z_]+)\b", expr):
            assert name in exported, f"panel {title!r} reads {name}, which draco does not export"


def test_the_dashboards_layout_and_variables() -> None:
    dash = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for panel in dash["panels"]:
        pos = panel["gridPos"]
        mine = {(x, y) for x in range(pos["x"], pos["x"] + pos["w"]) for y in range(pos["y"], pos["y"] + pos["h"])}
        assert pos["x"] + pos["w"] <= 24 and not mine & cells, f"panel {panel['title']!r} overlaps another"
        cells |= mine
        if panel["type"] != "row":
            assert panel["targets"] and panel["datasource"]["uid"] == "${datasource}", panel["title"]
            assert panel["description"], panel["title"]
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert set(variables) == {"datasource", "namespace", "driver"}
    for name in ("namespace", "driver"):
        assert variables[name]["includeAll"] and variables[name]["multi"] and variables[name]["allValue"] == ".*"
    exprs = [expr for _, expr in panel_targets(dash)]
    assert all('namespace=~"$namespace"' in expr for expr in exprs)
    driver_panels = {title for title, expr in panel_targets(dash) if "$driver" in expr}
    assert {"Pods pending eviction", "Tainted devices", "Throttled policies"} <= driver_panels
