"""kopf shell of the narrowing controller (`draco run --controllers narrowing`).

I/O only: Pods and ResourceClaims reach the shared tracker through the feed (see
`operators.kube.feed`); this module starts the controller loop on startup, supervised
(a crash is logged, counted and the loop restarted), and stops it on cleanup.

Nodes do not go through the tracker (no other controller reads them): a kopf low-level
event handler hands each Node watch event to the controller's own node cache, and the
controller lists the nodes once after the initial sync, before its first decision.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import kopf

from operators.kube.client import KubeClient
from operators.kube.shared import shared_client
from operators.kube.shell import register_loop
from operators.kube.supervision import Supervisor, guarded
from operators.model.gates import gate_setting
from operators.narrowing.controller import NarrowingController, NarrowingSettings
from operators.tracker import Tracker

FEEDS = ("ResourceClaim", "Pod", "Gang", "PodGroup")


def settings_from(settings: Any) -> NarrowingSettings:
    return NarrowingSettings(
        workers=max(int(getattr(settings, "narrowing_workers", 16)), 1),
        timeout=float(getattr(settings, "narrowing_timeout", 300.0)),
        retry_after=float(getattr(settings, "narrowing_retry_after", 5.0)),
        act_beside=gate_setting(getattr(settings, "act_beside_gates", None)),
    )


def register(registry: kopf.OperatorRegistry, tracker: Tracker, settings: Any, *,
             client: KubeClient | None = None,
             ready: Callable[[], Awaitable[Any]] | None = None,
             supervisor: Supervisor | None = None) -> NarrowingController:
    """Wire the controller; `ready` is awaited before its first decision (initial sync)."""
    api = client or shared_client(qps=float(getattr(settings, "qps", 200.0)),
                                  burst=int(getattr(settings, "burst", 400)))
    controller = NarrowingController(tracker, api, settings_from(settings))

    async def narrowing_nodes(event: Mapping[str, Any], **_: Any) -> None:
        body = event.get("object")
        if isinstance(body, Mapping):
            with guarded("narrowing", "node-event", kind="Node"):
                controller.on_node(str(event.get("type") or "ADDED"), body)

    kopf.on.event(group="", version="v1", plural="nodes", registry=registry)(narrowing_nodes)

    async def synced() -> None:
        if ready is not None:
            await ready()
        await controller.load_nodes()

    register_loop(registry, "narrowing", controller, api, ready=synced, supervisor=supervisor)

    @kopf.on.startup(registry=registry)
    def narrowing_no_diffbase(settings: kopf.OperatorSettings, **_: Any) -> None:
        skip_diffbase(registry, settings)

    return controller


def skip_diffbase(registry: kopf.OperatorRegistry, settings: kopf.OperatorSettings) -> bool:
    """Turn kopf's per-event diff base off, unless some handler needs it: change handlers,
    and spawning ones (daemons, timers), which read the diff too."""
    if registry._changing.get_all_handlers() or registry._spawning.get_all_handlers():
        return False
    settings.persistence.diffbase_storage = NoDiffBase()
    return True


class NoDiffBase(kopf.AnnotationsDiffBaseStorage):
    """kopf computes a deep-copied "essence" of every watched object on every event, for
    change handlers (on.create/update/field) alone; draco has none (its watches are
    low-level event handlers), and on a pod stream that copying was a third of kopf's
    CPU per event: the time a reserved claim's pod waits for its narrowing."""

    def build(self, *, body: Any, extra_fields: Any = None) -> Any:
        return None

    def fetch(self, *, body: Any) -> Any:
        return None
