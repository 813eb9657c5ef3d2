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


def test_the_gang_example_is_placed_in_the_free_rack(capsys: pytest.CaptureFixture[str]) -> None:
    """examples/gang-cluster.yaml: rack r1 has a GPU taken, so the 4 x 2 GPU gang of
    examples/gang.yaml goes whole to rack r2, two pods per node."""
    argv = ["allocate", "--gang", "team-a/trainer", "--from", str(EXAMPLES / "gang-cluster.yaml"),
            "-o", "json"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["status"] == "allocated" and doc["domain"] == "example.com/rack=r2"
    assert sorted(doc["nodes"].values()) == ["node-c", "node-c", "node-d", "node-d"]
    assert sum(len(r) for claims in doc["members"].values() for r in claims.values()) == 8


def test_the_gang_examples_job_joins_the_gang_it_declares() -> None:
    import yaml

    from operators.model.gangs import GANG_LABEL, parse_gang
    docs = list(yaml.safe_load_all((EXAMPLES / "gang.yaml").read_text()))
    gang = parse_gang(next(d for d in docs if d["kind"] == "Gang"))
    job = next(d for d in docs if d["kind"] == "Job")
    template = job["spec"]["template"]
    assert template["metadata"]["labels"][GANG_LABEL] == gang.meta.name
    assert job["spec"]["parallelism"] == job["spec"]["completions"] == gang.min_count == 4
    assert template["spec"]["schedulingGates"] == [{"name": "resource.draco.dev/allocation"}]
    assert gang.node_label == "example.com/rack"
