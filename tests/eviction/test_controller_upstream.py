"""The controller beside upstream's: pods whose taints upstream evicts for are left to
it, and taken back only when upstream leaves them running past the grace period."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from operators.cli.state import build_tracker
from operators.eviction.controller import EvictionController, EvictionSettings
from operators.eviction.decisions import DRACO_ALONE, UPSTREAM
from tests.eviction.test_controller_clock import T0, RecordingClient, objects


def run_steps(ownership: object, times: list[int]) -> tuple[list[list[str]], EvictionController]:
    """Steps at T0 + each of `times` seconds; the DELETEs after each step."""
    now = [T0]
    tracker = build_tracker(objects(toleration_seconds=0))  # a slice taint, due at T0
    client = RecordingClient()
    controller = EvictionController(tracker, client, EvictionSettings(upstream_grace=30),  # type: ignore[arg-type]
                                    clock=lambda: now[0])
    controller.set_ownership(ownership)  # type: ignore[arg-type]
    seen: list[list[str]] = []

    async def scenario() -> None:
        for t in times:
            now[0] = T0 + timedelta(seconds=t)
            await controller.step()
            await asyncio.gather(*controller.tasks)
            seen.append(list(client.deleted()))

    asyncio.run(scenario())
    return seen, controller


def test_slice_taint_left_to_upstream_then_taken_back_after_the_grace_period() -> None:
    seen, controller = run_steps(UPSTREAM, [1, 29, 31])
    assert seen == [[], [], ["/api/v1/namespaces/ns/pods/a"]]
    assert controller.left_to_upstream == {"ua"}


def test_draco_mode_evicts_at_once() -> None:
    seen, controller = run_steps(DRACO_ALONE, [1])
    assert seen == [["/api/v1/namespaces/ns/pods/a"]]
    assert controller.left_to_upstream == set()
