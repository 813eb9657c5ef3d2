"""The CLI guide's offline commands over the shipped examples give the documented answers:
the commands and their answers are read from docs/cli-guide.md."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from operators.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
GUIDE = ROOT / "docs" / "cli-guide.md"
EVICTIONS = "draco evictions --from examples/cluster.yaml --from examples/rules.yaml"


def guide_blocks() -> list[tuple[str, str]]:
    """(language, body) of every fenced block of the guide, in order."""
    return re.findall(r"^```(\w*)\n(.*?)^```", GUIDE.read_text(), re.S | re.M)


def test_evictions_over_the_example_rule(capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The guide's `draco evictions … -o json` prints the JSON block that follows it."""
    blocks = guide_blocks()
    at = next(i for i, (lang, body) in enumerate(blocks) if lang == "sh" and body.startswith(EVICTIONS))
    command, (lang, documented) = blocks[at][1].strip(), blocks[at + 1]
    assert lang == "json"
    monkeypatch.chdir(ROOT)
    assert main(shlex.split(command)[1:]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc == json.loads(documented)
    assert doc["evict"] == ["team-a/trainer-0"] and doc["later"] == [] and doc["errors"] == []
    rule = doc["rules"]["gpu-maint"]
    assert (rule["EvictionInProgress"], rule["reason"], rule["affectedDevices"], rule["allocatedDevices"],
            rule["podsToEvict"], rule["namespaces"]) == ("True", "PodsPendingEviction", 2, 1, 1, 1)


def test_offline_allocation_table(capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The guide's `$ draco allocate --from examples/cluster.yaml` console block, verbatim."""
    console = next(body for lang, body in guide_blocks()
                   if lang == "console" and body.startswith("$ draco allocate --from examples/cluster.yaml\n"))
    command, _, documented = console.partition("\n")
    monkeypatch.chdir(ROOT)
    assert main(shlex.split(command.removeprefix("$ "))[1:]) == 0
    assert capsys.readouterr().out == documented


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
