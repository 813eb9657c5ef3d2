"""The processes the chaos run starts and kills: `draco run --leader-elect` replicas (each
as a ServiceAccount of its own, so the audit log says which one sent a request) and,
once, the cluster's kube-apiserver, restarted from `hack/cluster`'s pid and log files
with the command line it runs with."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import yaml

from operators.apiserver.runner import free_port
from tests.e2e.backends import ROOT, Backend

# A failover in seconds, not the chart's 15 s: lease 4 s, renew deadline 3 s, retry 1 s.
LEASE_S, RENEW_S, RETRY_S = 4, 3, 1
FAST_LEASE = ["--leader-elect-lease-duration", str(LEASE_S), "--leader-elect-renew-deadline", str(RENEW_S),
              "--leader-elect-retry-period", str(RETRY_S)]
METRIC = re.compile(r'^(?P<name>[a-z_]+)(?:\{(?P<labels>[^}]*)\})? (?P<value>\S+)$')


class Replica:
    """One replica slot (`draco-a`, `draco-b`): a process per life, a new candidate
    identity (`<slot>-<life>_<suffix>`) after every restart, as a restarted pod has."""

    def __init__(self, b: Backend, name: str, workdir: Path, extra: list[str]) -> None:
        self.b = b
        self.name = name
        self.workdir = workdir
        self.extra = extra
        self.user = f"system:serviceaccount:{b.ns}:{name}"
        self.binding = f"draco-chaos-{b.ns}-{name}"
        self.lives = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.health = self.metrics = 0
        self.started_at = 0.0
        b.create(f"/api/v1/namespaces/{b.ns}/serviceaccounts", {
            "apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}})
        b.create("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": self.binding},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": b.ns}]})
        token = b.create(f"/api/v1/namespaces/{b.ns}/serviceaccounts/{name}/token", {
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"expirationSeconds": 7200}})["status"]["token"]
        self.kubeconfig = workdir / f"{name}.kubeconfig"
        ca = getattr(getattr(b, "cluster", None), "dir", workdir) / "pki" / "ca.crt"
        self.kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "draco",
            "clusters": [{"name": "c", "cluster": {"server": b.url, "certificate-authority": str(ca)}}],
            "users": [{"name": name, "user": {"token": token}}],
            "contexts": [{"name": "draco", "context": {"cluster": "c", "user": name}}]}))

    @property
    def life(self) -> str:
        return f"{self.name}-{self.lives}"

    @property
    def log(self) -> Path:
        return self.workdir / f"{self.life}.log"

    def start(self) -> None:
        self.lives += 1
        self.health, self.metrics = free_port(), free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("DRACO_")}
        env.update({"KUBECONFIG": str(self.kubeconfig), "POD_NAME": self.life, "PYTHONUNBUFFERED": "1"})
        with self.log.open("w") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "operators", "run", "--leader-elect", "--leader-elect-namespace", self.b.ns,
                 "--preemption", "--health-port", str(self.health), "--health-address", "127.0.0.1",
                 "--metrics-port", str(self.metrics), "--metrics-address", "127.0.0.1",
                 "--log-format", "json", *FAST_LEASE, *self.extra],
                cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        self.started_at = time.monotonic()

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def terminate(self) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            return None

    def _get(self, port: int, path: str, timeout: float = 1.0) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()
        except OSError as exc:
            return 0, str(exc)

    def leading(self) -> bool:
        """Ready as the leader: it holds the Lease and its initial sync is done."""
        if not self.running():
            return False
        code, body = self._get(self.health, "/readyz?verbose")
        return code == 200 and "(leader)" in body

    def scrape(self) -> dict[str, float]:
        """The process's metrics, `name{labels}` -> value (empty when it does not answer)."""
        if not self.running():
            return {}
        code, body = self._get(self.metrics, "/metrics", timeout=2.0)
        if code != 200:
            return {}
        out = {}
        for line in body.splitlines():
            match = METRIC.match(line)
            if match and match["name"].startswith("draco_"):
                with contextlib.suppress(ValueError):
                    out[f"{match['name']}{{{match['labels'] or ''}}}"] = float(match["value"])
        return out

    def tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        self.kill()
        self.b.request("DELETE", f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{self.binding}")


def leader_value(metrics: dict[str, float], ns: str) -> float | None:
    return metrics.get(f'draco_leader{{lease="{ns}/draco"}}')


# --------------------------------------------------------------------------- kube-apiserver

_restarted: list[subprocess.Popen[bytes]] = []  # kept, so that they are reaped when they end


def apiserver_ready(b: Backend) -> bool:
    try:
        with urllib.request.urlopen(urllib.request.Request(b.url + "/readyz"), timeout=3,
                                    context=b.ssl_context or ssl.create_default_context()) as r:
            return r.status == 200
    except (OSError, ValueError):
        return False


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    if stat.rsplit(")", 1)[-1].split()[0] == "Z":
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)
        return True
    return False


def restart_apiserver(cluster_dir: Path, b: Backend, down_for: float = 0.0,
                      timeout: float = 120) -> tuple[float, float]:
    """SIGKILL the cluster's kube-apiserver and, DOWN_FOR seconds later, start it again
    with the command line it ran with (so the same port, certificates, etcd and audit
    log), its output appended to its log and its pid file rewritten, as `hack/cluster up`
    leaves them (so `down` stops the new one). Returns (killed, ready) as
    time.monotonic() moments."""
    pid_file = cluster_dir / "kube-apiserver.pid"
    pid = int(pid_file.read_text().strip())
    argv = [a.decode() for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a]
    assert argv and os.path.basename(argv[0]) == "kube-apiserver", argv
    os.kill(pid, signal.SIGKILL)
    killed = time.monotonic()
    for proc in _restarted:
        if proc.pid == pid:
            proc.wait(10)
    deadline = killed + 20
    while not _gone(pid):
        assert time.monotonic() < deadline, f"kube-apiserver {pid} survived SIGKILL"
        time.sleep(0.05)
    time.sleep(max(0.0, killed + down_for - time.monotonic()))
    with open(cluster_dir / "kube-apiserver.log", "ab") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, cwd=cluster_dir)
    _restarted.append(proc)
    pid_file.write_text(f"{proc.pid}\n")
    deadline = time.monotonic() + timeout
    while not apiserver_ready(b):
        assert proc.poll() is None, f"the restarted kube-apiserver exited {proc.returncode}"
        assert time.monotonic() < deadline, f"the restarted kube-apiserver not ready after {timeout:.0f} s"
        time.sleep(0.2)
    return killed, time.monotonic()


__all__ = ["FAST_LEASE", "LEASE_S", "RENEW_S", "RETRY_S", "Replica", "leader_value", "restart_apiserver"]
