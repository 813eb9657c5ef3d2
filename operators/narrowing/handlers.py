"""kopf shell of the narrowing controller (`draco run --controllers narrowing`).

I/O only: Pods and ResourceClaims reach the shared tracker through the feed (see
`operators.kube.feed`); this module starts the controller loop on startup, supervised
(a crash is logged, counted and the loop restarted), and stops it on cleanup.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import kopf

from operators.kube.client import KubeClient
from operators.kube.shared import shared_client
from operators.kube.supervision import LoopState, Supervisor, default_supervisor
from operators.narrowing.controller import NarrowingController, NarrowingSettings
from operators.tracker import Tracker

FEEDS = ("ResourceClaim", "Pod")


def settings_from(settings: Any) -> NarrowingSettings:
    return NarrowingSettings(
        workers=max(int(getattr(settings, "narrowing_workers", 16)), 1),
        timeout=float(getattr(settings, "narrowing_timeout", 300.0)),
        retry_after=float(getattr(settings, "narrowing_retry_after", 5.0)),
    )


def register(registry: kopf.OperatorRegistry, tracker: Tracker, settings: Any, *,
             client: KubeClient | None = None,
             ready: Callable[[], Awaitable[Any]] | None = None,
             supervisor: Supervisor | None = None) -> NarrowingController:
    """Wire the controller; `ready` is awaited before its first decision (initial sync)."""
    api = client or shared_client(qps=float(getattr(settings, "qps", 200.0)),
                                  burst=int(getattr(settings, "burst", 400)))
    controller = NarrowingController(tracker, api, settings_from(settings))
    boss = supervisor or default_supervisor()
    loops: list[LoopState] = []

    @kopf.on.startup(registry=registry)
    async def start_narrowing(**_: Any) -> None:
        # Rebind to the operator's loop (the controller may be built before it runs).
        controller.wake = asyncio.Event()
        controller.sem = asyncio.Semaphore(controller.settings.workers)
        synced = asyncio.Event()

        async def main() -> None:
            if ready is not None and not synced.is_set():
                await ready()
                synced.set()
            await controller.run()

        loops.append(boss.start("draco-narrowing", main, controller="narrowing"))

    @kopf.on.cleanup(registry=registry)
    async def stop_narrowing(**_: Any) -> None:
        for loop in loops:
            await boss.stop(loop)
        loops.clear()
        await api.close()

    return controller
