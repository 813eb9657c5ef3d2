"""`draco demo` on the embedded server, run as a user runs it: a subprocess, its
narration, its exit code, its kubeconfig used by the real kubectl."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from operators.apiserver.testing import Kubectl

ROOT = Path(__file__).resolve().parents[2]


def demo(*args: str, env: dict[str, str] | None = None, timeout: float = 90) -> tuple[subprocess.CompletedProcess[str], float]:
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "operators", "demo", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)
    return proc, time.monotonic() - start


def path_after(label: str, out: str) -> Path:
    found = re.search(rf"^  {label}\s+(\S+)", out, re.MULTILINE)
    assert found, f"no {label} line in:\n{out}"
    return Path(found.group(1))


# What the narration must say, step by step, in this order (each line checked against
# the API server by the demo before it is printed).
NARRATED = [
    "[1/8] An example cluster",
    "ok  3 ResourceSlices and 2 DeviceClasses created",
    "ok  status: matchedDevices=2, Faulty=False (NoFaults)",
    "ok  allocated  gpu -> demo-node-a/gpu-0, reserved for inference-0",
    "ok  narrowed   node affinity metadata.name In demo-node-a; draco's gate removed",
    "ok  bound      to demo-node-a by the demo itself: the embedded server has no scheduler",
    "ok  allocated  gpus/a100-pair (the second choice) -> demo-node-b/gpu-0, demo-node-b/gpu-1",
    "ok  narrowed   node affinity metadata.name In demo-node-b",
    "ok  allocated  fpga -> demo-fabric/fpga-0, usable on kubernetes.io/hostname In demo-node-a,demo-node-b",
    "ok  narrowed   node affinity kubernetes.io/hostname In demo-node-a,demo-node-b",
    "$ draco allocate --claim draco-demo/too-big",
    "explain    cannot allocate: request gpus: 1 available, 3 needed",
    "ok  explained, and nothing was written",
    "ok  EvictionInProgress=False NoEffect",
    "1 pod would be evicted in 1 namespace if the effect was NoExecute",
    "$ draco evictions",
    "demo-h100-maintenance   False                  NoEffect   2         1           1      1",
    "ok  evicted    inference-0",
    "ok  untouched  training-0 and etl-0",
    "ok  EvictionInProgress=False Completed: 1 pod evicted since starting the controller.",
    "draco demo passed: 8/8 steps in",
]


def test_the_demo_narrates_every_step_and_finishes_on_its_own() -> None:
    proc, _ = demo()
    out = proc.stdout
    assert proc.returncode == 0, f"{out}\n{proc.stderr}"
    position = 0
    flat = " ".join(out.split())  # narration wraps at 100 columns
    for line in NARRATED:
        found = flat.find(" ".join(line.split()), position)
        assert found >= 0, f"missing, or out of order: {line!r} in\n{out}"
        position = found
    assert "FAILED" not in out and "Traceback" not in out + proc.stderr
    assert proc.stderr == ""
    assert re.search(r"draco's resource use: max RSS \d+ MiB, CPU \d+\.\d s \(\d+\.\d s starting up, "
                     r"controllers \d+\.\d s, API server \d+\.\d s, the demo's checks \d+\.\d s\)\.$", out,
                     re.MULTILINE), out
    assert "controllers  eviction, patches, allocator, narrowing" in out
    # The controllers' logs went to the file the demo names, not to the terminal.
    log = path_after("logs", out).read_text()
    assert '"narrowed and ungated pod"' in log and '"claims allocated and reserved"' in log
    assert "kubectl wait --for=condition=EvictionInProgress=false devicetaintrule/demo-h100-maintenance" in out
    # the draco commands to follow along name a script another terminal (no venv) can run
    follow = next(line for line in out.splitlines() if " devices; " in line)
    script = follow.split()[0]
    assert Path(script).is_absolute() and os.access(script, os.X_OK), follow
    assert follow.strip() == f"{script} devices; {script} allocate; {script} evictions"


def test_a_step_that_does_not_happen_fails_the_demo_with_a_clear_line() -> None:
    # Without the narrowing controller, inference-0 is allocated but never ungated.
    proc, _ = demo(env={"DRACO_DEMO_CONTROLLERS": "eviction,patches,allocator",
                        "DRACO_DEMO_STEP_TIMEOUT": "2"})
    assert proc.returncode == 1, proc.stdout
    assert "ok  allocated  gpu -> demo-node-a/gpu-0" in proc.stdout
    assert ("FAILED  draco's narrowing controller to ungate pod inference-0: did not happen within 2 s; "
            "seen: gates ['resource.draco.dev/allocation']") in proc.stdout
    assert proc.stderr.startswith("error: draco demo failed at step 3/8 (inference-0: one premium GPU): "
                                  "it did not happen as narrated. The controllers' logs: /"), proc.stderr
    assert "[4/8]" not in proc.stdout and "passed" not in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


def test_keep_serves_the_printed_kubeconfig_until_stopped(tmp_path: Path) -> None:
    env = {**os.environ, "DRACO_DEMO_STEPS": "3"}
    proc = subprocess.Popen([sys.executable, "-m", "operators", "demo", "--keep"], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + 60
        while not any(line.startswith("Still running (--keep)") for line in lines):
            assert time.monotonic() < deadline and proc.poll() is None, "".join(lines)
            lines.append(proc.stdout.readline())
        out = "".join(lines)
        assert "draco demo passed: 3/3 steps" in out
        kubeconfig = path_after("kubeconfig", out)
        assert f"export KUBECONFIG={kubeconfig}" in out
        kubectl = Kubectl(kubeconfig)
        shown = kubectl("get", "resourceclaims,pods", "-n", "draco-demo", "-o", "wide").stdout
        assert re.search(r"resourceclaim\S*/inference\s+allocated,reserved", shown), shown
        assert re.search(r"pod/inference-0 .* demo-node-a ", shown), shown
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(30)
    rest = proc.stdout.read() if proc.stdout else ""
    err = proc.stderr.read() if proc.stderr else ""
    assert code == 0, rest + err
    assert "Stopped." in rest and err == ""


def test_cluster_dir_without_a_cluster_is_one_clear_line(tmp_path: Path) -> None:
    proc, _ = demo("--cluster-dir", str(tmp_path))
    assert proc.returncode == 1
    assert proc.stderr == (f"error: draco demo: --cluster-dir {tmp_path}: no kubeconfig there (start a cluster "
                           f"with `hack/cluster up --k8s 1.34 --dir {tmp_path} --nodes 2`)\n")
    missing, _ = demo("--cluster-dir", str(tmp_path / "nowhere"))
    assert missing.returncode == 2
    assert missing.stderr == f"error: --cluster-dir {tmp_path / 'nowhere'}: not a directory\n"
