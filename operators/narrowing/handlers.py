"""kopf shell of the narrowing controller (`draco run --controllers narrowing`).

I/O only: Pods and ResourceClaims reach the shared tracker through the feed (see
`operators.kube.feed`); this module starts the controller loop on startup, supervised
(a crash is logged, counted and the loop restarted), and stops it on cleanup.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import kopf

from operators.kube.client import KubeClient
from operators.kube.shared import shared_client
from operators.kube.shell import register_loop
from operators.kube.supervision import Supervisor
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
    register_loop(registry, "narrowing", controller, api, ready=ready, supervisor=supervisor)
    return controller
