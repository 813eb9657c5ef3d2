"""OperatorThread.stop: a thread that ignores its stop flag is named, cancelled and ends."""

from __future__ import annotations

import asyncio
import contextlib
import threading

import pytest

from operators.cli.operator_thread import OperatorThread, OperatorThreadHung


def hung_thread() -> OperatorThread:
    """An OperatorThread whose 'operator' never looks at its stop flag (a wedged handler)."""
    op = object.__new__(OperatorThread)
    op.loop = asyncio.new_event_loop()
    op.stop_flag = None
    op._ready = threading.Event()

    async def wedged_handler() -> None:
        await asyncio.Event().wait()

    def run() -> None:
        asyncio.set_event_loop(op.loop)
        op.stop_flag = asyncio.Event()
        op._ready.set()
        task = op.loop.create_task(wedged_handler(), name="wedged-handler")
        with contextlib.suppress(asyncio.CancelledError):
            op.loop.run_until_complete(task)

    op._thread = threading.Thread(target=run, name="draco-operator-test", daemon=True)
    return op


def test_a_thread_that_does_not_stop_is_named_and_cancelled() -> None:
    op = hung_thread().start()
    with pytest.raises(OperatorThreadHung) as raised:
        op.stop(timeout=0.3)
    message = str(raised.value)
    assert "did not stop within 0.3 s" in message
    assert "wedged-handler" in message and "wedged_handler" in message
    assert "ignored cancellation" not in message
    # cancelled hard: nothing is left running to log into later work
    assert not op._thread.is_alive()
