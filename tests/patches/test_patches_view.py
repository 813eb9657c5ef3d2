"""`draco devices` over the shipped examples: patched values, patchedBy, error records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from operators.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "examples" / "cluster.yaml"
PATCHES = ROOT / "examples" / "patches.yaml"


def devices_json(capsys: pytest.CaptureFixture[str], *files: Path) -> dict[str, Any]:
    argv = ["devices", "-o", "json"]
    for f in files:
        argv += ["--from", str(f)]
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def by_id(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f"{d['driver']}/{d['pool']}/{d['device']}": d for d in doc["devices"]}


def test_example_patches_shape_the_device_view(capsys: pytest.CaptureFixture[str]) -> None:
    doc = devices_json(capsys, CLUSTER, PATCHES)
    devices = by_id(doc)
    h100 = devices["gpu.example.com/node-a/gpu-0"]
    assert h100["attributes"]["example.com/family"] == {"string": "hopper"}
    assert "gpu.example.com/uuid" not in h100["attributes"]  # removed by null
    assert h100["patchedBy"] == ["gpu-class-rack", "hopper-family"]
    a100 = devices["gpu.example.com/node-b/gpu-0"]
    assert a100["capacity"]["gpu.example.com/memory"] == {"value": "20Gi"}
    assert a100["attributes"]["example.com/maintenance"] == {"bool": True}
    assert a100["patchedBy"] == ["gpu-class-rack", "node-b-maintenance"]
    fpga = devices["accel.example.com/rack-1/fpga-0"]
    assert fpga["patchedBy"] == []
    assert doc["errors"] == []


def test_faulty_patches_appear_in_the_errors_list(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    faulty = [
        {"apiVersion": "resource.draco.dev/v1alpha1", "kind": "ResourceSlicePatch",
         "metadata": {"name": "bad-cel"},
         "spec": {"devices": {"filter": {"selectors": [
             {"cel": {"expression": 'device.attributes["gpu.example.com"].memory > 1'}}]},
             "attributes": {"example.com/x": {"int": 1}}}}},
        {"apiVersion": "resource.draco.dev/v1alpha1", "kind": "ResourceSlicePatch",
         "metadata": {"name": "bad-syntax"},
         "spec": {"devices": {"filter": {"selectors": [{"cel": {"expression": "device."}}]}}}},
        {"apiVersion": "resource.draco.dev/v1alpha1", "kind": "ResourceSlicePatch",
         "metadata": {"name": "no-class"},
         "spec": {"devices": {"filter": {"deviceClassName": "nope"}}}},
        {"apiVersion": "resource.draco.dev/v1alpha1", "kind": "ResourceSlicePatch",
         "metadata": {"name": "short-name"},
         "spec": {"devices": {"attributes": {"model": {"string": "x"}}}}},
    ]
    path = tmp_path / "faulty.yaml"
    path.write_text(yaml.safe_dump_all(faulty))
    doc = devices_json(capsys, CLUSTER, path)
    errors = {e["object"]: e["message"] for e in doc["errors"]}
    assert set(errors) == {"ResourceSlicePatch/bad-cel", "ResourceSlicePatch/bad-syntax",
                           "ResourceSlicePatch/no-class", "ResourceSlicePatch/short-name"}
    assert errors["ResourceSlicePatch/bad-cel"].startswith(
        'selector `device.attributes["gpu.example.com"].memory > 1` failed on 5 devices '
        "(accel.example.com/rack-1/fpga-0, gpu.example.com/node-a/gpu-0, "
        "gpu.example.com/node-a/gpu-1 and 2 more)")
    assert "does not compile" in errors["ResourceSlicePatch/bad-syntax"]
    assert errors["ResourceSlicePatch/no-class"] == (
        "DeviceClass 'nope' does not exist, the patch matches nothing")
    assert "must be fully qualified" in errors["ResourceSlicePatch/short-name"]
    assert all(d["patchedBy"] == [] for d in doc["devices"])
