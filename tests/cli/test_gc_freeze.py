"""`draco run` freezes the initial state for the garbage collector once the initial sync
is done (a full collection walked half a million tracker objects at DRA size)."""

from __future__ import annotations

import asyncio
import gc

from operators.cli.run import freeze_after_sync
from operators.kube.feed import SyncGate


async def test_the_initial_state_is_frozen_once_the_sync_is_done() -> None:
    gc.unfreeze()
    gate = SyncGate()
    freezing = asyncio.create_task(freeze_after_sync(gate))
    try:
        await asyncio.sleep(0.05)
        assert gc.get_freeze_count() == 0 and not freezing.done()  # nothing before the sync
        gate.done.set()
        await asyncio.wait_for(freezing, 10)
        assert gc.get_freeze_count() > 0
    finally:
        freezing.cancel()
        gc.unfreeze()
