"""Load and measurement helpers for the large real-cluster benchmarks.

The e2e tests' HTTP helper opens one TLS connection per request, which caps a Python
client at a few hundred writes a second and spends the benchmark's CPU on handshakes;
creating 20,000 pods that way takes longer than the figures being measured. This module
talks to the API server over kept-alive aiohttp connections, many requests at once,
watches collections the way an informer does (so the benchmark counts the watch events
the API server emits instead of polling lists), and reads the figures of the processes
it compares (draco, kube-scheduler, kube-controller-manager) from /proc. Used by
`cluster_scale` and `eviction_at_size`, whose DRA world it fills (fill_world).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import aiohttp

from tests.e2e.backends import ROOT, RealCluster

if TYPE_CHECKING:
    from concurrent.futures import Executor

T = TypeVar("T")
Event = Mapping[str, Any]


class ApiError(RuntimeError):
    pass


class Api:
    """Kept-alive HTTPS connections to one cluster's API server (127.0.0.1 only)."""

    def __init__(self, cluster: RealCluster, connections: int = 48) -> None:
        if not cluster.url.startswith("https://127.0.0.1:"):
            raise ValueError(f"benchmarks talk to 127.0.0.1 only, not {cluster.url}")
        self.url = cluster.url
        self.cluster_dir: Path | None = cluster.dir
        self.connector = aiohttp.TCPConnector(ssl=cluster.ssl, limit=connections + 8)
        self.session = aiohttp.ClientSession(connector=self.connector, read_bufsize=1 << 20)
        self.limit = connections

    async def close(self) -> None:
        await self.session.close()

    async def call(self, method: str, path: str, body: Any = None,
                   content_type: str = "application/json",
                   ok: tuple[int, ...] = (200, 201, 202)) -> dict[str, Any]:
        data = None if body is None else json.dumps(body)
        for attempt in range(8):  # 429s and 5xx under load are retried, a bounded number of times
            async with self.session.request(
                    method, self.url + path, data=data,
                    headers={"Content-Type": content_type, "Accept": "application/json"},
                    timeout=aiohttp.ClientTimeout(total=120)) as resp:
                raw = await resp.read()
                if resp.status in ok:
                    return dict(json.loads(raw or b"{}"))
                if resp.status in (429, 500, 503, 504) and attempt < 7:
                    await asyncio.sleep(0.2 * 2 ** attempt)
                    continue
                raise ApiError(f"{method} {path} answered {resp.status}: {raw[:500]!r}")
        raise AssertionError("unreachable")

    async def create(self, path: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        return await self.call("POST", path, obj, ok=(201,))

    async def merge_patch(self, path: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        return await self.call("PATCH", path, patch, "application/merge-patch+json", ok=(200,))

    async def delete(self, path: str) -> None:
        await self.call("DELETE", path, ok=(200, 202, 404))

    async def get(self, path: str) -> dict[str, Any] | None:
        try:
            return await self.call("GET", path, ok=(200,))
        except ApiError as err:
            if " answered 404" in str(err):
                return None
            raise

    async def many(self, work: Callable[[T], Awaitable[Any]], items: Iterable[T],
                   concurrency: int | None = None) -> float:
        """Run WORK over ITEMS, at most CONCURRENCY at once; the seconds it took."""
        started = time.monotonic()
        queue = list(items)
        queue.reverse()

        async def worker() -> None:
            while queue:
                await work(queue.pop())

        await asyncio.gather(*(worker() for _ in range(concurrency or self.limit)))
        return time.monotonic() - started


class Watch:
    """A watch on a collection from "now", as an informer runs it: every event goes to
    ON_EVENT with its arrival time, resumed from the last resourceVersion when the API
    server closes the stream. Bounded: it ends with the block, or after LIMIT seconds."""

    def __init__(self, api: Api, path: str, on_event: Callable[[str, dict[str, Any], float], None],
                 limit: float = 3600) -> None:
        self.api = api
        self.path = path
        self.on_event = on_event
        self.limit = limit
        self.events = 0
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Watch:
        sep = "&" if "?" in self.path else "?"
        listed = await self.api.call("GET", f"{self.path}{sep}limit=1")
        rv = str(listed["metadata"]["resourceVersion"])
        self.task = asyncio.create_task(self._run(rv))
        return self

    async def __aexit__(self, *_: object) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task

    async def _run(self, rv: str) -> None:
        sep = "&" if "?" in self.path else "?"
        deadline = time.monotonic() + self.limit
        broken = 0
        try:
            while time.monotonic() < deadline:
                url = (f"{self.api.url}{self.path}{sep}watch=1&allowWatchBookmarks=true"
                       f"&resourceVersion={rv}&timeoutSeconds=300")
                try:
                    async with self.api.session.get(
                            url, timeout=aiohttp.ClientTimeout(total=None, sock_read=330)) as resp:
                        if resp.status != 200:
                            raise ApiError(f"watch {self.path} answered {resp.status}")
                        async for line in resp.content:
                            rv = self._line(line, rv)
                except (TimeoutError, aiohttp.ClientError):
                    broken += 1  # a dropped stream resumes from the last resourceVersion
                    if broken > 20:
                        raise
                    await asyncio.sleep(0.5)
        except Exception as err:
            # a dead watch would otherwise show only as a wait that times out
            print(f"# watch {self.path} failed: {type(err).__name__}: {err}", file=sys.stderr)
            raise

    def _line(self, line: bytes, rv: str) -> str:
        if not line.strip():
            return rv
        event = json.loads(line)
        kind, obj = event["type"], event["object"]
        if kind == "ERROR":  # 410 Gone included: the benchmark's watches are short, never relisted
            raise ApiError(f"watch {self.path}: {obj}")
        if kind != "BOOKMARK":
            self.events += 1
            self.on_event(kind, obj, time.monotonic())
        return str(obj["metadata"]["resourceVersion"])


class PodStates:
    """What a pod watch saw: each pod's phase and node, which are gone, and when."""

    def __init__(self) -> None:
        self.phase: dict[str, str] = {}
        self.node: dict[str, str] = {}
        self.bound_at: dict[str, float] = {}
        self.ungated_at: dict[str, float] = {}  # first seen without scheduling gates
        self.terminating_at: dict[str, float] = {}  # first seen with a deletionTimestamp
        self.deleted: set[str] = set()
        self.events = 0
        self.last_event = time.monotonic()

    def __call__(self, kind: str, obj: dict[str, Any], at: float) -> None:
        name = obj["metadata"]["name"]
        self.events += 1
        self.last_event = at
        if kind == "DELETED":
            self.terminating_at.setdefault(name, at)
            self.deleted.add(name)
            self.phase.pop(name, None)
            return
        self.phase[name] = str((obj.get("status") or {}).get("phase") or "")
        if obj["metadata"].get("deletionTimestamp"):
            self.terminating_at.setdefault(name, at)
        spec = obj.get("spec") or {}
        if not spec.get("schedulingGates"):
            self.ungated_at.setdefault(name, at)
        node = spec.get("nodeName")
        if node:
            self.node[name] = node
            self.bound_at.setdefault(name, at)

    def running(self) -> int:
        return sum(1 for p in self.phase.values() if p == "Running")


async def wait_until(check: Callable[[], bool], limit: float, what: Callable[[], str],
                     step: float = 0.1) -> float:
    """Seconds until CHECK holds; raises after LIMIT seconds, saying WHAT is missing."""
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > limit:
            raise TimeoutError(f"after {limit:.0f} s: {what()}")
        await asyncio.sleep(step)
    return time.monotonic() - started


# --------------------------------------------------------------------------- processes


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def status_bytes(pid: int, field: str) -> int:
    """A size line of /proc/PID/status (VmRSS, VmHWM), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


def rss(pid: int) -> int:
    return status_bytes(pid, "VmRSS")


def mib(size: float) -> str:
    return f"{size / 2**20:.0f} MiB"


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def component_pid(cluster: RealCluster, name: str) -> int:
    """kube-scheduler's or kube-controller-manager's pid, from hack/cluster's pid file."""
    return int((cluster.dir / f"{name}.pid").read_text().strip())


def anchors(cluster: RealCluster) -> dict[str, float]:
    """The RSS (bytes) of the upstream components that watch every pod, right now."""
    return {name: float(rss(component_pid(cluster, name)))
            for name in ("kube-scheduler", "kube-controller-manager")}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Draco:
    """`draco run` as a separate process against CLUSTER, with its readiness endpoint."""

    def __init__(self, cluster: RealCluster, log: Path, controllers: str | None = None) -> None:
        self.cluster = cluster
        self.log_path = log
        self.controllers = controllers
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = 0.0

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    async def start(self, limit: float = 600) -> dict[str, float]:
        """Start it; return the seconds to /readyz 200 and the CPU seconds spent until then."""
        # DRACO_BENCH_DRACO_ROOT: run another checkout's draco (e.g. `git archive HEAD`
        # unpacked), to compare before and after a change in one sitting
        root = Path(os.environ.get("DRACO_BENCH_DRACO_ROOT") or ROOT)
        env = {**os.environ, "KUBECONFIG": str(self.cluster.admin_kubeconfig),
               "PYTHONPATH": str(root)}
        flags = ["--controllers", self.controllers] if self.controllers else []
        with open(self.log_path, "ab") as log:
            self.started = time.monotonic()
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "operators", "run", *flags, "--log-format", "json",
                 "--health-port", str(self.port), "--health-address", "127.0.0.1"],
                env=env, cwd=root, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{self.port}/readyz"
        async with aiohttp.ClientSession() as session:
            while time.monotonic() - self.started < limit:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"draco run exited ({self.proc.returncode}); see {self.log_path}")
                with contextlib.suppress(aiohttp.ClientError, asyncio.TimeoutError):
                    async with session.get(url, timeout=aiohttp.ClientTimeout(total=2)) as resp:
                        if resp.status == 200:
                            return {"ready_s": time.monotonic() - self.started,
                                    "cpu_to_ready_s": cpu_seconds(self.pid)}
                await asyncio.sleep(0.1)
        raise TimeoutError(f"draco not ready after {limit:.0f} s; see {self.log_path}")

    async def idle(self, seconds: float = 20, settle: float = 5) -> float:
        """Percent of one core spent over SECONDS while nothing changes (after SETTLE)."""
        await asyncio.sleep(settle)
        before = cpu_seconds(self.pid)
        await asyncio.sleep(seconds)
        return 100 * (cpu_seconds(self.pid) - before) / seconds

    def cpu(self) -> float:
        return cpu_seconds(self.pid)

    def rss(self) -> int:
        return rss(self.pid)

    def peak(self) -> int:
        return status_bytes(self.pid, "VmHWM")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


async def list_all_pods(cluster: RealCluster) -> float:
    """Seconds for one JSON LIST of every pod from the watch cache: what any client's
    initial sync waits for at least, to tell draco's share of its readiness from the API
    server's."""
    api = Api(cluster, 1)
    try:
        started = time.monotonic()
        await api.call("GET", "/api/v1/pods?resourceVersion=0")
        return time.monotonic() - started
    finally:
        await api.close()


async def cpu_settled(draco: Draco, idle_pct: float, limit: float = 120) -> None:
    """Wait until draco's CPU use falls back to (about) its idle rate: it has worked off
    every event it was sent."""
    started = time.monotonic()
    while time.monotonic() - started < limit:
        before = draco.cpu()
        await asyncio.sleep(1)
        if draco.cpu() - before <= max(0.02, 2 * idle_pct / 100):
            return


def percentile(values: list[float], fraction: float) -> float:
    """The nearest-rank percentile (P99 of 200 values is the 198th smallest)."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * fraction // 1))
    return ordered[int(rank) - 1]


# --------------------------------------------------------------------------- the DRA world
#
# The DRA-at-size world of `eviction_at_size` (the shape of `cluster_scale`'s dra part):
# NODES kwok nodes with one node-local slice of PER_NODE devices each, CLAIMS_PER_NODE
# allocated claims per node reserved for Running pods bound there. The nodes come first
# (they are few); then the writes are split over writer processes, each owning whole
# nodes and keeping many requests in flight (each claim's writes wait on etcd one after
# the other), so every object is written in dependency order within its writer: the
# node's slice, then per claim the claim, its pod bound to the node, the claim's
# allocation and reservation (which need the pod's uid), and the pod's Running status.
# Writing that status ourselves (as kwok's `pod-ready` stage would) takes kwok, which
# plays a few pods at a time, off the path: its stage selects only pods still Pending
# and not Ready.


@dataclasses.dataclass(frozen=True)
class World:
    nodes: int = 2_000
    per_node: int = 8
    claims_per_node: int = 5

    @property
    def claims(self) -> int:
        return self.nodes * self.claims_per_node


def writer_count(cpus: int) -> int:
    """Writer processes for a machine of CPUS cores. A writer's Python (JSON, TLS,
    aiohttp: about 1 CPU ms a write) caps one process near 1,000 writes a second, while the
    API server and etcd, which spend several times that per write, scale over the cores:
    one writer per four cores keeps the client ahead of the server. On 2 to 7 cores that
    is one (measured on 2: a second process only took CPU from the server it waits for),
    4 on 16, at most 8."""
    return max(1, min(8, cpus // 4))


def shards(nodes: int, writers: int) -> list[list[int]]:
    """Node indexes per writer, dealt round-robin so every writer gets nodes of both
    halves of the world (the halves hold different devices) and none is empty."""
    count = max(1, min(writers, nodes))
    return [list(range(k, nodes, count)) for k in range(count)]


def running_status(index: int, now: str) -> dict[str, Any]:
    """A bound pod's status as a kubelet reports it once its one container (`c`) runs;
    the pod IP comes from INDEX (10.128.0.0/9, clear of kwok's 10.244.0.0/16)."""
    ip = f"10.{128 + index // 65536 % 128}.{index // 256 % 256}.{index % 256}"
    ready = [{"type": t, "status": "True", "lastTransitionTime": now}
             for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")]
    return {"status": {
        "phase": "Running", "conditions": ready, "startTime": now,
        "hostIP": "10.1.0.1", "hostIPs": [{"ip": "10.1.0.1"}], "podIP": ip, "podIPs": [{"ip": ip}],
        "containerStatuses": [{"name": "c", "image": "registry.invalid/app", "imageID": "",
                               "ready": True, "started": True, "restartCount": 0,
                               "state": {"running": {"startedAt": now}}}]}}


async def write_shard(api: Api, world: World, nodes: list[int], connections: int) -> dict[str, float]:
    """One writer's share of the world: its nodes' slices, then their claims and pods."""
    from benchmarks.scale_objects import (
        DRIVER,
        PODS,
        RESOURCE,
        allocated_claim_and_pod,
        allocated_devices,
    )

    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    slices_s = await api.many(lambda n: api.create(f"{RESOURCE}/resourceslices", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": f"node-{n}-gpu"},
        "spec": {"driver": DRIVER, "nodeName": f"node-{n}",
                 "pool": {"name": f"node-{n}", "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": f"gpu-{d}"} for d in range(world.per_node)]}}),
        nodes, connections)
    work = [(n, d) for n in nodes
            for d in allocated_devices(world.per_node, world.claims_per_node, n, world.nodes)]

    async def one(item: tuple[int, int]) -> None:
        n, d = item
        await allocated_claim_and_pod(api, n, d)
        await api.merge_patch(f"{PODS}/dra-{n}-{d}/status", running_status(n * world.per_node + d, now))

    claims_s = await api.many(one, work, connections)
    return {"slices": len(nodes), "claims": len(work), "slices_s": slices_s, "claims_s": claims_s,
            "writes": len(nodes) + 4 * len(work)}


def _writer_process(directory: str, world: World, nodes: list[int], connections: int) -> dict[str, float]:
    """A writer process's body (spawned: no event loop or connection is inherited)."""
    async def body() -> dict[str, float]:
        api = Api(RealCluster(Path(directory), owned=False), connections)
        try:
            return await write_shard(api, world, nodes, connections)
        finally:
            await api.close()

    return asyncio.run(body())


# Requests in flight per writer. Each claim's four writes wait on etcd's commit one after
# the other, so the fill is bound by latency before CPU: on the 2-core machine, one writer
# made 258 writes/s with 32 connections, 516 with 96 and 461 with 192 (1,000 claims each,
# minutes apart); a second writer process there made no difference (10,000 claims:
# 90.5 s with one writer, 97.8 s with two).
CONNECTIONS_PER_WRITER = 96


def writers_from_env(cpus: int | None = None) -> tuple[int, int]:
    """(writer processes, connections per writer): DRACO_BENCH_WRITERS and
    DRACO_BENCH_CONNECTIONS, else writer_count() of this machine and CONNECTIONS_PER_WRITER."""
    writers = int(os.environ.get("DRACO_BENCH_WRITERS") or writer_count(cpus or os.cpu_count() or 1))
    connections = int(os.environ.get("DRACO_BENCH_CONNECTIONS") or CONNECTIONS_PER_WRITER)
    if writers < 1 or connections < 1:
        raise ValueError(f"writers {writers} and connections {connections} must be at least 1")
    return writers, connections


async def write_nodes(api: Api, count: int, connections: int) -> float:
    """COUNT kwok nodes (hack/cluster's manifest), CONNECTIONS at once; the seconds it took."""
    from benchmarks.scale_objects import _hack_cluster

    manifest = _hack_cluster().node_manifest
    return await api.many(lambda i: api.create("/api/v1/nodes", manifest(f"node-{i}")),
                          range(count), connections)


def node_readiness(ready: set[str]) -> Callable[[str, dict[str, Any], float], None]:
    """A node watch's handler keeping READY the names of nodes Ready without a NoExecute
    taint. The `not-ready` NoSchedule taint that kube-controller-manager lifts at its
    client's 20 QPS (100 s for 2,000 nodes) does not count: it keeps the scheduler from a
    node, never a pod bound with `nodeName`, and every pod of this world is."""

    def on_node(kind: str, obj: dict[str, Any], _: float) -> None:
        conditions = (obj.get("status") or {}).get("conditions") or []
        taints = (obj.get("spec") or {}).get("taints") or []
        if kind != "DELETED" and any(c.get("type") == "Ready" and c.get("status") == "True"
                                     for c in conditions) \
                and not any(t.get("effect") == "NoExecute" for t in taints):
            ready.add(obj["metadata"]["name"])
        else:
            ready.discard(obj["metadata"]["name"])

    return on_node


async def fill_world(api: Api, world: World, writers: int, connections: int,
                     executor: Executor | None = None, limit: float = 1800) -> dict[str, Any]:
    """The namespace and class, the nodes, then the writers while kwok makes the nodes
    Ready; returns the fill's figures once every node is Ready and the API shows every
    claim allocated and every pod Running. One writer writes in this process; more run in
    EXECUTOR (spawned processes when none is given)."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    from benchmarks.scale_objects import CLAIMS, PODS, namespace_and_class, selector

    started = time.monotonic()
    await namespace_and_class(api)
    ready: set[str] = set()
    parts = shards(world.nodes, writers)
    owned = executor is None and len(parts) > 1
    pool = executor or (ProcessPoolExecutor(len(parts), mp_context=get_context("spawn"))
                        if owned else None)
    try:
        async with Watch(api, "/api/v1/nodes", node_readiness(ready), limit=limit):
            nodes_posted_s = await write_nodes(api, world.nodes, connections)
            objects_started = time.monotonic()
            if pool is None:
                results = [await write_shard(api, world, parts[0], connections)]
            else:
                directory, loop = str(_cluster_dir(api)), asyncio.get_running_loop()
                results = list(await asyncio.gather(*(
                    loop.run_in_executor(pool, _writer_process, directory, world, part, connections)
                    for part in parts)))
            objects_s = time.monotonic() - objects_started
            await wait_until(lambda: len(ready) >= world.nodes, limit,
                             lambda: f"{len(ready)} of {world.nodes} kwok nodes Ready", step=0.2)
            nodes_s = time.monotonic() - started
    finally:
        if owned and pool is not None:
            pool.shutdown()
    pods = (await api.call("GET", PODS + selector(kind="dra")))["items"]
    claims = (await api.call("GET", CLAIMS + selector(kind="dra")))["items"]
    running = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Running")
    allocated = sum(1 for c in claims if (c.get("status") or {}).get("allocation"))
    if running != world.claims or allocated != world.claims:
        raise RuntimeError(f"world not filled: {running} pods Running, {allocated} claims "
                           f"allocated, {world.claims} wanted")
    writes = sum(r["writes"] for r in results) + world.nodes
    out = {"nodes": world.nodes, "claims": world.claims, "writers": len(parts),
           "connections": connections, "cpus": os.cpu_count(), "nodes_posted_s": nodes_posted_s,
           "nodes_ready_s": nodes_s, "objects_s": objects_s, "total_s": time.monotonic() - started,
           "writes": writes, "writes_per_s": writes / (objects_started - started + objects_s),
           "load": loadavg()}
    print(json.dumps({"fill": out}), file=sys.stderr)
    return out


def _cluster_dir(api: Api) -> Path:
    if api.cluster_dir is None:
        raise ValueError("an Api made without a cluster cannot start writer processes")
    return api.cluster_dir
