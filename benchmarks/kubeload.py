"""Load and measurement helpers for the large real-cluster benchmarks (`cluster_scale`).

The e2e tests' HTTP helper opens one TLS connection per request, which caps a Python
client at a few hundred writes a second and spends the benchmark's CPU on handshakes;
creating 20,000 pods that way takes longer than the figures being measured. This module
talks to the API server over kept-alive aiohttp connections, many requests at once,
watches collections the way an informer does (so the benchmark counts the watch events
the API server emits instead of polling lists), and reads the figures of the processes
it compares (draco, kube-scheduler, kube-controller-manager) from /proc.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import aiohttp

from tests.e2e.backends import ROOT, RealCluster

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
