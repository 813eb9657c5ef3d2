"""`hack/cluster` itself: clusters side by side, a clean stop, clear errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.backends import HACK_CLUSTER, RealCluster

pytestmark = pytest.mark.real


def hack(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(HACK_CLUSTER), *args], capture_output=True, text=True,
                          timeout=600, env=env, stdin=subprocess.DEVNULL)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_second_cluster_runs_beside_the_first_and_stops_cleanly(
        real_cluster: RealCluster, tmp_path: Path) -> None:
    directory = tmp_path / "second"
    up = hack("up", "--k8s", "1.34", "--dir", str(directory), "--nodes", "1")
    assert up.returncode == 0, up.stderr
    assert up.stdout.strip() == str(directory / "kubeconfig")
    try:
        env_file = (directory / "env").read_text()
        assert f"export KUBECONFIG={directory / 'kubeconfig'}" in env_file
        info = json.loads((directory / "cluster.json").read_text())
        assert info["ports"]["apiserver"] != json.loads(
            (real_cluster.dir / "cluster.json").read_text())["ports"]["apiserver"]
        nodes = subprocess.run([info["kubectl"], "--kubeconfig", str(directory / "kubeconfig"),
                                "get", "nodes", "-o", "json"], capture_output=True, text=True,
                               check=True)
        (node,) = json.loads(nodes.stdout)["items"]
        ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}
        assert node["metadata"]["name"] == "node-0" and ready["Ready"] == "True"
        again = hack("up", "--k8s", "1.34", "--dir", str(directory))
        assert again.returncode == 1 and "already runs a cluster" in again.stderr
    finally:
        pids = {p.stem: int(p.read_text()) for p in directory.glob("*.pid")}
        down = hack("down", "--dir", str(directory))
    assert down.returncode == 0, down.stderr
    assert set(pids) == {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler",
                         "kwok"}
    assert not [name for name, pid in pids.items() if alive(pid)]
    assert all((directory / f"{name}.pid").exists() for name in pids)
    # the session's cluster is untouched
    assert real_cluster.url and (real_cluster.dir / "kube-apiserver.pid").exists()
    assert alive(int((real_cluster.dir / "kube-apiserver.pid").read_text()))


def test_without_go_the_build_fails_with_the_reason(tmp_path: Path) -> None:
    python_only = os.path.dirname(sys.executable)  # a PATH with Python and without Go
    env = {**os.environ, "PATH": python_only, "DRACO_CLUSTER_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, str(HACK_CLUSTER), "build", "--k8s", "1.34"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 1
    assert "Go is not installed" in proc.stderr and "Traceback" not in proc.stderr


def test_bad_usage_is_refused() -> None:
    proc = hack("up", "--k8s", "1.20", "--dir", "/tmp/x")
    assert proc.returncode == 2 and "invalid choice" in proc.stderr


def test_a_component_that_does_not_come_up_is_named_with_its_log(tmp_path: Path) -> None:
    directory = tmp_path / "broken"
    up = hack("up", "--k8s", "1.34", "--dir", str(directory), "--nodes", "0",
              "--apiserver-arg=--no-such-flag")
    assert up.returncode == 1 and "Traceback" not in up.stderr
    assert "kube-apiserver exited during start" in up.stderr
    assert "unknown flag: --no-such-flag" in up.stderr  # the tail of its log
    # what had started (etcd) was stopped again
    assert not alive(int((directory / "etcd.pid").read_text()))
