"""kopf shell of the allocator controller (`draco run --controllers allocator`).

I/O only: ResourceSlices, DeviceClasses, ResourceClaims, Pods and DeviceTaintRules
reach the shared tracker through the feed (`operators.kube.feed`); Nodes (names and
labels: where devices can be used) go straight to the controller, which lists them
once at start and follows them with a low-level event handler. The loop starts
supervised after the initial sync and stops on cleanup.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import kopf

from operators.allocator_controller.controller import AllocatorController, AllocatorSettings
from operators.allocator_controller.holds import DEFAULT_TTL
from operators.kube.client import KubeClient
from operators.kube.shared import shared_client
from operators.kube.shell import register_loop
from operators.kube.supervision import Supervisor, guarded
from operators.model.gates import gate_setting
from operators.tracker import Tracker

FEEDS = ("ResourceSlice", "DeviceClass", "ResourceClaim", "Pod", "DeviceTaintRule", "Gang", "PodGroup")


def settings_from(settings: Any) -> AllocatorSettings:
    return AllocatorSettings(
        workers=max(int(getattr(settings, "allocator_workers", 32)), 1),
        budget=float(getattr(settings, "allocation_timeout", 10.0)),
        retry_after=float(getattr(settings, "allocator_retry_after", 5.0)),
        report_interval=float(getattr(settings, "allocator_report_interval", 60.0)),
        hold_ttl=float(getattr(settings, "allocator_hold_ttl", DEFAULT_TTL)),
        preemption=bool(getattr(settings, "preemption", False)),
        nomination_timeout=float(getattr(settings, "nomination_timeout", 300.0)),
        use_eviction_api=bool(getattr(settings, "use_eviction_api", False)),
        act_beside=gate_setting(getattr(settings, "act_beside_gates", None)),
    )


def register(registry: kopf.OperatorRegistry, tracker: Tracker, settings: Any, *,
             client: KubeClient | None = None,
             ready: Callable[[], Awaitable[Any]] | None = None,
             supervisor: Supervisor | None = None) -> AllocatorController:
    """Wire the controller; `ready` is awaited before its first decision (initial sync)."""
    api = client or shared_client(qps=float(getattr(settings, "qps", 200.0)),
                                  burst=int(getattr(settings, "burst", 400)))
    controller = AllocatorController(tracker, api, settings_from(settings))

    @kopf.on.event("", "v1", "nodes", registry=registry)
    async def allocator_nodes(event: Mapping[str, Any], **_: Any) -> None:
        body = event.get("object")
        if not isinstance(body, Mapping):
            return
        name = str((body.get("metadata") or {}).get("name") or "")
        with guarded("allocator", "node", kind="Node", name=name):
            controller.node_event(str(event.get("type") or "ADDED"), body)

    register_loop(registry, "allocator", controller, api, ready=ready, supervisor=supervisor)
    return controller
