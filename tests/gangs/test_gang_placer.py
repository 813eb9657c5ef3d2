"""The allocator controller's GangPlacer on its own: what a waiting gang's reservation
keeps from single pods, when the gang is decided again, and what it asks of its owner,
with a recording owner and no API server."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterable
from datetime import UTC, datetime
from typing import Any

import pytest

from operators.allocator.reserved import Reserved
from operators.allocator_controller.controller import AllocatorSettings
from operators.allocator_controller.gang_loop import GangPlacer, Reservation
from operators.allocator_controller.gang_preempt_loop import GangPreemptor
from operators.allocator_controller.gate_waits import GateWaits
from operators.allocator_controller.holds import Holds
from operators.allocator_controller.preempt_loop import Preemptor
from operators.cli.state import build_tracker
from operators.model import DeviceID, NamespacedName
from operators.model.gates import DRACO_GATE

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
GPU0, GPU1 = (DeviceID("gpu.example.com", "node-1", f"gpu-{i}") for i in range(2))
GANG = ("Gang", "team", "g")


class Owner:
    def __init__(self) -> None:
        self.asked: list[tuple[Any, ...]] = []

    def wake_loop(self) -> None:
        self.asked.append(("wake_loop",))

    def retry_unsatisfied(self) -> None:
        self.asked.append(("retry_unsatisfied",))

    def spawn(self, key: NamespacedName, coro: Coroutine[Any, Any, None]) -> None:
        coro.close()

    def background(self, coro: Coroutine[Any, Any, None]) -> None:
        coro.close()

    def still_free(self, claim: NamespacedName, devices: Iterable[DeviceID]) -> bool:
        return True


def single(name: str, priority: int, created: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}",
                         "creationTimestamp": created},
            "spec": {"priority": priority, "containers": [],
                     "schedulingGates": [{"name": DRACO_GATE}]}}


def placer(clock: list[float]) -> tuple[GangPlacer, Owner]:
    tracker = build_tracker([single("older", 0, "2026-11-28T10:00:00Z"),
                             single("younger", 0, "2026-11-28T11:30:00Z"),
                             single("urgent", 10, "2026-11-28T11:30:00Z")])
    owner = Owner()
    settings = AllocatorSettings(retry_after=5.0)
    preemptor = Preemptor(tracker, None, settings, None, owner, lambda: NOW)  # type: ignore[arg-type]
    gate_waits = GateWaits(None, {}, DRACO_GATE, frozenset(), lambda: NOW, lambda: clock[0])  # type: ignore[arg-type]
    return GangPlacer(tracker, None, Holds(), settings, None, asyncio.Semaphore(1),  # type: ignore[arg-type]
                      owner, gate_waits, preemptor, GangPreemptor(preemptor),  # type: ignore[arg-type]
                      lambda: NOW, lambda: clock[0]), owner


# the gang: priority 0, created 11:00, its reservation ends at monotonic 100
@pytest.mark.parametrize(("pod", "kept"), [
    ("younger", True),  # younger, same priority: kept off the gang's devices
    ("older", False),  # older than the gang: not its to wait for
    ("urgent", False),  # higher priority: not held back
    ("gone", False),  # no such pod: nothing to keep
])
def test_a_waiting_gangs_reservation_keeps_its_devices_from_younger_single_pods(pod: str, kept: bool) -> None:
    clock = [0.0]
    g, _ = placer(clock)
    created = datetime(2026, 11, 28, 11, 0, tzinfo=UTC).timestamp()
    g.reservations[GANG] = Reservation(frozenset({GPU1}), 0, created, 100.0)
    in_use = {GPU0}
    seen = g.reserved_from(NamespacedName("team", pod), in_use)
    if kept:
        assert isinstance(seen, Reserved) and sorted(seen) == [GPU0, GPU1]
    else:
        assert seen is in_use
    clock[0] = 100.0  # at its limit the reservation keeps nothing (the gang is decided again)
    assert g.reserved_from(NamespacedName("team", pod), in_use) is in_use


def test_the_next_time_a_gang_is_decided_on_its_own() -> None:
    clock = [10.0]
    g, owner = placer(clock)
    assert g.next_reservation_expiry() is None
    g.reservations[GANG] = Reservation(frozenset({GPU1}), 0, 0.0, 100.0)
    g.retry(("Gang", "team", "h"))  # a failed write: retry_after (5 s) from now
    assert g.next_reservation_expiry() == 15.0
    assert owner.asked == []  # a retry waits for its time, it does not wake the loop
    g.again(GANG)
    assert GANG in g.gang_queue and owner.asked == [("wake_loop",)]


def test_dropping_a_reservation_lets_the_waiting_single_pods_look_again() -> None:
    g, owner = placer([0.0])
    g._unreserve(GANG)  # none: nothing changes for anyone
    assert owner.asked == []
    g.reservations[GANG] = Reservation(frozenset({GPU1}), 0, 0.0, 100.0)
    g._unreserve(GANG)
    assert GANG not in g.reservations and owner.asked == [("retry_unsatisfied",)]
