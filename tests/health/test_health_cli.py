"""`draco health --from`: the policy's preview from files, as the controller would act."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from operators.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = [str(ROOT / "examples" / "health-cluster.yaml"), str(ROOT / "examples" / "health.yaml")]


def run(capsys: pytest.CaptureFixture[str], *args: str) -> dict:  # type: ignore[type-arg]
    assert main(["health", *args, "-o", "json"]) == 0
    return dict(json.loads(capsys.readouterr().out))


def test_the_example_policy_taints_the_fatal_xid_and_waits_for_the_kubelets_report(
        capsys: pytest.CaptureFixture[str]) -> None:
    doc = run(capsys, "--from", EXAMPLES[0], "--from", EXAMPLES[1], "--now", "2026-11-26T10:00:00Z")
    status = doc["policies"]["nvidia-gpus"]
    assert [(d["device"], d["state"], d["signal"]) for d in status["devices"]] == [
        ("gpu-0", "Tainted", "gpu.nvidia.com/xid=79"),  # NoSchedule: fatal, held since 09:50
        ("gpu-3", "Pending", "pod health Unhealthy")]  # `for: 30s` from now
    assert status["create"] == ["gpu.nvidia.com/node-a/gpu-0"]  # gpu-1's XID 13 is not fatal (None)


def test_past_max_unavailable_a_second_fatal_gpu_is_held_back(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    docs = list(yaml.safe_load_all((ROOT / "examples" / "health-cluster.yaml").read_text()))
    docs[0]["spec"]["devices"][1]["taints"][0]["effect"] = "NoSchedule"  # gpu-1's XID turns fatal
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all(docs))
    doc = run(capsys, "--from", str(tmp_path / "cluster.yaml"), "--from", EXAMPLES[1], "--now", "2026-11-26T10:00:31Z")
    status = doc["policies"]["nvidia-gpus"]
    assert [(d["device"], d["state"]) for d in status["devices"]] == [
        ("gpu-0", "Tainted"), ("gpu-1", "HeldBack"), ("gpu-3", "Pending")]
    assert status["conditions"][0]["status"] == "True"  # Throttled: 10% of 4 GPUs is one


def test_a_policy_draco_cannot_read_is_left_out_saying_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = yaml.safe_load((ROOT / "examples" / "health.yaml").read_text())
    bad["spec"]["signals"].append({"smoke": {}})
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(bad))
    doc = run(capsys, "--from", EXAMPLES[0], "--from", str(tmp_path / "bad.yaml"))
    assert doc["policies"] == {}
    assert "spec.signals[3]" in doc["errors"][0] and "unknown signal type 'smoke'" in doc["errors"][0]


def test_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["health", "--from", EXAMPLES[0], "--from", EXAMPLES[1], "--now", "2026-11-26T10:00:00Z"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["POLICY", "DEVICE", "STATE", "SIGNAL", "UNTIL"]
    assert "nvidia-gpus: 4 selected, 1 tainted, 1 pending, 0 held back" in out


def test_devices_show_each_devices_health_and_its_rule(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["devices", "--from", EXAMPLES[0], "--from", EXAMPLES[1], "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    health = {d["device"]: d["health"] for d in doc["devices"]}
    assert health["gpu-2"] == [] and health["gpu-1"] == []  # gpu-1's XID 13 is not fatal
    assert [h["signal"] for h in health["gpu-0"]] == ["gpu.nvidia.com/xid=79"]
    assert [h["signal"] for h in health["gpu-3"]] == ["pod health Unhealthy"]
    assert doc["errors"] == []
    assert main(["devices", "--from", EXAMPLES[0]]) == 0  # no policy: no column
    assert "HEALTH" not in capsys.readouterr().out
