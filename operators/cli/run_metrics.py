"""Metrics `draco run` works out when Prometheus scrapes: its controllers' readiness and
the pods waiting at draco's scheduling gate, with why.

They describe state, not events, so no controller is made to keep gauges up to date:
the collector asks the operator's event loop for a snapshot at scrape time. The loop
owns the tracker and the controllers' bookkeeping, so reading them there needs no
lock and never sees a half-made change; the metrics server's thread waits for the
answer at most `timeout` seconds and otherwise serves the last snapshot (a loop busy
with a long allocation costs the dashboard freshness, never a gap).

- `draco_controller_ready{controller}`: 1 when this process acts, its initial sync is
  done and every loop of the controller runs (what /readyz checks, per controller).
- `draco_gated_pods{reason}` and `draco_gated_pods_oldest_wait_seconds{reason}`: pods
  carrying the gate, by the reason of the allocator's condition on them, else the
  narrowing controller's, else `Pending` (no controller has said anything yet).
  Reasons come from a closed set in draco's code; one seen once stays, at 0, so a graph
  drops to zero instead of ending.
- `draco_build_info{version}` (always 1), to join the process collector's CPU and
  memory series to draco's targets.

A standby exports no readiness and no gated pods (it has no controllers and no view of
the cluster): an alert takes the max over the replicas. Without --leader-elect the
process always acts, and says so as `draco_leader{lease=""} 1`, so that "no leader"
means the same with or without election.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import REGISTRY, Collector

PENDING = "Pending"
BASE_REASONS = (PENDING, "Unschedulable", "AllocationError", "TooComplex")


@dataclass
class Snapshot:
    ready: dict[str, int] = field(default_factory=dict)
    gated: dict[str, int] | None = None  # None: not acting or not synced yet
    oldest: dict[str, float] = field(default_factory=dict)


def _reason(reports: list[Mapping[Any, Any]], key: Any, uid: str) -> str | None:
    for reported in reports:
        found = reported.get(key)
        if found is not None and getattr(found, "uid", None) == uid:
            return str(found.reason)
    return None


def snapshot(process: Any, tracker: Any, started: Mapping[str, Any], gate: str,
             now: datetime | None = None) -> Snapshot:
    """What the collector serves, read on the operator's loop."""
    out = Snapshot()
    if not process.acting():
        return out
    synced = process.gate.done.is_set()
    loops = process.supervisor.status()
    for controller in process.controllers:
        mine = [s for s in loops if s["controller"] == controller]
        out.ready[controller] = int(synced and bool(mine) and all(s["running"] for s in mine))
    if not synced:
        return out
    reports = [c.reported for name in ("allocator", "narrowing")
               if (c := started.get(name)) is not None and isinstance(getattr(c, "reported", None), Mapping)]
    moment = now or datetime.now(UTC)
    out.gated = {}
    for pod in tracker.pods():
        if not pod.has_gate(gate):
            continue
        reason = _reason(reports, pod.meta.key, pod.meta.uid) or PENDING
        out.gated[reason] = out.gated.get(reason, 0) + 1
        created = pod.meta.creation_timestamp
        if created is not None:
            waited = max((moment - created).total_seconds(), 0.0)
            out.oldest[reason] = max(out.oldest.get(reason, 0.0), waited)
    return out


class RunCollector(Collector):
    """Serves `read()`'s snapshot, taken on LOOP (see the module docstring)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, read: Callable[[], Snapshot],
                 version: str, timeout: float = 2.0) -> None:
        self.loop = loop
        self.read = read
        self.version = version
        self.timeout = timeout
        self.last = Snapshot()
        self.reasons: set[str] = set(BASE_REASONS)

    def _ask(self) -> Snapshot:
        running = None
        with contextlib.suppress(RuntimeError):  # no loop in this thread: the server's
            running = asyncio.get_running_loop()
        if running is self.loop:  # scraped from the loop itself (tests): read directly
            return self.read()
        answer: concurrent.futures.Future[Snapshot] = concurrent.futures.Future()

        def take() -> None:
            if answer.set_running_or_notify_cancel():
                try:
                    answer.set_result(self.read())
                except Exception as exc:  # noqa: BLE001 - handed to the scraping thread
                    answer.set_exception(exc)

        try:
            self.loop.call_soon_threadsafe(take)
            return answer.result(self.timeout)
        except (RuntimeError, concurrent.futures.TimeoutError):  # loop closed, or busy
            answer.cancel()
            return self.last

    def describe(self) -> Iterator[GaugeMetricFamily]:
        # without describe() the registry would collect at registration, on the loop's thread
        yield from self._families(Snapshot())

    def collect(self) -> Iterator[GaugeMetricFamily]:
        snap = self._ask()
        self.last = snap
        yield from self._families(snap)

    def _families(self, snap: Snapshot) -> Iterator[GaugeMetricFamily]:
        info = GaugeMetricFamily("draco_build_info", "draco's version (always 1).", labels=["version"])
        info.add_metric([self.version], 1)
        yield info
        ready = GaugeMetricFamily(
            "draco_controller_ready",
            "1 when this process acts, its initial sync is done and every loop of the "
            "controller runs, else 0 (a standby exports none).", labels=["controller"])
        for controller, value in sorted(snap.ready.items()):
            ready.add_metric([controller], value)
        yield ready
        gated = GaugeMetricFamily(
            "draco_gated_pods",
            "Pods carrying draco's scheduling gate, by why they wait: the reason of the "
            "allocator's condition, else the narrowing controller's, else Pending.", labels=["reason"])
        oldest = GaugeMetricFamily(
            "draco_gated_pods_oldest_wait_seconds",
            "Seconds since the oldest gated pod of each reason was created (0 when none).",
            labels=["reason"])
        if snap.gated is not None:
            self.reasons |= set(snap.gated)
            for reason in sorted(self.reasons):
                gated.add_metric([reason], snap.gated.get(reason, 0))
                oldest.add_metric([reason], snap.oldest.get(reason, 0.0))
        yield gated
        yield oldest


_installed: list[Collector] = []
_lock = threading.Lock()


def install(process: Any, tracker: Any, started: Mapping[str, Any], *, leader_elect: bool,
            registry: Any = REGISTRY) -> RunCollector:
    """Register the collector for this process's loop (the running one), replacing one a
    previous `draco run` in this process registered (tests run it more than once)."""
    from operators.allocator.pod_claims import GATE
    from operators.cli.version import version
    from operators.kube.leader import LEADER

    loop = asyncio.get_running_loop()
    collector = RunCollector(loop, lambda: snapshot(process, tracker, started, GATE), version())
    with _lock:
        for old in _installed:
            registry.unregister(old)
        _installed[:] = [collector]
        registry.register(collector)
    if not leader_elect and process.controllers:
        LEADER.labels(lease="").set(1)
    return collector


__all__ = ["BASE_REASONS", "PENDING", "RunCollector", "Snapshot", "install", "snapshot"]
