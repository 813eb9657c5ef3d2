"""The README's live flow, run literally: embedded API server, kubectl, `draco run`, a
rule, `kubectl wait` — and the pod that used the tainted device is gone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from operators.apiserver.runner import free_port
from operators.apiserver.testing import kubectl_binary

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

# The README's commands after `draco apiserver … &` and `export KUBECONFIG=…`, verbatim.
LIVE_FLOW = [
    "kubectl apply -f examples/cluster.yaml",
    "sh examples/schedule.sh",
    "draco taint driver=gpu.example.com,pool=node-a,device=gpu-0 "
    "example.com/maintenance=planned:NoExecute --yes --name gpu-0-maintenance",
    "kubectl wait --for=condition=EvictionInProgress=false devicetaintrule/gpu-0-maintenance --timeout=60s",
]


def _stop(proc: subprocess.Popen[str]) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait(5)
    return proc.returncode


def test_readme_live_flow_evicts_the_pod(tmp_path: Path) -> None:
    port = free_port()
    kubeconfig = tmp_path / "draco.kubeconfig"
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "KUBECACHEDIR": str(tmp_path / "cache"),
           "PATH": os.pathsep.join([str(BIN), str(Path(kubectl_binary()).parent), os.environ["PATH"]])}

    def sh(command: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(command, shell=True, cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=timeout)
        assert proc.returncode == 0, f"{command}\n{proc.stdout}\n{proc.stderr}"
        return proc

    server = subprocess.Popen(
        ["draco", "apiserver", "--port", str(port), "--kubeconfig-out", str(kubeconfig)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    operator: subprocess.Popen[str] | None = None
    log = tmp_path / "run.log"
    try:
        assert server.stdout is not None
        first = server.stdout.readline()
        assert first.startswith(f"draco apiserver listening on http://127.0.0.1:{port}"), first
        sh(LIVE_FLOW[0])
        sh(LIVE_FLOW[1])
        with log.open("w") as sink:
            operator = subprocess.Popen(["draco", "run"], cwd=ROOT, env=env, stdout=sink,
                                        stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 30
        while "draco starting" not in log.read_text() and time.monotonic() < deadline:
            assert operator.poll() is None, log.read_text()
            time.sleep(0.1)
        created = sh(LIVE_FLOW[2])
        assert "team-a/trainer-0" in created.stdout
        assert "condition met" in sh(LIVE_FLOW[3]).stdout
        assert sh("kubectl get pods -n team-a -o name").stdout.strip() == ""
    finally:
        if operator is not None:
            _stop(operator)
        assert _stop(server) == 0
    # Not a terminal, so every line is JSON, the startup line first among draco's.
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    start = next(line for line in lines if line["event"] == "draco starting")
    assert start["server"] == f"http://127.0.0.1:{port}"
    assert start["controllers"] == ["eviction", "patches", "allocator", "narrowing", "health"] and start["version"]
    assert any(line["event"] == "evicted pod" and line.get("name") == "trainer-0" for line in lines)
