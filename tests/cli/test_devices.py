"""`draco devices`: the JSON contract, table output, inputs and bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from operators.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "cluster.yaml"


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["devices", *args, "-o", "json"]) == 0
    out = capsys.readouterr().out
    return json.loads(out)  # stdout carries only the JSON document


def slice_obj(name: str, pool: str, devices: list[str], *, generation: int = 1, count: int = 1,
              driver: str = "gpu.example.com", node: str = "node-a") -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
        "spec": {"driver": driver, "nodeName": node,
                 "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
                 "devices": [{"name": d, "attributes": {"model": {"string": "H100"}}} for d in devices]},
    }


def write(tmp_path: Path, name: str, objects: list[dict[str, Any]]) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(objects))
    return str(path)


def test_example_cluster_matches_contract(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_json(capsys, "--from", str(EXAMPLE))
    assert set(doc) == {"devices", "pools", "errors"}
    ids = [(d["driver"], d["pool"], d["device"]) for d in doc["devices"]]
    assert ids == sorted(ids) and len(ids) == 5
    gpu = next(d for d in doc["devices"] if d["pool"] == "node-a" and d["device"] == "gpu-1")
    assert set(gpu) == {"driver", "pool", "device", "slice", "node", "nodeSelector", "attributes",
                        "capacity", "taints", "patchedBy"}
    assert gpu["node"] == "node-a" and gpu["nodeSelector"] is None
    # unqualified names take the driver's domain; qualified names stay as published
    assert gpu["attributes"]["gpu.example.com/model"] == {"string": "H100"}
    assert gpu["attributes"]["gpu.example.com/index"] == {"int": 1}
    assert gpu["attributes"]["gpu.example.com/driverVersion"] == {"version": "550.54.15"}
    assert gpu["attributes"]["resource.kubernetes.io/pcieRoot"] == {"string": "pci0000:40"}
    assert gpu["capacity"] == {"gpu.example.com/memory": {"value": "80Gi"}}
    assert gpu["taints"] == [{
        "key": "gpu.example.com/ecc-errors", "value": "high", "effect": "NoSchedule",
        "timeAdded": "2026-11-01T10:00:00Z", "source": "ResourceSlice/node-a-gpu.example.com-x7k2p",
    }]
    fpga = next(d for d in doc["devices"] if d["device"] == "fpga-0")
    assert fpga["node"] is None
    assert fpga["nodeSelector"]["nodeSelectorTerms"][0]["matchExpressions"][0]["key"] == "example.com/rack"
    assert all(p["complete"] and p["reason"] is None for p in doc["pools"])
    assert doc["errors"] == []


def test_incomplete_pool_devices_still_listed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write(tmp_path, "c.yaml", [
        slice_obj("a-1", "p", ["d0"], count=2),          # second slice of the pool missing
        slice_obj("b-old", "q", ["old"], generation=1),  # superseded by generation 2
        slice_obj("b-new", "q", ["new"], generation=2),
    ])
    doc = run_json(capsys, "--from", f)
    assert [d["device"] for d in doc["devices"]] == ["d0", "new"]
    pools = {p["pool"]: p for p in doc["pools"]}
    assert pools["p"]["complete"] is False and "1" in pools["p"]["reason"]
    assert pools["q"] == {"driver": "gpu.example.com", "pool": "q", "complete": True, "reason": None}


def test_duplicate_device_names_make_pool_unusable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write(tmp_path, "c.yaml", [slice_obj("s1", "p", ["d0"], count=2),
                                   slice_obj("s2", "p", ["d0"], count=2)])
    doc = run_json(capsys, "--from", f)
    pool = doc["pools"][0]
    assert pool["complete"] is False and "duplicate" in pool["reason"]


def test_bad_object_is_reported_and_others_still_shown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = slice_obj("broken", "x", ["d0"])
    bad["spec"]["devices"][0]["attributes"]["model"] = {"string": "A", "int": 1}
    f = write(tmp_path, "c.yaml", [bad, slice_obj("fine", "p", ["d0"])])
    doc = run_json(capsys, "--from", f)
    assert [d["pool"] for d in doc["devices"]] == ["p"]
    assert len(doc["errors"]) == 1
    assert doc["errors"][0]["object"] == "ResourceSlice/broken"
    assert "spec.devices[0].attributes" in doc["errors"][0]["message"]


def test_json_list_and_several_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    listed = tmp_path / "list.json"
    listed.write_text(json.dumps({"apiVersion": "v1", "kind": "List",
                                  "items": [slice_obj("s1", "p1", ["a"])]}))
    other = write(tmp_path, "other.yaml", [slice_obj("s2", "p2", ["b"], node="node-b")])
    doc = run_json(capsys, "--from", str(listed), "--from", other)
    assert [(d["pool"], d["node"]) for d in doc["devices"]] == [("p1", "node-a"), ("p2", "node-b")]


def test_table_output_names_devices_and_problems(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write(tmp_path, "c.yaml", [slice_obj("a-1", "p", ["d0"], count=2)])
    assert main(["devices", "--from", f]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:3] == ["DRIVER", "POOL", "DEVICE"]
    assert "d0" in out and "Incomplete pools:" in out


@pytest.mark.parametrize(
    ("content", "expected"),
    [(None, "no such file"), ("a: [unclosed", "not valid YAML or JSON"), ("- 1\n- 2\n", "not a Kubernetes object")],
)
def test_unreadable_input_fails_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, expected: str
) -> None:
    path = tmp_path / "input.yaml"
    if content is not None:
        path.write_text(content)
    assert main(["devices", "--from", str(path)]) == 1
    err = capsys.readouterr().err
    assert str(path) in err and expected in err


def test_console_script_and_module_entry_agree() -> None:
    by_module = subprocess.run(
        [sys.executable, "-m", "operators", "devices", "--from", str(EXAMPLE), "-o", "json"],
        capture_output=True, text=True, check=True,
    )
    assert json.loads(by_module.stdout)["devices"][0]["device"] == "fpga-0"
    helped = subprocess.run([sys.executable, "-m", "operators", "--help"],
                            capture_output=True, text=True, check=True)
    assert "devices" in helped.stdout
