"""`draco allocate --gang` and `draco devices` as a user runs them: the real command line
on a `--from` file, its JSON contract, its errors, and the gang's devices in the view."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from operators.cli.devices import device_document
from operators.cli.main import main
from operators.cli.state import build_tracker
from tests.gangs.test_gang_placement import WHOLE_OR_HALF, partitioned_node
from tests.gangs.world import allocated_on, classes, gang, gpus, member, node, node_slice


def draco(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "operators", *args], capture_output=True,
                          text=True, timeout=120, check=False)


def write(tmp_path: Path, objs: list[dict[str, Any]]) -> str:
    path = tmp_path / "world.yaml"
    path.write_text(yaml.safe_dump_all(objs))
    return str(path)


def test_the_json_contract_of_a_placed_gang(tmp_path: Path) -> None:
    objs = [*classes(), node("node-1"), *partitioned_node("node-1"), gang("g", 2),
            *member("p-0", "g", WHOLE_OR_HALF), *member("p-1", "g", WHOLE_OR_HALF)]
    done = draco("allocate", "--gang", "default/g", "--from", write(tmp_path, objs), "-o", "json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["status"] == "allocated" and doc["reason"] is None and doc["domain"] is None
    assert set(doc["members"]) == {"default/p-0", "default/p-1"}
    for pod, claims in doc["members"].items():
        (results,) = claims.values()
        assert list(claims) == [f"{pod.split('/')[1]}-claim"]
        assert [set(r) for r in results] == [{"request", "driver", "pool", "device"}]
        assert results[0]["request"] == "gpu/half" and results[0]["pool"] == "node-1"
    table = draco("allocate", "--gang", "default/g", "--from", write(tmp_path, objs))
    assert "Gang default/g: allocated" in table.stdout and "half-a" in table.stdout


def test_an_unsatisfiable_gang_is_a_result_not_an_error(tmp_path: Path) -> None:
    objs = [*classes(), node("n-1"), *node_slice("n-1", gpus(1)), gang("g", 2),
            *member("p-0", "g", [{"name": "gpu", "class": "class-a"}]),
            *member("p-1", "g", [{"name": "gpu", "class": "class-a"}])]
    done = draco("allocate", "--gang", "default/g", "--from", write(tmp_path, objs), "-o", "json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["status"] == "unsatisfiable" and doc["members"] == {} and doc["domain"] is None
    assert "needs 2 free devices across the gang, the domain has 1" in doc["reason"]


def test_bad_input_is_a_clear_error_without_a_traceback(tmp_path: Path) -> None:
    bad = gang("g", 2)
    bad["spec"]["topology"] = {"nodeLabel": "rack", "sameSwitch": True}
    done = draco("allocate", "--gang", "default/g", "--from", write(tmp_path, [bad]))
    assert done.returncode != 0
    assert "Gang default/g spec.topology: unknown field 'sameSwitch'" in done.stderr
    assert "Traceback" not in done.stderr
    both = draco("allocate", "--gang", "default/g", "--claim", "default/c", "--from",
                 write(tmp_path, [gang("g", 1)]))
    assert both.returncode != 0 and "--gang places the whole gang" in both.stderr
    no_ns = draco("allocate", "--gang", "g", "--from", write(tmp_path, [gang("g", 1)]))
    assert no_ns.returncode != 0 and "NAMESPACE/NAME" in no_ns.stderr


def test_draco_devices_shows_what_a_gang_holds() -> None:
    objs = [*classes(), node("n-1"), *node_slice("n-1", gpus(2)), gang("g", 2),
            *member("p-0", "g", [{"name": "gpu", "class": "class-a"}],
                    allocation=allocated_on("n-1", "gpu-0"), node_name="n-1"),
            *member("p-1", "g", [{"name": "gpu", "class": "class-a"}])]
    doc = device_document(build_tracker(objs))
    by_name = {d["device"]: d for d in doc["devices"]}
    assert by_name["gpu-0"]["gang"] == "Gang default/g"
    assert "gang" not in by_name["gpu-1"]
    assert doc["gangs"] == {"Gang default/g": {
        "minCount": 2, "members": ["default/p-0", "default/p-1"],
        "devices": ["driver-a/n-1/gpu-0"]}}


def test_a_claim_reserved_for_a_podgroup_counts_as_its_members(
        capsys: pytest.CaptureFixture[str]) -> None:
    """KEP-5729: upstream accepts a PodGroup's reservation for the pods naming that group
    (resourceclaim.IsReservedForPod in 1.37): draco evicts them for the claim's tainted
    device, and shows the device held by the PodGroup."""
    world = str(Path(__file__).with_name("podgroup_reserved.yaml"))
    assert main(["evictions", "--from", world, "--now", "2026-11-28T00:00:00Z", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["evict"] == ["ns/m0"]
    assert main(["devices", "--from", world, "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["gangs"]["PodGroup ns/pg"]["devices"] == ["gpu.example.com/n1/g0"]
    assert {d["device"]: d.get("gang") for d in doc["devices"]} == {"g0": "PodGroup ns/pg", "g1": None}
