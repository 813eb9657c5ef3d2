"""`hack/cluster up --real-node` and `down`: twice in a row, and after a killed run,
with a real container running each time, and nothing left on the machine after `down`.

Needs root, as CI has; the real node is one per machine, and this test owns it while it
runs (pytest runs the modules one after another)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from operators.apiserver.testing import wait_for
from tests.e2e.backends import HACK_CLUSTER

pytestmark = [pytest.mark.real, pytest.mark.timeout(600)]

NODE_DIR = Path("/var/lib/draco-node")
PROCESSES = ("dra-test-driver", "kube-proxy", "kubelet", "containerd", "kwok", "kube-scheduler",
             "kube-controller-manager", "kube-apiserver", "etcd")


def hack(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(HACK_CLUSTER), *args], capture_output=True, text=True, timeout=600,
                          stdin=subprocess.DEVNULL)


def leftovers() -> list[str]:
    """Whatever of a real node is on this machine now."""
    found = []
    if NODE_DIR.exists():
        found.append(str(NODE_DIR))
    if subprocess.run(["ip", "link", "show", "draco0"], capture_output=True).returncode == 0:
        found.append("bridge draco0")
    found += [str(p) for p in Path("/sys/fs/cgroup").glob("*/kubepods")]
    for table in ("filter", "nat", "mangle") if shutil.which("iptables") else ():  # `up` installs it
        rules = subprocess.run(["iptables", "-w", "-t", table, "-S"], capture_output=True, text=True).stdout
        found += [f"{table}: {line}" for line in rules.splitlines() if "KUBE-" in line]
    found += [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()
              if str(NODE_DIR) in line.split()[1]]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if str(NODE_DIR).encode() in b" ".join(argv) and os.path.basename(argv[0]) != b"sh":
                found.append(f"process {entry.name}: {argv[0].decode(errors='replace')}")
    shims = Path("/run/containerd/s")
    if shims.exists():
        found += [str(p) for p in shims.iterdir()] or [str(shims)]
    return found


def kubectl(directory: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    info = json.loads((directory / "cluster.json").read_text())
    return subprocess.run([info["kubectl"], "--kubeconfig", info["kubeconfig"], *args], input=stdin,
                          capture_output=True, text=True, timeout=60)


def run_a_container(directory: Path) -> None:
    """A pod of the pause image on the real node, Running: containerd, runc, the CNI
    bridge and the kubelet all did their part."""
    wait_for(lambda: kubectl(directory, "get", "serviceaccount", "default").returncode == 0, 30,
             what="the default ServiceAccount (ServiceAccount admission is on)")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pause", "namespace": "default"},
           "spec": {"tolerations": [{"key": "draco.dev/real-node", "operator": "Exists"}],
                    "nodeSelector": {"draco.dev/real-node": "true"},
                    "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10.1",
                                    "imagePullPolicy": "Never"}]}}
    created = kubectl(directory, "apply", "-f", "-", stdin=json.dumps(pod))
    assert created.returncode == 0, created.stderr
    waited = kubectl(directory, "wait", "--for=condition=Ready", "pod/pause", "--timeout=60s")
    assert waited.returncode == 0, waited.stderr + kubectl(directory, "describe", "pod", "pause").stdout


def test_up_and_down_twice_in_a_row_then_after_a_killed_run_leave_nothing(tmp_path: Path) -> None:
    assert leftovers() == [], "the machine has a real node's leftovers before the test"
    made = [tmp_path / name for name in ("first", "second", "killed", "after")]
    try:
        cycles(tmp_path)
    finally:  # whatever failed, the machine's one real node is not left running
        for directory in made:
            if directory.exists():
                hack("down", "--dir", str(directory))
    assert leftovers() == []


def cycles(tmp_path: Path) -> None:
    for round_ in ("first", "second"):
        directory = tmp_path / round_
        started = time.monotonic()
        up = hack("up", "--k8s", "1.37", "--dir", str(directory), "--nodes", "0", "--real-node")
        assert up.returncode == 0, up.stderr
        assert json.loads((directory / "cluster.json").read_text())["real_node"]["name"] == "real-0"
        run_a_container(directory)
        assert time.monotonic() - started < 120
        down = hack("down", "--dir", str(directory))
        assert down.returncode == 0, down.stderr
        assert leftovers() == [], f"left after the {round_} down"
        again = hack("down", "--dir", str(directory))
        assert again.returncode == 0 and leftovers() == [], again.stderr
    # a run killed outright (SIGKILL to every process it started, containers left running)
    killed = tmp_path / "killed"
    up = hack("up", "--k8s", "1.37", "--dir", str(killed), "--nodes", "0", "--real-node")
    assert up.returncode == 0, up.stderr
    run_a_container(killed)
    for name in PROCESSES:
        os.kill(int((killed / f"{name}.pid").read_text()), signal.SIGKILL)
    # another cluster's `down` leaves the machine's real node to its owner
    other = tmp_path / "other"
    other.mkdir()
    assert hack("down", "--dir", str(other)).returncode == 0
    assert NODE_DIR.exists()
    after = tmp_path / "after"
    up = hack("up", "--k8s", "1.37", "--dir", str(after), "--nodes", "0", "--real-node")
    assert up.returncode == 0, up.stderr
    run_a_container(after)
    for directory in (after, killed):
        down = hack("down", "--dir", str(directory))
        assert down.returncode == 0, down.stderr
