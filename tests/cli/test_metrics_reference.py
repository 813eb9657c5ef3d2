"""docs/reference/metrics.md is generated from the metrics draco registers
(hack/metrics-reference) and current, and every metric follows Prometheus' naming."""

from __future__ import annotations

import re
from pathlib import Path

from tests.chart.test_chart_files import load_script

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "reference" / "metrics.md"
metrics_reference = load_script("metrics-reference")
ROW = re.compile(r"^\| `(draco_[a-z_]+)` \| (counter|gauge|histogram|summary|info) \| ", re.M)


def test_metrics_reference_is_current() -> None:
    assert PAGE.read_text() == metrics_reference.reference(), \
        "docs/reference/metrics.md is stale: run hack/metrics-reference --write docs/reference/metrics.md"


def test_every_metric_is_named_as_prometheus_asks() -> None:
    rows = ROW.findall(PAGE.read_text())
    assert len(rows) >= 30, "the page lists draco's metrics"
    for name, kind in rows:
        assert name.endswith("_total") == (kind == "counter"), name
        if kind == "histogram" or name.endswith(("_seconds", "_age", "_duration")):
            assert name.endswith("_seconds"), f"{name}: durations are in seconds, and say so"


def test_the_dashboard_and_alerts_name_only_documented_metrics() -> None:
    documented = {name for name, _ in ROW.findall(PAGE.read_text())}
    used: set[str] = set()
    for path in (ROOT / "charts/draco/dashboards/draco.json",
                 ROOT / "manifests/prometheus/draco-alerts.rules.yaml"):
        used |= set(re.findall(r"\bdraco_[a-z_]+", path.read_text()))
    suffixes = ("_bucket", "_count", "_sum")
    base = {next((u[: -len(s)] for s in suffixes if u.endswith(s)), u) for u in used}
    assert base - documented == set()
