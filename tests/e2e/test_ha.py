"""High availability on the real 1.34 cluster: two `draco run --leader-elect` processes.

Each process runs as a ServiceAccount of its own (a TokenRequest token in its
kubeconfig), so the real API server's audit log says which replica sent every request.
The oracle for "no pod evicted twice" is that log, not draco's own account: every
DELETE of a pod (or Eviction) by either replica is counted, whatever its answer.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from operators.apiserver.testing import wait_for
from tests.e2e.backends import ROOT, RealBackend
from tests.e2e.test_eviction import RULES, make_devices, make_pod_with_claim

pytestmark = pytest.mark.real

PODS = 100
FAST_LEASE = ["--leader-elect-lease-duration", "4", "--leader-elect-renew-deadline", "3",
              "--leader-elect-retry-period", "1"]
LEASES = "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Replica:
    """One `python -m operators run` process as its own ServiceAccount."""

    def __init__(self, b: RealBackend, name: str, workdir: Path, extra: list[str]) -> None:
        self.b = b
        self.name = name
        self.user = f"system:serviceaccount:{b.ns}:{name}"
        self.health = free_port()
        self.log = workdir / f"{name}.log"
        self.binding = f"draco-ha-{b.ns}-{name}"
        b.create(f"/api/v1/namespaces/{b.ns}/serviceaccounts", {
            "apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}})
        b.create("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": self.binding},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": b.ns}]})
        token = b.create(f"/api/v1/namespaces/{b.ns}/serviceaccounts/{name}/token", {
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600}})["status"]["token"]
        kubeconfig = workdir / f"{name}.kubeconfig"
        kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "draco",
            "clusters": [{"name": "c", "cluster": {
                "server": b.url, "certificate-authority": str(b.cluster.dir / "pki" / "ca.crt")}}],
            "users": [{"name": name, "user": {"token": token}}],
            "contexts": [{"name": "draco", "context": {"cluster": "c", "user": name}}]}))
        env = {k: v for k, v in os.environ.items() if not k.startswith("DRACO_")}
        env.update({"KUBECONFIG": str(kubeconfig), "POD_NAME": name, "PYTHONUNBUFFERED": "1"})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "operators", "run", "--controllers", "eviction", "--leader-elect",
             "--leader-elect-namespace", b.ns, "--health-port", str(self.health),
             "--health-address", "127.0.0.1", "--log-format", "json", *extra],
            cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=self.log.open("w"), stderr=subprocess.STDOUT)

    def readyz(self) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health}/readyz?verbose", timeout=2) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()
        except OSError as exc:
            return 0, str(exc)

    def logs(self) -> str:
        return self.log.read_text()[-6000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.b.request("DELETE", f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{self.binding}")


@pytest.fixture
def replicas(real: RealBackend, tmp_path: Path) -> Iterator[Any]:
    started: list[Replica] = []

    def start(name: str, extra: list[str]) -> Replica:
        r = Replica(real, name, tmp_path, extra)
        started.append(r)
        return r

    yield start
    for r in started:
        r.stop()


def lease(b: RealBackend) -> dict[str, Any]:
    return ((b.get(f"{LEASES.format(ns=b.ns)}/draco") or {}).get("spec")) or {}


def holder(b: RealBackend) -> str:
    return str(lease(b).get("holderIdentity") or "")


def wait_leading(r: Replica, timeout: float = 60) -> None:
    def leading() -> bool:
        assert r.proc.poll() is None, f"{r.name} exited {r.proc.returncode}:\n{r.logs()}"
        code, body = r.readyz()
        return code == 200 and "(leader)" in body
    wait_for(leading, timeout, 0.1, what=f"{r.name} to lead and be ready")


def audit_events(b: RealBackend, users: set[str]) -> list[dict[str, Any]]:
    out = []
    with b.cluster.audit_log.open() as fh:
        for line in fh:
            if b.ns not in line:
                continue
            event = json.loads(line)
            if event.get("user", {}).get("username") in users and event.get("stage") == "ResponseComplete":
                out.append(event)
    return out


def evictions(events: list[dict[str, Any]], ns: str) -> list[dict[str, Any]]:
    """DELETEs of pods and Evictions (pods/eviction creates) in the namespace."""
    found = []
    for e in events:
        ref = e.get("objectRef") or {}
        if ref.get("resource") != "pods" or ref.get("namespace") != ns or not ref.get("name"):
            continue
        if (e["verb"] == "delete" and not ref.get("subresource")) or (
                e["verb"] == "create" and ref.get("subresource") == "eviction"):
            found.append(e)
    return found


def stamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def test_standby_takes_over_mid_eviction_and_no_pod_is_evicted_twice(
        real: RealBackend, replicas: Any) -> None:
    b = real
    make_devices(b, [f"d{i}" for i in range(PODS)])
    for i in range(PODS):
        make_pod_with_claim(b, f"p{i:03d}", f"d{i}")
    # Slow enough that the eviction is still running when the leader dies.
    slow = ["--qps", "15", "--burst", "1", *FAST_LEASE]
    a = replicas("draco-a", slow)
    wait_leading(a)
    bb = replicas("draco-b", slow)
    wait_for(lambda: bb.readyz()[0] == 200, 60, 0.1, what="the standby to answer /readyz")
    code, body = bb.readyz()
    assert "standby" in body and "(leader)" not in body, body  # Ready, but not acting
    assert holder(b).startswith("draco-a_")

    b.create(RULES, {"apiVersion": "resource.draco.dev/v1alpha1", "kind": "DeviceTaintRule",
                     "metadata": {"name": f"ha-{b.ns}"},
                     "spec": {"deviceSelector": {"driver": "gpu.example.com"},
                              "taint": {"key": "example.com/maintenance", "effect": "NoExecute"}}})
    pods = f"/api/v1/namespaces/{b.ns}/pods"

    def evicted() -> int:
        items = (b.get(pods) or {}).get("items") or []
        return PODS - sum(1 for p in items if not p["metadata"].get("deletionTimestamp"))

    wait_for(lambda: evicted() >= 15, 60, 0.05, what="the leader to evict some pods")
    # The last renewal the test saw before the kill: the standby must wait the lease
    # duration from it (or from a later one).
    seen_renewal = stamp(lease(b)["renewTime"])
    a.proc.send_signal(signal.SIGKILL)
    killed = time.time()
    a.proc.wait(10)
    done_at_kill = evicted()
    assert done_at_kill < PODS, "the eviction finished before the kill: lower --qps"

    wait_for(lambda: holder(b).startswith("draco-b_"), 30, 0.05, what="the standby to take the Lease")
    took_over = time.time()
    spec = lease(b)
    acquired = stamp(spec["acquireTime"])
    assert spec["leaseTransitions"] == 1 and spec["leaseDurationSeconds"] == 4
    assert acquired - seen_renewal >= 4 - 0.05, "taken before the leader's lease had expired"
    # Within the lease duration of the leader's last renewal, plus one jittered retry.
    assert took_over - killed <= 4 + 1 * (1 + 1.2) + 1, f"takeover took {took_over - killed:.1f} s"

    wait_for(lambda: not (b.get(pods) or {}).get("items"), 120, 0.2,
             what=f"every pod to be evicted; standby log:\n{bb.logs()}")
    wait_for(lambda: any(c["type"] == "EvictionInProgress" and c["status"] == "False"
                         for c in ((b.get(f"{RULES}/ha-{b.ns}") or {}).get("status") or {}).get("conditions", [])),
             60, 0.2, what="EvictionInProgress=False from the new leader")
    wait_leading(bb, 10)

    # The audit log: one eviction per pod, each answered 200, A's before the kill, B's
    # after it acquired the Lease (never two replicas acting).
    users = {a.user, bb.user}
    found: list[dict[str, Any]] = []

    def all_logged() -> bool:
        found[:] = evictions(audit_events(b, users), b.ns)
        return len({e["objectRef"]["name"] for e in found}) >= PODS
    wait_for(all_logged, 30, 0.5, what="the audit log to show every eviction")
    per_pod = Counter(e["objectRef"]["name"] for e in found)
    twice = {name: n for name, n in per_pod.items() if n > 1}
    assert not twice, f"pods evicted more than once: {twice}"
    assert set(per_pod) == {f"p{i:03d}" for i in range(PODS)}
    assert {e["responseStatus"]["code"] for e in found} == {200}
    by_a = [e for e in found if e["user"]["username"] == a.user]
    by_b = [e for e in found if e["user"]["username"] == bb.user]
    assert by_a and by_b, (len(by_a), len(by_b))
    assert max(stamp(e["requestReceivedTimestamp"]) for e in by_a) <= killed
    assert min(stamp(e["requestReceivedTimestamp"]) for e in by_b) >= acquired
    # Every request of B's that writes happened after it acquired the Lease.
    writes_b = [e for e in audit_events(b, {bb.user})
                if e["verb"] in ("create", "update", "patch", "delete")
                and (e.get("objectRef") or {}).get("resource") != "leases"]
    assert min(stamp(e["requestReceivedTimestamp"]) for e in writes_b) >= acquired

    bb.proc.send_signal(signal.SIGTERM)
    assert bb.proc.wait(20) == 0, bb.logs()


def test_sigterm_stops_promptly_releases_the_lease_and_the_standby_takes_over_at_once(
        real: RealBackend, replicas: Any) -> None:
    b = real
    # Default durations: a standby that had to wait out the lease would need 15 s.
    a = replicas("draco-a", [])
    wait_leading(a)
    standby = replicas("draco-b", [])
    wait_for(lambda: standby.readyz()[0] == 200, 60, 0.1, what="the standby to answer /readyz")
    time.sleep(1)
    assert holder(b).startswith("draco-a_")
    a.proc.send_signal(signal.SIGTERM)
    sent = time.time()
    assert a.proc.wait(20) == 0, a.logs()
    stopped = time.time() - sent
    assert stopped < 10, f"took {stopped:.1f} s to stop"
    lines = [json.loads(line) for line in a.log.read_text().splitlines() if line.startswith("{")]
    assert any(line.get("event") == "released the leader lease" for line in lines), a.logs()
    wait_for(lambda: holder(b).startswith("draco-b_"), 10, 0.05, what="the standby to take the released Lease")
    took = time.time() - sent
    assert took < 15 - 5, f"the standby waited {took:.1f} s: the Lease was not released"
    wait_leading(standby, 30)
    assert lease(b)["leaseTransitions"] == 1
