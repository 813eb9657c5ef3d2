"""kopf shell of the health controller: DeviceHealthPolicy events in, the controller's
writes out through draco's one write path (`operators.kube`, the process's shared rate
limit and the client's retries)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kopf
import structlog

from operators.health.controller import RULES_PATH, HealthController
from operators.kube.client import DEFAULT_BURST, DEFAULT_QPS, KubeClient
from operators.kube.events import EventRecorder
from operators.kube.shared import shared_client
from operators.kube.supervision import LoopState, Supervisor, default_supervisor
from operators.tracker import Tracker
from operators.tracker.taint_rules import TaintRuleOverlay

log = structlog.get_logger("draco.health")

GROUP = "resource.draco.dev"
VERSION = "v1alpha1"
PLURAL = "devicehealthpolicies"
STATUS_PATH = f"/apis/{GROUP}/{VERSION}/{PLURAL}/{{name}}/status"


class WriteError(RuntimeError):
    """A write the API refused; the pass fails and is retried."""


class KubeHealthWriter:
    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.events = EventRecorder(client, "draco-health", dedup_seconds=0)

    async def create_rule(self, body: Mapping[str, Any]) -> None:
        resp = await self.client.post(RULES_PATH, dict(body))
        if not resp.ok and resp.status != 409:  # 409: written by an earlier pass
            raise WriteError(f"creating DeviceTaintRule {body['metadata']['name']}: HTTP {resp.status}: "
                             f"{_message(resp.body)}")

    async def delete_rule(self, name: str) -> None:
        resp = await self.client.delete(f"{RULES_PATH}/{name}")
        if not resp.ok and resp.status != 404:
            raise WriteError(f"deleting DeviceTaintRule {name}: HTTP {resp.status}: {_message(resp.body)}")

    async def patch_status(self, name: str, status: Mapping[str, Any]) -> None:
        resp = await self.client.merge_patch(STATUS_PATH.format(name=name), {"status": dict(status)})
        if not resp.ok and resp.status != 404:
            raise WriteError(f"DeviceHealthPolicy {name}: status write: HTTP {resp.status}: "
                             f"{_message(resp.body)}")

    async def post_event(self, involved: Mapping[str, Any], reason: str, message: str, type_: str) -> None:
        await self.events.emit(involved, reason, message, type_)


def _message(body: Any) -> Any:
    return body.get("message") if isinstance(body, Mapping) else body


def register(registry: kopf.OperatorRegistry, tracker: Tracker, settings: Any, *,
             writer: Any = None, supervisor: Supervisor | None = None) -> HealthController:
    """Wire the health controller into REGISTRY; returns it (tests read its counters)."""
    if not any(isinstance(o, TaintRuleOverlay) for o in tracker.overlays):
        tracker.register_overlay(TaintRuleOverlay())
    out = writer or KubeHealthWriter(shared_client(qps=float(getattr(settings, "qps", DEFAULT_QPS)),
                                                   burst=int(getattr(settings, "burst", DEFAULT_BURST))))
    controller = HealthController(tracker, out, debounce=float(getattr(settings, "health_debounce", 0.2)))
    loops: list[LoopState] = []
    boss = supervisor or default_supervisor()

    @kopf.on.event(GROUP, VERSION, PLURAL, registry=registry)
    async def devicehealthpolicy_event(event: Mapping[str, Any], **_: Any) -> None:
        body = event.get("object")
        if isinstance(body, Mapping):
            controller.observe(event.get("type"), body)

    @kopf.on.startup(registry=registry)
    async def start_health(**_: Any) -> None:
        loops.append(boss.start("draco-health", controller.run, controller="health"))

    @kopf.on.cleanup(registry=registry)
    async def stop_health(**_: Any) -> None:
        for loop in loops:
            await boss.stop(loop)
        loops.clear()

    return controller
