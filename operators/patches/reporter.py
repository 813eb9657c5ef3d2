"""The reporter loop: turns the overlay's reports into status writes and Events.

Transport-free: it talks to the API through a `PatchWriter`, so tests can record the
writes and `handlers.py` can plug in the real client. Work is coalesced: tracker
changes only set a flag, and one pass after a short quiet period writes what differs.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

import structlog

from operators.kube.supervision import guarded
from operators.patches import metrics
from operators.patches.report import EventLedger, EventSpec, desired_status, status_differs
from operators.tracker import Change, Tracker
from operators.tracker.slice_patches import KIND, SlicePatchOverlay

log = structlog.get_logger("draco.patches")

API_VERSION = "resource.draco.dev/v1alpha1"


class PatchWriter(Protocol):
    async def patch_status(self, name: str, status: Mapping[str, Any]) -> None:
        """Replace the patch's status (conditions included) through the status subresource."""
        ...

    async def post_event(self, involved: Mapping[str, Any], event: EventSpec) -> None:
        """Post a core/v1 Event about `involved` (an ObjectReference)."""
        ...


def _utcnow() -> datetime:
    return datetime.now(UTC)


class PatchReporter:
    def __init__(
        self,
        tracker: Tracker,
        overlay: SlicePatchOverlay,
        writer: PatchWriter,
        *,
        clock: Callable[[], datetime] = _utcnow,
        debounce: float = 0.2,
    ) -> None:
        self.tracker = tracker
        self.overlay = overlay
        self.writer = writer
        self.clock = clock
        self.debounce = debounce
        self.ledger = EventLedger()
        self.status: dict[str, Mapping[str, Any]] = {}  # last known status per patch
        self.uids: dict[str, str] = {}
        self.passes = 0
        self.failed: list[str] = []  # patches whose last pass failed (retried)
        self._wake = asyncio.Event()
        self._unsubscribe: Callable[[], None] | None = None

    # -- inputs ---------------------------------------------------------------------

    def start(self) -> None:
        if self._unsubscribe is None:
            self._unsubscribe = self.tracker.subscribe(self._on_change)
        self._wake.set()

    def stop(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    def observe(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """Remember what the API holds for a patch (its status, for diffing)."""
        md = body.get("metadata") or {}
        name = md.get("name")
        if not isinstance(name, str):
            return
        if event_type == "DELETED":
            for gauge in (metrics.MATCHED_DEVICES, metrics.FAULTY):
                with contextlib.suppress(KeyError):  # never reported: nothing to drop
                    gauge.remove(name)
            self.status.pop(name, None)
            self.uids.pop(name, None)
            self.ledger.forget(name)
        else:
            status = body.get("status")
            self.status[name] = status if isinstance(status, Mapping) else {}
            uid = md.get("uid")
            if isinstance(uid, str):
                self.uids[name] = uid
        self._wake.set()

    def _on_change(self, change: Change) -> None:
        # Any device, class or patch change may move a count or a fault.
        if change.devices or change.device_classes or change.objects or change.errors:
            self._wake.set()

    # -- the loop ---------------------------------------------------------------------

    async def run(self) -> None:
        self.start()
        try:
            while True:
                await self._wake.wait()
                await asyncio.sleep(self.debounce)  # let a burst of events settle
                self._wake.clear()
                await self.sync_once()
                if self.failed:  # a failed write (or a bug about one patch) is retried
                    await asyncio.sleep(1.0)
                    self._wake.set()
        finally:
            self.stop()

    async def sync_once(self) -> int:
        """Write what differs; returns the number of API writes."""
        self.passes += 1
        self.failed = []
        writes = 0
        now = self.clock()
        for name in self.overlay.patch_names():
            if name not in self.status:
                continue  # not (or no longer) in the API: nothing to write to
            # One patch whose report or write fails is logged, counted and retried on a
            # later pass; the others are still served.
            with guarded("patches", "status", kind=KIND, name=name) as guard:
                writes += await self._sync_patch(name, now)
            if guard.failed:
                self.failed.append(name)
        return writes

    async def _sync_patch(self, name: str, now: datetime) -> int:
        """Write one patch's status and due Events; returns the number of API writes."""
        writes = 0
        report = self.overlay.report(name)
        if report is None:
            return 0
        metrics.MATCHED_DEVICES.labels(name).set(report.matched_devices)
        metrics.FAULTY.labels(name).set(1 if report.faulty else 0)
        current = self.status.get(name)
        self.ledger.seed(report, current)
        desired = desired_status(report, current, now)
        if status_differs(current, desired):
            await self.writer.patch_status(name, desired)
            cond = desired["conditions"][-1]
            log.info("patch status", kind=KIND, name=name,
                     matched_devices=desired["matchedDevices"], faulty=cond["status"],
                     reason=cond["reason"], generation=desired["observedGeneration"])
            self.status[name] = desired
            metrics.STATUS_WRITES.inc()
            writes += 1
        for event in self.ledger.due(report):
            involved = {"apiVersion": API_VERSION, "kind": KIND, "name": name,
                        "uid": self.uids.get(name, "")}
            await self.writer.post_event(involved, event)
            log.warning("patch event", kind=KIND, name=name, reason=event.reason,
                        message=event.message)
            metrics.EVENTS.labels(event.reason).inc()
            writes += 1
        return writes
