"""The kopf shell every draco controller loop shares: start it supervised, stop it cleanly.

A controller is built before kopf's event loop runs, so its asyncio primitives are made
again on that loop at startup; its first pass waits for the initial sync (`ready`), once,
and a loop the supervisor restarts does not wait again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol

import kopf

from operators.kube.client import KubeClient
from operators.kube.supervision import LoopState, Supervisor, default_supervisor, report_error


class LoopController(Protocol):
    wake: asyncio.Event
    sem: asyncio.Semaphore
    settings: Any

    async def run(self) -> None: ...


def register_loop(registry: kopf.OperatorRegistry, name: str, controller: LoopController,
                  api: KubeClient, *, ready: Callable[[], Awaitable[Any]] | None = None,
                  supervisor: Supervisor | None = None) -> None:
    """Run `controller.run()` as the supervised loop `draco-<name>` while kopf runs."""
    boss = supervisor or default_supervisor()
    loops: list[LoopState] = []

    async def start(**_: Any) -> None:
        controller.wake = asyncio.Event()
        controller.sem = asyncio.Semaphore(controller.settings.workers)
        synced = asyncio.Event()

        async def main() -> None:
            if ready is not None and not synced.is_set():
                await ready()
                synced.set()
            await controller.run()

        loops.append(boss.start(f"draco-{name}", main, controller=name))

    async def stop(**_: Any) -> None:
        for loop in loops:
            await boss.stop(loop)
        loops.clear()
        await api.close()

    start.__name__, stop.__name__ = f"start_{name}", f"stop_{name}"
    kopf.on.startup(registry=registry)(start)
    kopf.on.cleanup(registry=registry)(stop)


class PassLoop:
    """A controller loop woken by tracker changes: one pass at a time, never fatal.

    Subclasses set `name`, `tracker`, `settings` (with `retry_after`), and implement
    `step()` (one pass; returns how long to sleep unless woken), `_on_change(change)` and
    `resync()` (forget incremental state: changes may have been missed, after a start, a
    supervisor restart or a failed pass).
    """

    name = "controller"
    tracker: Any
    settings: Any

    def _init_loop(self) -> None:
        self.wake = asyncio.Event()
        self.tasks: set[asyncio.Task[None]] = set()
        self._unsubscribe: Callable[[], None] | None = None
        self._subscribe()

    def _subscribe(self) -> None:
        if self._unsubscribe is None:
            self._unsubscribe = self.tracker.subscribe(self._on_change)
            self.resync()

    def _on_change(self, change: Any) -> None:
        raise NotImplementedError

    def resync(self) -> None:
        raise NotImplementedError

    async def step(self) -> float:
        raise NotImplementedError

    def _background(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run a write beside the loop (reports nothing waits on); `run` cancels what is
        left when it stops, and tests wait for `tasks` to drain."""
        task = asyncio.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def retry_delay(self) -> float:
        """Sleep after a failed pass (the next pass starts from a resync)."""
        return float(self.settings.retry_after)

    async def run(self) -> None:
        self._subscribe()  # again after a supervisor restart
        try:
            while True:
                try:
                    delay = await self.step()
                except Exception as exc:  # noqa: BLE001 - a failed pass is retried, never fatal
                    report_error(self.name, "pass", exc)
                    self.resync()
                    delay = self.retry_delay()
                # asyncio.timeout, not wait_for: on Python 3.11 wait_for swallows a
                # cancellation that arrives as the wait ends, and the loop would outlive
                # its own cancellation (shutdown hung on it)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(max(delay, 0.01)):
                        await self.wake.wait()
                self.wake.clear()
        finally:
            if self._unsubscribe is not None:
                self._unsubscribe()
                self._unsubscribe = None
            for task in list(self.tasks):
                task.cancel()


class KeyedPassLoop(PassLoop):
    """A PassLoop whose writes run beside it, one at a time per object key.

    Subclasses keep `in_flight` (keys with a write running), `again` (keys that changed
    while their write ran), `pending` (keys the next pass looks at) and `retry_at` (when
    a key whose write failed may be tried again, on the subclass's clock): a key that
    changed mid-write is looked at again as soon as that write ends, never twice at once.
    """

    in_flight: set[Any]
    again: set[Any]
    pending: set[Any]
    retry_at: dict[Any, Any]

    def _deferred(self, key: Any, now: Any) -> bool:
        """Whether a pass must leave `key` alone for now: its write is still running (it is
        looked at again when that ends) or its retry is not due. A due retry is used up."""
        if key in self.in_flight:
            self.again.add(key)
            return True
        retry = self.retry_at.get(key)
        if retry is not None and retry > now:
            return True
        self.retry_at.pop(key, None)
        return False

    def _spawn(self, key: Any, coro: Coroutine[Any, Any, None]) -> None:
        self.in_flight.add(key)

        async def work() -> None:
            try:
                await coro
            finally:
                self.in_flight.discard(key)
                if key in self.again:
                    self.again.discard(key)
                    self.pending.add(key)
                    self.wake.set()

        self._background(work())
