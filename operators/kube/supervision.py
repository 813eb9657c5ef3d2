"""Supervision of controller loops: one failure is one logged, counted error, never a
silently dead controller.

Two levels:

- `guarded(controller, step, kind=…, namespace=…, name=…)` wraps one step of a loop
  about one object. An exception there is logged through structlog with the object's
  kind and namespace/name, counted in `draco_controller_errors_total{controller,step}`,
  and swallowed, so the loop goes on with the next object. `guard.failed` tells the
  caller (to report an Event on the object, or to retry later).
- `Supervisor.start(name, factory)` runs a long-lived loop as a task. If the loop
  raises, the failure is logged and counted (step `loop`) and the loop is started again
  after a backoff. `is_alive()` is False while any registered loop is not running (not
  started yet, crashed and waiting to restart, or finished), which is what readiness
  probes and `draco run` report. A loop stopped on purpose (`stop`) is deregistered.
  `readiness(controllers)` adds that each named controller has a loop at all.

Cancellation (`asyncio.CancelledError`, a `BaseException`) is never swallowed.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import structlog
from prometheus_client import Counter

log = structlog.get_logger("draco.supervision")

CONTROLLER_ERRORS = Counter(
    "draco_controller_errors_total",
    "Exceptions caught in a controller step; the step's object was skipped, the loop went on.",
    ["controller", "step"],
)


def error_count(controller: str, step: str) -> float:
    """The counter's current value (tests and health reports read it)."""
    return CONTROLLER_ERRORS.labels(controller=controller, step=step)._value.get()


def report_error(controller: str, step: str, exc: BaseException, *, kind: str = "",
                 namespace: str = "", name: str = "") -> None:
    """Log and count one failure of `step` about the object kind namespace/name."""
    CONTROLLER_ERRORS.labels(controller=controller, step=step).inc()
    fields: dict[str, Any] = {"controller": controller, "step": step,
                              "error": f"{type(exc).__name__}: {exc}"}
    if kind:
        fields["kind"] = kind
    if namespace:
        fields["namespace"] = namespace
    if name:
        fields["name"] = name
    log.error("controller step failed; object skipped", exc_info=exc, **fields)


class guarded:  # noqa: N801 - used like a function: `with guarded(...) as g:`
    """Context manager: an `Exception` inside is reported and swallowed."""

    __slots__ = ("controller", "step", "kind", "namespace", "name", "failed", "error")

    def __init__(self, controller: str, step: str, *, kind: str = "", namespace: str = "",
                 name: str = "") -> None:
        self.controller = controller
        self.step = step
        self.kind = kind
        self.namespace = namespace
        self.name = name
        self.failed = False
        self.error: Exception | None = None

    def __enter__(self) -> guarded:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool:
        if exc is None or not isinstance(exc, Exception):
            return False
        self.failed = True
        self.error = exc
        report_error(self.controller, self.step, exc, kind=self.kind, namespace=self.namespace,
                     name=self.name)
        return True


@dataclass
class LoopState:
    name: str
    controller: str
    task: asyncio.Task[None] | None = None
    running: bool = False
    restarts: int = 0
    last_error: str = ""
    token: int = 0


@dataclass
class Supervisor:
    """The health registry of a process's controller loops."""

    restart_delay: float = 1.0
    max_restart_delay: float = 30.0
    loops: dict[int, LoopState] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    def start(self, name: str, factory: Callable[[], Awaitable[None]], *,
              controller: str | None = None) -> LoopState:
        """Run `factory()` as a supervised task named `name`; restarted when it raises."""
        state = LoopState(name, controller or name, token=next(self._ids))
        self.loops[state.token] = state
        state.task = asyncio.get_running_loop().create_task(self._keep(state, factory), name=name)
        return state

    async def _keep(self, state: LoopState, factory: Callable[[], Awaitable[None]]) -> None:
        delay = self.restart_delay
        try:
            while True:
                state.running = True
                try:
                    await factory()
                    log.warning("controller loop returned; starting it again",
                                controller=state.controller, loop=state.name)
                except Exception as exc:  # noqa: BLE001 - the point of a supervisor
                    state.last_error = f"{type(exc).__name__}: {exc}"
                    report_error(state.controller, "loop", exc)
                state.running = False
                state.restarts += 1
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.max_restart_delay)
        finally:
            state.running = False

    async def stop(self, state: LoopState) -> None:
        """Stop the loop on purpose and forget it (a stopped loop is not unhealthy)."""
        self.loops.pop(state.token, None)
        task = state.task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):  # it is going away
                await task

    def is_alive(self) -> bool:
        """True when every registered loop is running right now."""
        return all(s.running and s.task is not None and not s.task.done() for s in self.loops.values())

    def readiness(self, controllers: Iterable[str]) -> tuple[bool, str]:
        """Whether every named controller has a loop and every loop runs, with the
        reason when not (what `draco run`'s /readyz reports). Having no loop for a
        controller is not ready: `is_alive()` alone is vacuously true before startup."""
        names = {s.controller for s in self.loops.values()}
        missing = sorted(set(controllers) - names)
        if missing:
            return False, f"not started: {', '.join(missing)}"
        down = [f"{s['loop']} (restarts {s['restarts']}{'; ' + s['lastError'] if s['lastError'] else ''})"
                for s in self.status() if not s["running"]]
        if down:
            return False, f"not running: {', '.join(sorted(down))}"
        return True, ""

    def status(self) -> list[dict[str, Any]]:
        """Per loop: name, controller, running, restarts, last error (for probes and logs)."""
        return [{"loop": s.name, "controller": s.controller,
                 "running": s.running and s.task is not None and not s.task.done(),
                 "restarts": s.restarts, "lastError": s.last_error}
                for s in self.loops.values()]


_default = Supervisor()


def default_supervisor() -> Supervisor:
    """The process's supervisor: `draco run`'s controllers register here."""
    return _default


__all__ = ["CONTROLLER_ERRORS", "LoopState", "Supervisor", "default_supervisor", "error_count",
           "guarded", "report_error"]
