"""`draco allocate --workload` as a program runs it: the real command line on a `--from`
file holding a Workload and its cluster, its exact JSON contract, the table, and the
errors for bad usage and unreadable input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from operators.cli.main import main
from tests.admission.kueue import gpu_template, hosts, pod_set, workload
from tests.gangs.world import classes, gpus, node, node_slice


def draco(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "operators", *args], capture_output=True,
                          text=True, timeout=120, check=False)


def write(tmp_path: Path, objs: list[dict[str, Any]]) -> str:
    path = tmp_path / "world.yaml"
    path.write_text(yaml.safe_dump_all(objs))
    return str(path)


def cluster() -> list[dict[str, Any]]:
    return [*classes(), node("n-1"), *node_slice("n-1", gpus(2)), node("n-2"), *node_slice("n-2", gpus(1)),
            gpu_template()]


def test_the_json_contract_of_a_ready_workload(tmp_path: Path) -> None:
    objs = [*cluster(), workload("w", [pod_set("launcher", 1),
                                       pod_set("workers", 2, templates={"gpu": "gpu"})])]
    done = draco("allocate", "--workload", "default/w", "--from", write(tmp_path, objs), "-o", "json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert list(doc) == ["status", "message", "members", "podSetUpdates"]
    assert doc["status"] == "ready" and doc["message"] == "devices reserved for 3 pods"
    assert doc["members"]["launcher"] == {"0": {}}
    assert sorted(doc["members"]["workers"]) == ["0", "1"]
    for claims in doc["members"]["workers"].values():
        assert list(claims) == ["gpu"]
        (result,) = claims["gpu"]
        assert set(result) == {"request", "driver", "pool", "device"} and result["request"] == "gpu"
    assert doc["podSetUpdates"] == [
        {"name": "launcher", "annotations": {"resource.draco.dev/workload": "w"}},
        {"name": "workers", "annotations": {"resource.draco.dev/workload": "w"}}]


def test_the_table(tmp_path: Path, capsys: Any) -> None:
    objs = [*cluster(), workload("w", [pod_set("workers", 2, templates={"gpu": "gpu"})])]
    assert main(["allocate", "--workload", "default/w", "--from", write(tmp_path, objs)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Workload: ready\n  devices reserved for 2 pods\n")
    assert "workers" in out and "gpu=n-1/gpu-0" in out


def test_retry_and_rejected_are_results_not_errors(tmp_path: Path, capsys: Any) -> None:
    tas = workload("w", [pod_set("workers", 2, templates={"gpu": "gpu"})],
                   assignments={"workers": hosts(("n-2", 2))})
    assert main(["allocate", "--workload", "default/w", "--from", write(tmp_path, [*cluster(), tas]),
                 "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["status"] == "retry" and doc["members"] == {} and doc["podSetUpdates"] == []
    assert doc["message"].startswith("the devices do not fit the nodes TAS assigned")
    big = workload("w", [pod_set("workers", 4, templates={"gpu": "gpu"})])
    assert main(["allocate", "--workload", "default/w", "--from", write(tmp_path, [*cluster(), big]),
                 "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["status"] == "rejected" and "can never fit" in doc["message"]


def test_bad_usage_and_input_are_clear_errors(tmp_path: Path, capsys: Any) -> None:
    world = write(tmp_path, [*cluster(), workload("w", [pod_set("a", 1)])])

    def error(*args: str) -> str:
        try:
            code = main(["allocate", *args])
        except SystemExit as exc:  # argparse's own usage errors
            code = int(exc.code or 0)
        assert code != 0
        err = capsys.readouterr().err
        assert "Traceback" not in err
        return str(err)

    assert "--workload decides for the whole Workload" in error(
        "--workload", "default/w", "--claim", "default/c", "--from", world)
    assert "no Workload default/x in the input" in error("--workload", "default/x", "--from", world)
    bad = workload("w", [pod_set("a", 1)])
    bad["spec"]["podSets"][0]["count"] = -1
    assert "Workload default/w spec.podSets[0].count: must be at least 0, not -1" in error(
        "--workload", "default/w", "--from", write(tmp_path, [bad]))
    assert "NAMESPACE/NAME" in error("--workload", "w", "--from", world)
