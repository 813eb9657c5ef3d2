"""KEP-3838 narrowing end to end on a real control plane (Kubernetes 1.34): reserved -> ungated.

1,000 pods gated by draco (`resource.draco.dev/allocation`), each with its own
ResourceClaim, wait on 10 kwok nodes; draco runs as a separate process (`draco run
--controllers narrowing`, its defaults). The benchmark plays the allocator: at about 100
claims a second it writes each claim's allocation (devices on one node, `nodeSelector`
pinning that node by `metadata.name`) and `reservedFor` the pod, in one status update.
A pod watch records when each pod is seen without draco's gate. Measured per pod: from the
API server's acknowledgement of that write (the claim is reserved) to the watch event of
the ungated pod; reported as P50 and P99 (target: P50 < 100 ms). kube-scheduler binds the
ungated pods meanwhile and kwok runs them, as in a live cluster.

Runs only when named (`python -m benchmarks --only narrowing_cluster`): it builds and
starts a real cluster with `hack/cluster` (or reuses `DRACO_CLUSTER_DIR`).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from benchmarks.scenarios.cluster import proc_stats
from operators.narrowing import DRACO_GATE
from tests.e2e.backends import ROOT, Backend, RealCluster

EXPLICIT_ONLY = True
NAMESPACE = "bench-narrowing"
DRIVER = "gpu.example.com"
NODES = 10
RATE = 100.0  # reservations per second
PODS = f"/api/v1/namespaces/{NAMESPACE}/pods"
CLAIMS = f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims"


class Client(Backend):
    """The e2e tests' HTTP helper (one connection per request), for setting up."""

    def __init__(self, cluster: RealCluster) -> None:
        self.url = cluster.url
        self.ssl_context = cluster.ssl
        self.ns = NAMESPACE


class Connection:
    """One kept-alive HTTPS connection: the paced writer must not pay a TLS handshake per write."""

    def __init__(self, cluster: RealCluster) -> None:
        url = urlparse(cluster.url)
        self.host, self.port, self.ssl = url.hostname or "127.0.0.1", url.port, cluster.ssl
        self.conn = self._open()

    def _open(self) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(self.host, self.port, context=self.ssl, timeout=30)

    def merge_patch(self, path: str, body: Any) -> int:
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/merge-patch+json", "Accept": "application/json"}
        for attempt in (1, 2):
            try:
                self.conn.request("PATCH", path, data, headers)
                resp = self.conn.getresponse()
                resp.read()
                return resp.status
            except (OSError, http.client.HTTPException):
                if attempt == 2:
                    raise
                self.conn.close()
                self.conn = self._open()
        raise AssertionError("unreachable")

    def close(self) -> None:
        self.conn.close()


def node_of(i: int, nodes: int) -> str:
    return f"node-{i % nodes}"


def make_pod(client: Client, name: str) -> dict[str, Any]:
    client.create(CLAIMS, {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}})
    return client.create(PODS, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"schedulingGates": [{"name": DRACO_GATE}], "terminationGracePeriodSeconds": 0,
                 "resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
                 "containers": [{"name": "c", "image": "registry.invalid/app"}]}})


def reservation(name: str, uid: str, node: str) -> dict[str, Any]:
    """What an allocator writes: the allocation on `node`'s device and the reservation."""
    return {"status": {
        "allocation": {"devices": {"results": [
            {"request": "gpu", "driver": DRIVER, "pool": node, "device": f"gpu-{name}"}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}]}},
        "reservedFor": [{"resource": "pods", "name": name, "uid": uid}]}}


class UngatedWatch:
    """Records the monotonic time each pod is first seen without draco's gate.

    A watch the API server ends (timeouts, a slow reader under load) is resumed from the
    last resourceVersion seen, bookmarks included, so no pod's event is lost.
    """

    def __init__(self, cluster: RealCluster, resource_version: str) -> None:
        self.seen: dict[str, float] = {}
        self.done = threading.Event()
        self.cluster, self.rv = cluster, resource_version
        self.restarts = 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.done.is_set():
            with contextlib.suppress(OSError, http.client.HTTPException, ValueError):
                self._stream()
            if not self.done.is_set():
                self.restarts += 1

    def _stream(self) -> None:
        url = urlparse(self.cluster.url)
        conn = http.client.HTTPSConnection(url.hostname or "127.0.0.1", url.port,
                                           context=self.cluster.ssl, timeout=600)
        conn.request("GET", f"{PODS}?watch=1&allowWatchBookmarks=true&resourceVersion={self.rv}"
                            "&timeoutSeconds=600", headers={"Accept": "application/json"})
        resp = conn.getresponse()
        try:
            while not self.done.is_set():
                line = resp.readline()
                if not line:
                    return
                if not line.strip():
                    continue
                now = time.monotonic()
                event = json.loads(line)
                obj = event.get("object") or {}
                meta = obj.get("metadata") or {}
                if event.get("type") == "ERROR":
                    raise ValueError(f"watch error: {obj.get('message')}")
                self.rv = meta.get("resourceVersion") or self.rv
                name = meta.get("name")
                if event.get("type") == "BOOKMARK" or not name or name in self.seen:
                    continue
                gates = [g.get("name") for g in (obj.get("spec") or {}).get("schedulingGates") or []]
                if DRACO_GATE not in gates:
                    self.seen[name] = now
        finally:
            conn.close()


def wait_for(what: str, check: Any, limit: float) -> None:
    deadline = time.monotonic() + limit
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {limit:.0f} s waiting for {what}")
        time.sleep(0.05)


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of an ascending list."""
    rank = max(1, -(-len(sorted_values) * q // 100))
    return sorted_values[int(rank) - 1]


def measure(cluster: RealCluster, pods: int, nodes: int, workdir: Path) -> dict[str, Any]:
    client = Client(cluster)
    if client.get(f"/api/v1/namespaces/{NAMESPACE}") is not None:  # a reused cluster's last run
        client.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}")
        wait_for("the last run's namespace to go",
                 lambda: client.get(f"/api/v1/namespaces/{NAMESPACE}") is None, 120)
    client.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                         "metadata": {"name": NAMESPACE}})
    names = [f"p-{i:04d}" for i in range(pods)]
    with ThreadPoolExecutor(8) as pool:
        created = list(pool.map(lambda n: make_pod(client, n), ["warmup", *names]))
    uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in created}
    env = {**os.environ, "KUBECONFIG": str(cluster.admin_kubeconfig)}
    log = open(workdir / "draco.log", "w")  # noqa: SIM115 - closed below
    draco = subprocess.Popen([sys.executable, "-m", "operators", "run", "--controllers", "narrowing",
                              "--log-format", "json"], env=env, cwd=ROOT, stdout=log,
                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    conn = Connection(cluster)
    try:
        # draco is up and synced once it ungates a warm-up pod.
        conn.merge_patch(f"{CLAIMS}/warmup/status", reservation("warmup", uids["warmup"], "node-0"))
        wait_for("draco to ungate the warm-up pod", lambda: DRACO_GATE not in [
            g["name"] for g in (client.get(f"{PODS}/warmup") or {})["spec"].get("schedulingGates") or []], 120)
        listed = client.get(PODS) or {}
        watch = UngatedWatch(cluster, listed["metadata"]["resourceVersion"])
        time.sleep(0.5)  # the watch is established
        cpu_before, _ = proc_stats(draco.pid)
        acked: dict[str, float] = {}
        started = time.monotonic()
        for i, name in enumerate(names):
            pause = started + i / RATE - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            code = conn.merge_patch(f"{CLAIMS}/{name}/status", reservation(name, uids[name], node_of(i, nodes)))
            acked[name] = time.monotonic()
            if code != 200:
                raise RuntimeError(f"reserving claim {name} answered {code}")
        writing = time.monotonic() - started
        wait_for(f"all {pods} pods to be ungated", lambda: all(n in watch.seen for n in names), 120)
        cpu_after, rss = proc_stats(draco.pid)
        load = os.getloadavg()[0]
        watch.done.set()
    finally:
        conn.close()
        draco.terminate()
        draco.wait(15)
        log.close()
    latencies = sorted(watch.seen[n] - acked[n] for n in names)
    return {"p50": percentile(latencies, 50), "p99": percentile(latencies, 99),
            "max": latencies[-1], "rate": pods / writing, "cpu_s": cpu_after - cpu_before, "rss": rss,
            "watch_restarts": watch.restarts, "load": load}


def run(quick: bool) -> list[dict[str, Any]]:
    pods = 100 if quick else 1000
    workdir = Path(tempfile.mkdtemp(prefix="draco-bench-narrowing-"))
    cluster = RealCluster.start("1.34", workdir / "cluster-1.34", nodes=NODES)
    try:
        nodes = len((Client(cluster).get("/api/v1/nodes") or {}).get("items") or []) or 1
        m = measure(cluster, pods, nodes, workdir)
    finally:
        if not cluster.owned:
            Client(cluster).request("DELETE", f"/api/v1/namespaces/{NAMESPACE}")
        cluster.stop()
    result = {"scenario": f"narrowing e2e: {pods} pods, claim reserved -> pod ungated, P50",
              "draco_s": m["p50"], "baseline_s": None, "ratio": None,
              "note": (f"P99 {m['p99'] * 1000:.1f} ms, max {m['max'] * 1000:.1f} ms; reservations at "
                       f"{m['rate']:.0f}/s on {nodes} kwok nodes, Kubernetes 1.34; draco "
                       f"{m['cpu_s']:.1f} CPU s, peak RSS {m['rss'] / 2**20:.0f} MiB; watch resumed "
                       f"{m['watch_restarts']}x; load average {m['load']:.1f} on {os.cpu_count()} CPUs; "
                       "target P50 < 100 ms")}
    print(json.dumps({**result, "p99_s": m["p99"], "max_s": m["max"]}), file=sys.stderr)
    return [result]
