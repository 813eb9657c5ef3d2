"""What a controller that keeps a pod at draco's scheduling gate tells the user about it.

The allocator and narrowing controllers both report on the pods they serve the same way:
Events about the pod, and a condition of the controller's own type (`DracoAllocation`,
`DracoNarrowing`) that turns False with the reason while the pod is held and True once
it is served. Written here once so the two conditions cannot drift apart: merged by type
through pods/status (what `kubectl wait --for=condition=…` reads), with the pod's UID as
a precondition so a pod replaced under the same name is never touched. When to report
(deduplication, rate limits) stays each controller's decision.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import structlog

from operators.kube.client import KubeClient, RateLimiter
from operators.kube.conditions import rfc3339
from operators.kube.events import EventRecorder
from operators.kube.newest_last import NewestLast
from operators.kube.supervision import guarded
from operators.model import NamespacedName


@dataclass
class Reported:
    """The last False condition a controller wrote on a pod."""

    uid: str
    reason: str
    message: str
    since: str  # its lastTransitionTime, kept while the pod stays held for any reason
    at: float = 0.0  # when, on the controller's monotonic clock (for rate limits)


def involved_pod(key: NamespacedName, uid: str) -> dict[str, Any]:
    """An Event's involvedObject for a pod (the UID ties it to this pod, not a successor)."""
    return {"kind": "Pod", "apiVersion": "v1", "namespace": key.namespace, "name": key.name,
            "uid": uid}


NORMAL_BURST = 100
NORMAL_RATE = 10.0  # per second


class PodReporter:
    def __init__(self, client: KubeClient, controller: str, component: str, condition: str,
                 clock: Callable[[], datetime]) -> None:
        self.client = client
        self.controller = controller  # names the logger and the error counters
        self.condition_type = condition
        self.clock = clock
        # A pod's success report is one Event per pod and controller (Allocated,
        # Narrowed). In a burst of a thousand gated pods those were a third of the API
        # server's writes, and the flow is bound by what it accepts: beyond a burst of
        # 100 (then 10 a second) success Events are dropped and counted
        # (draco_events_dropped_total); Warnings are always posted. kube-scheduler too
        # reports a pod's success with one Event, and client-go drops Events it cannot send.
        self.events = EventRecorder(client, component, normal_budget=RateLimiter(NORMAL_RATE, NORMAL_BURST))
        self.log = structlog.get_logger(f"draco.{controller}")
        # One condition write per pod at a time, the newest last (`newest_last`).
        self._conditions: NewestLast[NamespacedName, tuple[str, dict[str, Any]]] = NewestLast(
            lambda key, body: self._write_condition(key, *body))
        self._latest = self._conditions.latest
        self._writing = self._conditions.writing

    async def event(self, key: NamespacedName, uid: str, reason: str, message: str,
                    type_: str = "Normal") -> None:
        await self.events.emit(involved_pod(key, uid), reason, message, type_)

    async def held(self, key: NamespacedName, uid: str, reason: str, message: str, since: str) -> None:
        """The pod stays gated: a Warning Event, and the condition False since `since`."""
        await self.event(key, uid, reason, message, "Warning")
        await self.condition(key, uid, "False", reason, message, since)

    async def condition(self, key: NamespacedName, uid: str, status: str, reason: str, message: str,
                        since: str | None = None) -> None:
        """Never raises: a pod gone (404) or replaced (409) needs no condition, and any other
        failure is logged and counted; the step that reports goes on."""
        cond = {"type": self.condition_type, "status": status, "reason": reason,
                "message": message[:1024], "lastTransitionTime": since or rfc3339(self.clock())}
        await self._conditions.submit(key, (uid, cond))

    async def _write_condition(self, key: NamespacedName, uid: str, cond: dict[str, Any]) -> None:
        with guarded(self.controller, "condition", kind="Pod", namespace=key.namespace, name=key.name):
            resp = await self.client.strategic_patch(
                f"/api/v1/namespaces/{key.namespace}/pods/{key.name}/status",
                {"metadata": {"uid": uid}, "status": {"conditions": [cond]}})
            if not resp.ok and resp.status not in (404, 409):
                self.log.warning("cannot write the pod condition", kind="Pod", namespace=key.namespace,
                                 name=key.name, status=resp.status)
