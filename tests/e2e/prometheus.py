"""A real Prometheus for the monitoring test: the binaries `hack/prometheus` unpacks from
Debian's package, a server started on loopback with a generated config, its HTTP API,
and what the test asks it: the dashboard's panel queries and the alert rules' values.

No skipping: without prometheus or promtool the test fails with hack/prometheus's reason.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from operators.apiserver.runner import free_port
from operators.apiserver.testing import wait_for
from tests.e2e.backends import ROOT

HACK_PROMETHEUS = ROOT / "hack" / "prometheus"
DASHBOARD = ROOT / "charts" / "draco" / "dashboards" / "draco.json"
# `<value> <comparison> <number>`: the form _alerts.tpl promises for every expr
THRESHOLD = re.compile(r"^(?P<value>.+?)\s*(?P<op><=|>=|==|!=|<|>)\s*(?P<number>[-+]?[0-9.]+(?:e[-+]?[0-9]+)?)$",
                       re.S | re.I)


def binaries() -> Path:
    """The folder of prometheus and promtool: $DRACO_PROMETHEUS_BIN (.ci/run sets it),
    else what `hack/prometheus install` prints (cached after the first time)."""
    given = os.environ.get("DRACO_PROMETHEUS_BIN")
    if given:
        folder = Path(given)
    else:
        proc = subprocess.run([sys.executable, str(HACK_PROMETHEUS), "install"], capture_output=True,
                              text=True, timeout=900, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            pytest.fail(f"no Prometheus for the monitoring test: hack/prometheus install failed:\n"
                        f"{proc.stderr[-3000:]}")
        folder = Path(proc.stdout.strip().splitlines()[-1])
    for binary in ("prometheus", "promtool"):
        if not os.access(folder / binary, os.X_OK):
            pytest.fail(f"no executable {binary} in {folder} (DRACO_PROMETHEUS_BIN or hack/prometheus install)")
    return folder


def promtool(folder: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(folder / "promtool"), *args], capture_output=True, text=True, timeout=120,
                          input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL)


class Prometheus:
    """`prometheus` scraping TARGET (with the target LABELS) every second, and evaluating
    every second the rules `load_rules` gives it."""

    def __init__(self, folder: Path, workdir: Path, target: str, labels: dict[str, str]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.rules = workdir / "rules"
        self.rules.mkdir()
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(self.rules / "*.yaml")],  # none at first
            "scrape_configs": [{"job_name": "draco", "static_configs": [{"targets": [target], "labels": labels}]}],
        }
        (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.log = workdir / "prometheus.log"
        self.proc = subprocess.Popen(
            [str(folder / "prometheus"), f"--config.file={workdir / 'prometheus.yml'}",
             f"--storage.tsdb.path={workdir / 'tsdb'}", f"--web.listen-address=127.0.0.1:{self.port}"],
            cwd=workdir, stdin=subprocess.DEVNULL, stdout=self.log.open("w"), stderr=subprocess.STDOUT)

    def logs(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

    def wait_ready(self, timeout: float = 30) -> None:
        def ready() -> bool:
            assert self.proc.poll() is None, f"prometheus exited {self.proc.returncode}:\n{self.logs()}"
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as resp:
                    return resp.status == 200
            except OSError:
                return False
        wait_for(ready, timeout, 0.1, what="prometheus to be ready")

    def load_rules(self, rules: Path) -> None:
        """Evaluate RULES from now on (a config reload, as `kill -HUP` does it)."""
        shutil.copy(rules, self.rules / rules.name)
        self.proc.send_signal(signal.SIGHUP)
        names = {g["name"] for g in yaml.safe_load(rules.read_text())["groups"]}
        wait_for(lambda: names <= {g["name"] for g in self.api("rules")["groups"]}, 20, 0.1,
                 what=f"prometheus to load {rules.name}")

    def api(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/{path}{query}", timeout=10) as resp:
                answer = json.loads(resp.read())
        except urllib.error.HTTPError as err:  # 400: the query does not parse; the body says why
            answer = json.loads(err.read() or b"{}")
        assert answer.get("status") == "success", f"{path} {params}: {answer}"
        return answer["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector EXPR evaluates to now (a parse error fails the test)."""
        data = self.api("query", query=expr)
        assert data["resultType"] == "vector", f"{expr}: {data['resultType']}"
        return list(data["result"])

    def value(self, expr: str) -> float | None:
        """EXPR's single value now, or None when it returns no series."""
        result = self.query(expr)
        assert len(result) <= 1, f"{expr}: {len(result)} series"
        return float(result[0]["value"][1]) if result else None

    def alerts(self) -> list[dict[str, Any]]:
        return list(self.api("alerts")["alerts"])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def panel_targets(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title, expr) of every target of every panel, rows' nested panels included."""
    out = []
    for panel in dashboard["panels"]:
        for inner in [panel, *panel.get("panels", [])]:
            out += [(inner["title"], t["expr"]) for t in inner.get("targets", []) if t.get("expr")]
    return out


def substitute(expr: str, variables: dict[str, str]) -> str:
    """EXPR with the dashboard's variables and Grafana's built-in ones filled in."""
    builtins = {"__rate_interval": "15s", "__interval": "1s", "__range": "5m"}
    for name, value in sorted({**builtins, **variables}.items(), key=lambda kv: -len(kv[0])):
        expr = expr.replace(f"${{{name}}}", value).replace(f"${name}", value)
    assert "$" not in expr, f"a variable left unfilled: {expr}"
    return expr


def label_values(variable: dict[str, Any], variables: dict[str, str]) -> tuple[str, str]:
    """A `label_values(selector, label)` variable as (series selector, label)."""
    match = re.fullmatch(r"label_values\((?P<selector>.+),\s*(?P<label>\w+)\)", variable["definition"])
    assert match is not None, f"variable {variable['name']}: {variable['definition']}"
    return substitute(match["selector"], variables), match["label"]


def alert_values(rules: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """Per alert: (the value its expr compares, the whole expr)."""
    out = {}
    for group in rules["groups"]:
        for rule in group["rules"]:
            match = THRESHOLD.match(rule["expr"].strip())
            assert match is not None, f"{rule['alert']}: not `<value> <comparison> <number>`: {rule['expr']}"
            out[rule["alert"]] = (match["value"], rule["expr"])
    return out


def poll(check: Any, timeout: float, what: str) -> Any:
    """wait_for, but the last failure's reason in the message (what is still missing)."""
    deadline = time.monotonic() + timeout
    while True:
        missing = check()
        if not missing:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}; still: {missing}")
        time.sleep(0.5)
