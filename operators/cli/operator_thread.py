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

    def stop(self, timeout: float = 15.0) -> None:
        """Stop kopf gracefully; a thread still running after `timeout` is cancelled hard and
        named in OperatorThreadHung, so a hang shows where it happens instead of a leftover
        thread logging into whatever runs next."""
        if self.stop_flag is not None:
            self.loop.call_soon_threadsafe(self.stop_flag.set)
        self._thread.join(timeout)
        if not self._thread.is_alive():
            return
        running = self._running_tasks()
        self.loop.call_soon_threadsafe(self._cancel_everything)
        self._thread.join(5)
        still = " (and it ignored cancellation)" if self._thread.is_alive() else ""
        raise OperatorThreadHung(
            f"the operator thread did not stop within {timeout:g} s of its stop flag{still}; "
            f"tasks still running: {'; '.join(running) or 'none'}")

    def _running_tasks(self) -> list[str]:
        """Each unfinished task of the loop with where it waits, asked on the loop itself."""
        import asyncio

        async def describe() -> list[str]:
            out = []
            for task in asyncio.all_tasks():
                if task is asyncio.current_task():
                    continue
                frames = task.get_stack(limit=1)
                where = (f" at {frames[-1].f_code.co_filename}:{frames[-1].f_lineno}"
                         f" in {frames[-1].f_code.co_name}") if frames else ""
                out.append(f"{task.get_name()}{where}")
            return sorted(out)

        try:
            return asyncio.run_coroutine_threadsafe(describe(), self.loop).result(2)
        except Exception as error:  # the loop may be wedged; say so rather than hide the hang
            return [f"(could not list them: {type(error).__name__})"]

    def _cancel_everything(self) -> None:
        import asyncio

        for task in asyncio.all_tasks(self.loop):
            task.cancel()


class OperatorThreadHung(RuntimeError):
    """The operator thread did not stop when asked."""
