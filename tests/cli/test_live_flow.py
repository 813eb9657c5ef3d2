"""The CLI guide's live flow, run as the page shows it: embedded API server, kubectl,
`draco run`, a rule, `kubectl wait` — and the pod that used the tainted device is gone.

The commands are read from docs/cli-guide.md (the `sh` block under `draco apiserver`),
so the page cannot show a flow that does not work."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from operators.apiserver.runner import free_port
from operators.apiserver.testing import kubectl_binary

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
GUIDE = ROOT / "docs" / "cli-guide.md"


def live_flow() -> list[str]:
    """The flow's command lines as the guide shows them, trailing `# comments` dropped."""
    blocks = re.findall(r"^```sh\n(.*?)^```", GUIDE.read_text(), re.S | re.M)
    flow = [b for b in blocks if b.startswith("draco apiserver ")]
    assert len(flow) == 1, "docs/cli-guide.md: no (or more than one) sh block starting with `draco apiserver`"
    return [re.sub(r"\s+#.*$", "", line).strip() for line in flow[0].splitlines() if line.strip()]


def test_the_guide_shows_the_whole_flow() -> None:
    """What the live test relies on: the server and the operator in the background, then
    the cluster, the scheduling stand-in, the rule, the wait and the check, in this order."""
    flow = live_flow()
    assert flow[0] == "draco apiserver --port 6443 --kubeconfig-out draco.kubeconfig &"
    assert flow[1] == "export KUBECONFIG=$PWD/draco.kubeconfig"
    order = ["kubectl apply -f examples/cluster.yaml", "sh examples/schedule.sh", "draco run &",
             "draco taint ", "kubectl wait --for=condition=EvictionInProgress=false", "kubectl get pods -n team-a"]
    assert [next(i for i, line in enumerate(flow) if line.startswith(step)) for step in order] == \
        list(range(2, 2 + len(order)))
    assert len(flow) == 2 + len(order)


def _stop(proc: subprocess.Popen[str]) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait(5)
    return proc.returncode


def test_the_guides_live_flow_evicts_the_pod(tmp_path: Path) -> None:
    flow = live_flow()
    port = free_port()
    kubeconfig = tmp_path / "draco.kubeconfig"
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "KUBECACHEDIR": str(tmp_path / "cache"),
           "PATH": os.pathsep.join([str(BIN), str(Path(kubectl_binary()).parent), os.environ["PATH"]])}

    def sh(command: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(command, shell=True, cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=timeout)
        assert proc.returncode == 0, f"{command}\n{proc.stdout}\n{proc.stderr}"
        return proc

    # The server as the guide starts it, on a free port and with the kubeconfig in tmp_path
    # (the guide's `export KUBECONFIG=$PWD/draco.kubeconfig` is `env` above).
    argv = shlex.split(flow[0].removesuffix("&"))
    argv[argv.index("--port") + 1] = str(port)
    argv[argv.index("--kubeconfig-out") + 1] = str(kubeconfig)
    server = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
    operator: subprocess.Popen[str] | None = None
    log = tmp_path / "run.log"
    checked: list[str] = []
    try:
        assert server.stdout is not None
        first = server.stdout.readline()
        assert first.startswith(f"draco apiserver listening on http://127.0.0.1:{port}"), first
        for line in flow[2:]:
            if line == "draco run &":
                with log.open("w") as sink:
                    operator = subprocess.Popen(shlex.split(line.removesuffix("&")), cwd=ROOT, env=env,
                                                stdout=sink, stderr=subprocess.STDOUT, text=True)
                deadline = time.monotonic() + 30
                while "draco starting" not in log.read_text() and time.monotonic() < deadline:
                    assert operator.poll() is None, log.read_text()
                    time.sleep(0.1)
                continue
            done = sh(line)
            if line.startswith("draco taint "):
                assert "team-a/trainer-0" in done.stdout, done.stdout
                checked.append("taint")
            elif line.startswith("kubectl wait "):
                assert "condition met" in done.stdout, done.stdout
                checked.append("wait")
            elif line.startswith("kubectl get pods -n team-a"):
                assert done.stdout.strip() == "" and "No resources found" in done.stderr, done
                checked.append("gone")
    finally:
        if operator is not None:
            _stop(operator)
        assert _stop(server) == 0
    assert checked == ["taint", "wait", "gone"]
    # Not a terminal, so every line is JSON, the startup line first among draco's.
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    start = next(line for line in lines if line["event"] == "draco starting")
    assert start["server"] == f"http://127.0.0.1:{port}"
    assert start["controllers"] == ["eviction", "patches", "allocator", "narrowing", "health"] and start["version"]
    assert any(line["event"] == "evicted pod" and line.get("name") == "trainer-0" for line in lines)
