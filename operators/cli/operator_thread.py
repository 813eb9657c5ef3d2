"""`draco run`'s controllers in a background thread, for tests and benchmarks."""

from __future__ import annotations

from typing import Any


class OperatorThread:
    """`draco run`'s registry on its own event loop in a thread, against a kubeconfig."""

    def __init__(self, controllers: list[str], settings: Any) -> None:
        import asyncio
        import threading

        from operators.cli.run import build

        self.registry, self.tracker, self.controllers = build(controllers, settings)
        self.loop = asyncio.new_event_loop()
        self.stop_flag: Any = None
        self._thread = threading.Thread(target=self._run, name="draco-operator", daemon=True)
        self._ready = threading.Event()

    def _run(self) -> None:
        import asyncio

        import kopf

        asyncio.set_event_loop(self.loop)
        self.stop_flag = asyncio.Event()
        self._ready.set()
        self.loop.run_until_complete(kopf.operator(
            registry=self.registry, standalone=True, clusterwide=True, stop_flag=self.stop_flag))

    def start(self) -> OperatorThread:
        self._thread.start()
        self._ready.wait(5)
        return self

    def stop(self) -> None:
        if self.stop_flag is not None:
            self.loop.call_soon_threadsafe(self.stop_flag.set)
        self._thread.join(15)
