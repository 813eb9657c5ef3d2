"""What `draco run` works out at scrape time: readiness per controller, gated pods by
reason, read on the operator's loop from the metrics server's thread."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from operators.cli import run_metrics
from operators.cli.run_metrics import RunCollector, Snapshot, snapshot
from operators.kube.pod_reports import Reported
from operators.model import NamespacedName

GATE = "resource.draco.dev/allocation"
NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


@dataclass
class Meta:
    key: NamespacedName
    uid: str
    creation_timestamp: datetime | None


@dataclass
class Pod:
    meta: Meta
    gates: tuple[str, ...] = (GATE,)

    def has_gate(self, gate: str) -> bool:
        return gate in self.gates


def pod(name: str, age: float, gated: bool = True) -> Pod:
    return Pod(Meta(NamespacedName("ns", name), f"uid-{name}", NOW - timedelta(seconds=age)),
               (GATE,) if gated else ())


class Tracker:
    def __init__(self, pods: list[Pod]) -> None:
        self._pods = pods

    def pods(self) -> list[Pod]:
        return self._pods


@dataclass
class Gate:
    done: asyncio.Event = field(default_factory=asyncio.Event)


class Supervisor:
    def __init__(self, loops: list[dict[str, Any]]) -> None:
        self.loops = loops

    def status(self) -> list[dict[str, Any]]:
        return self.loops


class Process:
    def __init__(self, acting: bool = True, synced: bool = True) -> None:
        self.controllers = ["eviction", "allocator", "narrowing", "health"]
        self.gate = Gate()
        if synced:
            self.gate.done.set()
        self.supervisor = Supervisor([
            {"controller": "eviction", "running": True}, {"controller": "allocator", "running": True},
            {"controller": "narrowing", "running": False}])  # health: no loop at all
        self._acting = acting

    def acting(self) -> bool:
        return self._acting


class Controller:
    def __init__(self, reported: dict[NamespacedName, Reported]) -> None:
        self.reported = reported


def key(name: str) -> NamespacedName:
    return NamespacedName("ns", name)


def test_a_snapshot_of_readiness_and_gated_pods_by_reason() -> None:
    tracker = Tracker([pod("a", 30), pod("b", 600), pod("c", 5), pod("d", 100), pod("plain", 9999, gated=False),
                       pod("replaced", 50)])
    started = {
        "allocator": Controller({key("a"): Reported("uid-a", "Unschedulable", "m", ""),
                                 key("b"): Reported("uid-b", "Unschedulable", "m", ""),
                                 key("replaced"): Reported("uid-old", "TooComplex", "m", "")}),
        "narrowing": Controller({key("b"): Reported("uid-b", "ClaimsNotAllocated", "m", ""),
                                 key("d"): Reported("uid-d", "UntoleratedNodeTaint", "m", "")}),
    }
    snap = snapshot(Process(), tracker, started, GATE, NOW)
    assert snap.ready == {"eviction": 1, "allocator": 1, "narrowing": 0, "health": 0}
    # the allocator's reason first; a report about an earlier pod of the same name does not count
    assert snap.gated == {"Unschedulable": 2, "Pending": 2, "UntoleratedNodeTaint": 1}
    assert snap.oldest == {"Unschedulable": 600, "Pending": 50, "UntoleratedNodeTaint": 100}


def test_a_standby_or_a_process_still_syncing_reports_no_gated_pods() -> None:
    tracker = Tracker([pod("a", 30)])
    assert snapshot(Process(acting=False), tracker, {}, GATE, NOW) == Snapshot()
    syncing = snapshot(Process(synced=False), tracker, {}, GATE, NOW)
    assert syncing.gated is None and set(syncing.ready.values()) == {0}


@pytest.fixture
def loop() -> Iterator[tuple[asyncio.AbstractEventLoop, threading.Thread]]:
    """An event loop running in a thread of its own, as `draco run`'s beside the metrics server."""
    running = asyncio.new_event_loop()
    thread = threading.Thread(target=running.run_forever, daemon=True)
    thread.start()
    yield running, thread
    running.call_soon_threadsafe(running.stop)
    thread.join(5)
    running.close()


def samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in registry.collect() for s in family.samples}


def test_the_collector_reads_on_the_loop_and_serves_the_last_answer_when_it_is_busy(
        loop: tuple[asyncio.AbstractEventLoop, threading.Thread]) -> None:
    running, loop_thread = loop
    threads: list[threading.Thread] = []
    answers = [Snapshot({"eviction": 1}, {"Unschedulable": 2, "Pending": 1}, {"Unschedulable": 60.0, "Pending": 1.0}),
               Snapshot({"eviction": 1}, {"Pending": 1}, {"Pending": 2.0})]

    def read() -> Snapshot:
        threads.append(threading.current_thread())
        return answers.pop(0)

    registry = CollectorRegistry()
    collector = RunCollector(running, read, "1.2.3", timeout=0.5)
    registry.register(collector)
    first = samples(registry)
    assert threads == [loop_thread]  # read on the loop's thread, not the scraping one
    assert first[("draco_build_info", (("version", "1.2.3"),))] == 1
    assert first[("draco_controller_ready", (("controller", "eviction"),))] == 1
    assert first[("draco_gated_pods", (("reason", "Unschedulable"),))] == 2
    assert first[("draco_gated_pods", (("reason", "TooComplex"),))] == 0  # a known reason, at 0
    assert first[("draco_gated_pods_oldest_wait_seconds", (("reason", "Unschedulable"),))] == 60
    second = samples(registry)
    assert second[("draco_gated_pods", (("reason", "Unschedulable"),))] == 0  # seen once: stays, at 0
    # a loop busy for longer than the timeout: the last snapshot again, no gap
    running.call_soon_threadsafe(time.sleep, 1.5)
    started = time.monotonic()
    third = samples(registry)
    assert time.monotonic() - started < 1.2
    assert third == second
    text = generate_latest(registry).decode()
    assert "# TYPE draco_gated_pods gauge" in text and "# TYPE draco_controller_ready gauge" in text


def test_install_replaces_an_earlier_collector_and_says_who_acts_without_election() -> None:
    from operators.kube.leader import LEADER

    registry = CollectorRegistry()

    async def twice() -> None:
        for _ in range(2):
            run_metrics.install(Process(), Tracker([]), {}, leader_elect=False, registry=registry)

    asyncio.run(twice())
    names = [f.name for f in registry.collect()]
    assert names.count("draco_controller_ready") == 1  # the second replaced the first
    assert LEADER.labels(lease="")._value.get() == 1
    LEADER.remove("")
