"""A controller loop stops when cancelled, even when the cancellation arrives in the
same moment as the wake-up it was waiting for.

On Python 3.11, `asyncio.wait_for` returns the inner result and drops a cancellation
that arrives as the inner wait completes: a loop built on it survived its own
cancellation, and kopf's shutdown (and a test's teardown) waited for it forever.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from operators.kube.feed import SyncGate
from operators.kube.shell import PassLoop
from operators.tracker import Tracker


class Loop(PassLoop):
    name = "test-loop"

    def __init__(self) -> None:
        self.tracker = Tracker()
        self.settings = SimpleNamespace(retry_after=1.0)
        self.passes = 0
        self._init_loop()

    def _on_change(self, change: Any) -> None:
        self.wake.set()

    def resync(self) -> None:
        pass

    async def step(self) -> float:
        self.passes += 1
        return 5.0


def test_a_loop_cancelled_as_it_is_woken_stops() -> None:
    async def scenario() -> tuple[bool, int]:
        loop = Loop()
        task = asyncio.create_task(loop.run())
        await asyncio.sleep(0.01)  # asleep in its wait
        loop.wake.set()
        task.cancel()  # same tick: the wait ends and the cancellation arrives
        await asyncio.sleep(0.1)
        done = task.done()
        task.cancel()  # (so that a failing run does not hang the test)
        await asyncio.gather(task, return_exceptions=True)
        return done, loop.passes

    done, passes = asyncio.run(scenario())
    assert done and passes == 1


def test_waiting_for_the_initial_sync_stops_when_cancelled_as_it_completes() -> None:
    async def scenario() -> bool:
        gate = SyncGate()
        task = asyncio.create_task(gate.wait())
        await asyncio.sleep(0.01)
        gate.done.set()
        task.cancel()
        await asyncio.sleep(0.05)
        return task.cancelled()

    assert asyncio.run(scenario())
