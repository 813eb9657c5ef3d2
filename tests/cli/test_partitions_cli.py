"""`draco devices` and `draco allocate` over partitionable devices (examples/partitions.yaml)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from operators.cli.main import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "partitions.yaml"


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main([*argv, "-o", "json"]) == 0
    return dict(json.loads(capsys.readouterr().out))


def test_devices_show_each_counter_with_what_allocated_partitions_use(
        capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_json(capsys, "devices", "--from", str(EXAMPLE))
    assert [(c["counterSet"], c["counter"], c["value"], c["allocated"], c["left"])
            for c in doc["counters"]] == [("gpu-0", "memory", "40Gi", "20Gi", "20Gi"),
                                          ("gpu-0", "slices", "7", "3", "4")]
    half = next(d for d in doc["devices"] if d["device"] == "gpu-0-half-b")
    assert half["consumesCounters"] == [{"counterSet": "gpu-0",
                                         "counters": {"memory": "20Gi", "slices": "3"}}]
    assert "unsupported" not in half


def test_allocate_gives_the_free_half_not_the_whole_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_json(capsys, "allocate", "--from", str(EXAMPLE))
    inference = doc["claims"]["team-a/inference"]
    assert inference["allocated"] and [r["device"] for r in inference["results"]] == ["gpu-0-half-b"]


def test_allocate_explains_exhausted_counters_by_name(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    objects = list(yaml.safe_load_all(EXAMPLE.read_text()))
    for o in objects:  # the training claim holds the whole GPU instead of a half
        if o["kind"] == "ResourceClaim" and o["metadata"]["name"] == "training":
            o["status"]["allocation"]["devices"]["results"][0]["device"] = "gpu-0"
    path = tmp_path / "whole.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    main(["allocate", "--from", str(path), "-o", "json"])
    inference = json.loads(capsys.readouterr().out)["claims"]["team-a/inference"]
    assert not inference["allocated"]
    assert "2 with exhausted counters (gpu.example.com/node-a gpu-0/memory)" in inference["reason"]


def test_devices_flag_fields_draco_does_not_support(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "alpha.yaml"
    path.write_text(yaml.safe_dump({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
        "spec": {"driver": "gpu.example.com", "nodeName": "node-a",
                 "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": "gpu-0", "compatibilityGroups": ["a"]}]}}))
    doc = run_json(capsys, "devices", "--from", str(path))
    assert doc["devices"][0]["unsupported"] == ["compatibilityGroups"]
    assert main(["devices", "--from", str(path)]) == 0
    assert "gpu.example.com/node-a/gpu-0: compatibilityGroups" in capsys.readouterr().out
