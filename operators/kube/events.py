"""core/v1 Events with CamelCase reasons, deduplicated so a flapping object cannot flood."""

from __future__ import annotations

import socket
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from prometheus_client import Counter

from operators.kube.client import KubeClient, RateLimiter
from operators.kube.shared import events_limiter
from operators.kube.supervision import guarded

EVENT_NAMESPACE = "default"  # where Events about cluster-scoped objects go

DROPPED = Counter("draco_events_dropped_total",
                  "Normal Events not posted because a burst of them used up their budget",
                  ["component", "reason"])
# Per component, made at zero when its recorder is: a dashboard shows every component
# that reports, and a rate of drops or failures from the first one.
OUTCOMES = Counter("draco_events_total",
                   "Events a component wanted to post, by outcome: posted, dropped (a burst of "
                   "Normal Events used up their budget) or failed (the API refused or did not answer)",
                   ["component", "outcome"])


class EventRecorder:
    def __init__(self, client: KubeClient, component: str, *, dedup_seconds: float = 600.0,
                 normal_budget: RateLimiter | None = None) -> None:
        # Events draw from a rate limit of their own (see shared.events_limiter); test
        # doubles of the client are used as they are.
        self.client = client.sibling(events_limiter(client.limiter)) if isinstance(client, KubeClient) else client
        self.component = component
        self.instance = socket.gethostname()
        self.dedup_seconds = dedup_seconds
        self.normal_budget = normal_budget  # None: every Normal Event is posted; else over it, dropped
        self.dropped = 0
        self._seen: dict[tuple[str, ...], float] = {}
        self.posted = 0
        for outcome in ("posted", "dropped", "failed"):
            OUTCOMES.labels(component=component, outcome=outcome)

    async def emit(self, involved: Mapping[str, Any], reason: str, message: str,
                   type_: str = "Normal") -> bool:
        """Post the Event unless the same one was posted recently; True when posted.

        Never raises: an Event is a report, and failing to post one must not fail the
        step that wanted to report (the failure is logged and counted instead).
        """
        key = (str(involved.get("kind")), str(involved.get("namespace", "")),
               str(involved.get("name")), str(involved.get("uid", "")), reason, message)
        now_mono = time.monotonic()
        seen = self._seen.get(key)
        if seen is not None and now_mono - seen < self.dedup_seconds:
            return False
        if type_ == "Normal" and self.normal_budget is not None and not self.normal_budget.try_take():
            self.dropped += 1
            DROPPED.labels(component=self.component, reason=reason).inc()
            OUTCOMES.labels(component=self.component, outcome="dropped").inc()
            return False
        self._seen[key] = now_mono
        if len(self._seen) > 10_000:
            cutoff = now_mono - self.dedup_seconds
            self._seen = {k: v for k, v in self._seen.items() if v >= cutoff}
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        namespace = involved.get("namespace") or EVENT_NAMESPACE
        body = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": f"{involved.get('name')}.", "namespace": namespace},
            "involvedObject": dict(involved), "reason": reason, "message": message[:1024],
            "type": type_, "source": {"component": self.component},
            "reportingComponent": self.component, "reportingInstance": self.instance,
            "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
        }
        with guarded(self.component, "event", kind=str(involved.get("kind") or ""),
                     namespace=str(involved.get("namespace") or ""), name=str(involved.get("name") or "")):
            resp = await self.client.post(f"/api/v1/namespaces/{namespace}/events", body)
            if resp.ok:
                self.posted += 1
            OUTCOMES.labels(component=self.component, outcome="posted" if resp.ok else "failed").inc()
            return resp.ok
        OUTCOMES.labels(component=self.component, outcome="failed").inc()  # raised
        self._seen.pop(key, None)  # not posted: another attempt may succeed
        return False
