"""A burst of success Events is bounded; Warnings always go out."""

from __future__ import annotations

import asyncio
from typing import Any

from operators.kube.client import RateLimiter
from operators.kube.events import EventRecorder


class Api:
    def __init__(self) -> None:
        self.posted: list[dict[str, Any]] = []

    async def post(self, path: str, body: dict[str, Any]) -> Any:
        self.posted.append(body)
        return type("Resp", (), {"ok": True, "status": 201})()


def pod(i: int) -> dict[str, str]:
    return {"kind": "Pod", "namespace": "ns", "name": f"p-{i}", "uid": f"u-{i}"}


def test_a_burst_of_normal_events_stops_at_the_budget_and_refills() -> None:
    now = [0.0]
    api = Api()
    recorder = EventRecorder(api, "draco-test", normal_budget=RateLimiter(10, 100, clock=lambda: now[0]))  # type: ignore[arg-type]

    async def burst(start: int, count: int, type_: str = "Normal") -> list[bool]:
        return [await recorder.emit(pod(i), "Allocated", "gpu-0", type_) for i in range(start, start + count)]

    first = asyncio.run(burst(0, 150))
    assert first == [True] * 100 + [False] * 50 and recorder.dropped == 50
    warnings = asyncio.run(burst(150, 20, "Warning"))
    assert all(warnings)  # a Warning is never dropped
    now[0] = 2.0  # two seconds later: 20 more
    again = asyncio.run(burst(200, 30))
    assert again == [True] * 20 + [False] * 10
    assert len(api.posted) == 100 + 20 + 20


def test_without_a_budget_every_normal_event_is_posted() -> None:
    api = Api()
    recorder = EventRecorder(api, "draco-test")  # type: ignore[arg-type]
    assert all(asyncio.run(recorder.emit(pod(i), "Evicted", "m")) for i in range(300))
    assert len(api.posted) == 300
