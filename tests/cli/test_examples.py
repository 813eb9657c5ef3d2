"""The README's offline commands over the shipped examples give the documented answers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from operators.cli.main import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_evictions_over_the_example_rule(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["evictions", "--from", str(EXAMPLES / "cluster.yaml"), "--from", str(EXAMPLES / "rules.yaml"),
            "--now", "2026-11-22T10:00:00Z", "-o", "json"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["evict"] == ["team-a/trainer-0"] and doc["later"] == [] and doc["errors"] == []
    rule = doc["rules"]["gpu-maint"]
    assert (rule["EvictionInProgress"], rule["reason"], rule["affectedDevices"], rule["allocatedDevices"],
            rule["podsToEvict"], rule["namespaces"]) == ("True", "PodsPendingEviction", 2, 1, 1, 1)


def test_offline_taint_preview(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["taint", "pool=node-a", "example.com/drain:NoExecute", "--from",
                 str(EXAMPLES / "cluster.yaml")]) == 0
    out = capsys.readouterr().out
    assert "# selects 2 device(s); evicts 1 pod(s) in 1 namespace(s)\n#   team-a/trainer-0\n" in out
