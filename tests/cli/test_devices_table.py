"""`draco devices` as a person reads it: a table that fits a terminal, values spelled as
the API spells them, and every device of an invalid pool listed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from operators.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = [str(ROOT / "examples" / "cluster.yaml"), str(ROOT / "examples" / "patches.yaml")]


def _slice(name: str, devices: list[dict[str, Any]], count: int) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
            "spec": {"driver": "d.example.com", "nodeName": "n1",
                     "pool": {"name": "p", "generation": 1, "resourceSliceCount": count}, "devices": devices}}


def test_default_table_fits_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["devices", *(a for f in EXAMPLES for a in ("--from", f))]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["DRIVER", "POOL", "DEVICE", "NODE", "TAINTS", "PATCHES"]
    assert max(len(line) for line in lines) <= 100
    assert any("ecc-errors=high:NoSchedule" in line for line in lines)
    assert main([*argv, "-o", "wide"]) == 0
    wide = capsys.readouterr().out
    assert "ATTRIBUTES" in wide and "model=H100" in wide and "hopper-family" in wide


def test_values_are_spelled_as_the_api_does(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump(_slice("s", [{"name": "x", "attributes": {
        "healthy": {"bool": True}, "spare": {"bool": False}, "index": {"int": 3}}}], 1)))
    assert main(["devices", "--from", str(f), "-o", "wide"]) == 0
    out = capsys.readouterr().out
    assert "healthy=true" in out and "spare=false" in out and "index=3" in out
    assert "True" not in out and "False" not in out


def test_same_name_twice_in_a_pool_lists_both(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "dup.yaml"
    f.write_text(yaml.safe_dump_all([
        _slice("s1", [{"name": "gpu-0", "attributes": {"model": {"string": "A"}}}], 2),
        _slice("s2", [{"name": "gpu-0", "attributes": {"model": {"string": "B"}}},
                      {"name": "gpu-1"}], 2),
    ]))
    assert main(["devices", "--from", str(f), "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    listed = [(d["device"], d["slice"], d["attributes"]["d.example.com/model"]["string"])
              for d in doc["devices"] if d["device"] == "gpu-0"]
    assert listed == [("gpu-0", "s1", "A"), ("gpu-0", "s2", "B")]
    assert [d["device"] for d in doc["devices"]] == ["gpu-0", "gpu-0", "gpu-1"]
    (pool,) = doc["pools"]
    assert pool["complete"] is False and "duplicate device name gpu-0" in pool["reason"]
    assert main(["devices", "--from", str(f)]) == 0
    table = capsys.readouterr().out
    assert table.count("gpu-0") >= 2 and "Incomplete pools:" in table
