"""kopf shell of the device-taint eviction controller (`draco run --controllers eviction`).

I/O only: the shared tracker is fed by the watch streams (see `operators.kube.feed`);
this module starts the controller loop on startup, supervised (a crash is logged,
counted and the loop restarted; readiness reads the supervisor), and stops it on cleanup.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import kopf

from operators.eviction.controller import EvictionController, EvictionSettings
from operators.kube.client import KubeClient
from operators.kube.shared import shared_client
from operators.kube.shell import register_loop
from operators.kube.supervision import Supervisor
from operators.tracker import Tracker
from operators.tracker.taint_rules import TaintRuleOverlay

FEEDS = ("ResourceSlice", "ResourceClaim", "Pod", "DeviceTaintRule")


def settings_from(settings: Any) -> EvictionSettings:
    return EvictionSettings(
        workers=max(int(getattr(settings, "eviction_workers", 32)), 1),
        grace_period=float(getattr(settings, "grace_period", 5.0)),
        use_eviction_api=bool(getattr(settings, "use_eviction_api", False)),
        status_interval=float(getattr(settings, "status_interval", 1.0)),
        retry_after=float(getattr(settings, "eviction_retry_after", 5.0)),
        full_replan=bool(getattr(settings, "eviction_full_replan", False)),
    )


def register(registry: kopf.OperatorRegistry, tracker: Tracker, settings: Any, *,
             client: KubeClient | None = None,
             ready: Callable[[], Awaitable[Any]] | None = None,
             supervisor: Supervisor | None = None) -> EvictionController:
    """Wire the controller; `ready` is awaited before its first decision (initial sync)."""
    if not any(isinstance(o, TaintRuleOverlay) for o in tracker.overlays):
        tracker.register_overlay(TaintRuleOverlay())
    api = client or shared_client(qps=float(getattr(settings, "qps", 200.0)),
                                  burst=int(getattr(settings, "burst", 400)))
    controller = EvictionController(tracker, api, settings_from(settings))
    register_loop(registry, "eviction", controller, api, ready=ready, supervisor=supervisor)
    return controller
