"""The eviction controller's loop: decisions from the tracker, turned into API writes.

Everything it decides comes from `decisions`, `index` and `status` (pure); this class
only schedules work: evicting due pods with a bounded worker pool and a rate limit,
stamping `spec.taint.timeAdded` where the CRD could not default it, and writing each
rule's `EvictionInProgress` condition at most once a second (see `rule_writer`).

Work per event, not per cluster: tracker changes are collected as they arrive and fed
to an `EvictionIndex` once per pass, so a pod status update costs that pod, not a
re-plan of every claim. `EvictionSettings.full_replan` keeps the old way (re-plan the
whole cluster every pass) as the benchmarks' baseline.

Supervised: every step about one object (a claim's or pod's decision, one eviction,
one rule's status) is guarded, so a failure is logged with the object, counted in
`draco_controller_errors_total{controller="eviction",step=…}`, reported in a Warning
Event on the object where there is one, and the loop goes on with the others.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog

from operators.eviction import metrics
from operators.eviction.decisions import EvictionPlan, Ownership, PodEviction, plan
from operators.eviction.index import EvictionIndex
from operators.eviction.rule_writer import GATE, IDLE, RULES_PATH, RuleState, RuleSteps, rfc3339
from operators.eviction.settings import EvictionSettings
from operators.eviction.timemath import duration, plus
from operators.kube.client import KubeClient
from operators.kube.events import EventRecorder
from operators.kube.shell import PassLoop
from operators.kube.supervision import guarded, report_error
from operators.model import ModelError, NamespacedName, ObjectRef
from operators.tracker import Change, Tracker

log = structlog.get_logger("draco.eviction")
__all__ = ["GATE", "RULES_PATH", "EvictionController", "EvictionSettings", "rfc3339"]


def _utcnow() -> datetime:
    return datetime.now(UTC)


class _Pending:
    """Tracker changes collected between passes (deduplicated keys, not Change objects)."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.devices: set[Any] = set()
        self.allocations: set[Any] = set()
        self.claims: set[NamespacedName] = set()
        self.pods: set[NamespacedName] = set()
        self.objects: set[ObjectRef] = set()

    def add(self, change: Change) -> None:
        self.devices |= change.devices
        self.allocations |= change.allocations
        self.claims |= change.claims
        self.pods |= change.pods
        self.objects |= change.objects

    def take(self) -> Change:
        change = Change(devices=frozenset(self.devices), allocations=frozenset(self.allocations),
                        claims=frozenset(self.claims), pods=frozenset(self.pods),
                        objects=frozenset(self.objects))
        self.clear()
        return change


class EvictionController(PassLoop, RuleSteps):
    name = "eviction"

    def __init__(self, tracker: Tracker, client: KubeClient, settings: EvictionSettings | None = None,
                 *, clock: Callable[[], datetime] = _utcnow) -> None:
        self.tracker = tracker
        self.client = client
        self.settings = settings or EvictionSettings()
        self.clock = clock
        self.events = EventRecorder(client, "draco-device-taint-eviction")
        self.rules: dict[str, RuleState] = {}
        self.in_flight: set[str] = set()  # pod uids being evicted
        self.done: set[str] = set()  # pod uids evicted (never twice)
        self.retry_at: dict[str, datetime] = {}
        self.queue: dict[NamespacedName, PodEviction] = {}  # due, not yet evicted
        self.refused: set[str] = set()  # pod uids told that a disruption budget refused them
        self.sem = asyncio.Semaphore(self.settings.workers)
        self.evicted_total = 0
        self.passes = 0
        self.errors_reported: set[str] = set()
        self.index = EvictionIndex()
        self.left_to_upstream: set[str] = set()  # pod uids upstream's controller evicts
        self._uids: dict[NamespacedName, set[str]] = {}  # pod -> its uids in the sets above
        self._indexed = False
        self._pending = _Pending()
        self._init_loop()

    def resync(self) -> None:
        self._indexed = False  # changes may have been missed: rebuild the index next pass

    @property
    def ownership(self) -> Ownership:
        return self.index.ownership

    def set_ownership(self, ownership: Ownership) -> None:
        """Which taint sources upstream's controller evicts for (from discovery); a
        change re-decides every claim."""
        if ownership == self.index.ownership:
            return
        log.info("taint ownership changed", slice_taints="upstream" if ownership.slice_taints else "draco",
                 upstream_rules="upstream" if ownership.upstream_rules else "draco")
        self.index.ownership = ownership
        self.resync()
        self.wake.set()

    def retry_delay(self) -> float:
        return min(self.settings.retry_after, IDLE)

    def _on_change(self, change: Change) -> None:
        if not self.settings.full_replan:
            self._pending.add(change)
        if self._uids:
            self._release_gone(change.pods)
        self.wake.set()

    def _note_uid(self, pod: PodEviction) -> None:
        self._uids.setdefault(pod.pod, set()).add(pod.uid)

    def _release_gone(self, keys: Iterable[NamespacedName]) -> None:
        """Forget the uids of pods that are gone: "never twice" needs a uid only while its
        pod exists, and a long-running controller must not keep every uid it evicted."""
        for key in keys:
            uids = self._uids.get(key)
            if uids is None:
                continue
            pod = self.tracker.pod(key)
            gone = set(uids) if pod is None else {u for u in uids if u != pod.meta.uid}
            for uid in gone:
                if uid in self.in_flight:
                    continue  # released when the eviction in flight ends
                uids.discard(uid)
                self.done.discard(uid)
                self.left_to_upstream.discard(uid)
                self.refused.discard(uid)
                self.retry_at.pop(uid, None)
            if not uids:
                del self._uids[key]

    # -- main loop

    async def step(self) -> float:
        """One pass; returns how long to sleep unless woken earlier."""
        self.passes += 1
        now = self.clock()
        if self.settings.full_replan:
            current: EvictionPlan | None = plan(self.tracker, ownership=self.ownership)
            assert current is not None
            await self._report_claim_errors(current.errors)
            self.queue = {pod.pod: pod for pod in current.due(now) if pod.uid not in self.done}
            next_later = next(iter(current.later(now)), None)
            next_due = next_later.when if next_later is not None else None
        else:
            current = None
            self._update_index()
            await self._report_claim_errors(self.index.new_errors)
            await self._report_failures()
            for pod in self.index.pop_due(now):
                self.queue[pod.pod] = pod
            next_due = self.index.next_due()
        self._dispatch(now)
        next_wake = IDLE
        if next_due is not None:
            next_wake = min(next_wake, max((next_due - now).total_seconds(), 0.05))
        if self.retry_at:
            soonest = min(self.retry_at.values())
            next_wake = min(next_wake, max((soonest - now).total_seconds(), 0.05))
        return min(next_wake, await self._rules_step(now, current))

    def _update_index(self) -> None:
        if self._indexed:
            with guarded(self.name, "plan") as g:
                self.index.update(self.tracker, self._pending.take())
            if not g.failed:
                return
        # first pass, or an update that failed half way: start over from the tracker
        self._indexed = False
        self._pending.clear()
        self.index.rebuild(self.tracker)
        self._indexed = True

    def _dispatch(self, now: datetime) -> None:
        """Start evictions for queued pods that are due, not in flight, not waiting to
        retry, as many as there are free workers. A started pod leaves the queue (a
        failed one comes back to it), so a pass never walks the evictions under way:
        draining 2,000 pods took a walk over all of them after every single eviction."""
        free = self.settings.workers - len(self.in_flight)
        for key in list(self.queue):
            if free <= 0:
                break
            queued = self.queue[key]
            pod = queued if self.settings.full_replan else self.index.pods.get(key)
            if pod is None or pod.when > now or pod.uid in self.done:
                del self.queue[key]  # gone, tolerated longer (the index re-queues it), or done
                continue
            if pod.deferred_at(now):
                # upstream's controller evicts it; draco looks again after a grace period
                # and evicts a pod upstream left running (its controller turned off, say)
                give_up = max(pod.upstream_when or now, pod.when) + timedelta(seconds=self.settings.upstream_grace)
                if now < give_up:
                    self._leave_to_upstream(pod)
                    self.retry_at[pod.uid] = give_up
                    continue
                if self.retry_at.get(pod.uid) == give_up:
                    log.warning("upstream's controller did not evict the pod in time; draco does",
                                kind="Pod", namespace=pod.pod.namespace, name=pod.pod.name,
                                grace=self.settings.upstream_grace)
                    self.retry_at.pop(pod.uid, None)
            if pod.uid in self.in_flight:
                del self.queue[key]  # its eviction is under way (and requeues it if it fails)
                continue
            self.queue[key] = pod
            if self.retry_at.get(pod.uid, now) > now:
                continue
            del self.queue[key]
            free -= 1
            self.in_flight.add(pod.uid)  # before the task runs: the next pass must not start it again
            self._spawn(self._evict(pod))
        metrics.QUEUE_DEPTH.set(len(self.queue) + len(self.in_flight))

    def _leave_to_upstream(self, pod: PodEviction) -> None:
        if pod.uid not in self.left_to_upstream:
            self._note_uid(pod)
            self.left_to_upstream.add(pod.uid)
            metrics.LEFT_TO_UPSTREAM.inc()
            log.info("eviction left to upstream's controller", kind="Pod", namespace=pod.pod.namespace,
                     name=pod.pod.name, reasons=sorted(pod.reasons))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    # -- evictions

    async def _evict(self, pod: PodEviction) -> None:
        self._note_uid(pod)
        self.in_flight.add(pod.uid)
        ns, name = pod.pod.namespace, pod.pod.name
        ok = False
        try:
            with guarded(self.name, "evict", kind="Pod", namespace=ns, name=name) as g:
                async with self.sem:
                    ok = await self._evict_one(pod)
            if g.failed:
                await self._report_failure(self._pod_ref(pod), g.error)
            if ok:
                self.done.add(pod.uid)
                self.queue.pop(pod.pod, None)
                self.retry_at.pop(pod.uid, None)
                self.refused.discard(pod.uid)
                self.evicted_total += 1
                metrics.POD_DELETIONS.inc()
                metrics.POD_DELETION_LATENCY.observe(max((self.clock() - pod.when).total_seconds(), 0))
                for rule in pod.rules:
                    state = self.rules.setdefault(rule, RuleState())
                    state.evicted += 1
                    metrics.rule_evicted(rule)
                    self._remember_devices(rule, pod)
            else:
                self.retry_at[pod.uid] = plus(self.clock(), duration(self.settings.retry_after)) or self.clock()
                self.queue.setdefault(pod.pod, pod)  # dispatched again once the retry is due
        finally:
            self.in_flight.discard(pod.uid)
            if self.tracker.pod(pod.pod) is None:  # its DELETED event came while in flight
                self._release_gone([pod.pod])
            self.wake.set()

    @staticmethod
    def _pod_ref(pod: PodEviction) -> dict[str, Any]:
        return {"kind": "Pod", "apiVersion": "v1", "namespace": pod.pod.namespace, "name": pod.pod.name,
                "uid": pod.uid}

    async def _evict_one(self, pod: PodEviction) -> bool:
        """Mark the pod with DisruptionTarget, then delete (or evict) it, guarded by its UID.

        A strategic merge patch merges conditions by type, so no GET is needed first;
        a UID mismatch (409) means the pod was replaced under the same name: done. The
        "Marking for deletion" Event is posted only once the deletion or eviction was
        accepted; a disruption budget's refusal gets an Event of its own, once per pod.
        """
        ns, name = pod.pod.namespace, pod.pod.name
        path = f"/api/v1/namespaces/{ns}/pods/{name}"
        involved = self._pod_ref(pod)
        cond = {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByDeviceTaintManager",
                "message": "Device Taint manager: deleting due to NoExecute taint",
                "lastTransitionTime": rfc3339(self.clock())}
        patched = await self.client.strategic_patch(
            f"{path}/status", {"metadata": {"uid": pod.uid}, "status": {"conditions": [cond]}})
        if patched.status in (404, 409):
            return True
        if not patched.ok:
            log.warning("cannot mark pod", kind="Pod", namespace=ns, name=name, status=patched.status)
            return False
        body = patched.body if isinstance(patched.body, dict) else {}
        if (body.get("metadata") or {}).get("deletionTimestamp"):
            return True  # already going
        options = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": pod.uid}}
        if self.settings.use_eviction_api:
            resp = await self.client.post(f"{path}/eviction", {
                "apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": name, "namespace": ns}, "deleteOptions": options})
            if resp.status == 429:
                message = resp.body.get("message") if isinstance(resp.body, dict) else None
                log.info("eviction refused by a disruption budget", kind="Pod", namespace=ns, name=name,
                         message=message)
                if pod.uid not in self.refused:
                    self.refused.add(pod.uid)
                    await self.events.emit(
                        involved, "DeviceTaintEvictionRefused",
                        "eviction for a NoExecute device taint refused by a PodDisruptionBudget "
                        f"({message or 'no message'}); draco retries every "
                        f"{self.settings.retry_after:g}s", "Warning")
                return False
        else:
            resp = await self.client.delete(path, options)
        if resp.ok:
            # Posted beside the worker, not by it: an Event is a report, and waiting for
            # its round trip would hold a worker slot (a third of each eviction's time).
            self._spawn(self._emit(involved, "DeviceTaintManagerEviction", "Marking for deletion"))
            log.info("evicted pod", kind="Pod", namespace=ns, name=name, reasons=sorted(pod.reasons))
            return True
        if resp.status in (404, 409):
            return True  # gone, or replaced under the same name
        log.warning("cannot delete pod", kind="Pod", namespace=ns, name=name, status=resp.status)
        return False

    async def _emit(self, involved: dict[str, Any], reason: str, message: str) -> None:
        await self.events.emit(involved, reason, message)

    def _remember_devices(self, rule: str, pod: PodEviction) -> None:
        state = self.rules.setdefault(rule, RuleState())
        for key in pod.claims:
            claim = self.tracker.claim(key)
            if claim is None or claim.allocation is None:
                continue
            for result in claim.allocation.results:
                state.evicted_claims.setdefault(str(result.id), set()).add(claim.meta.uid)

    # -- reporting bad objects

    async def _report_claim_errors(self, errors: list[ModelError]) -> None:
        for err in errors:
            key = f"{err.ref}|{err.message}"
            if key in self.errors_reported:
                continue
            self.errors_reported.add(key)
            with guarded(self.name, "report", kind="ResourceClaim", namespace=err.ref.namespace,
                         name=err.ref.name):
                log.error("malformed claim tolerations", kind="ResourceClaim", namespace=err.ref.namespace,
                          name=err.ref.name, error=str(err))
                claim = self.tracker.claim(NamespacedName(err.ref.namespace, err.ref.name))
                await self.events.emit(
                    {"kind": "ResourceClaim", "apiVersion": "resource.k8s.io/v1", "namespace": err.ref.namespace,
                     "name": err.ref.name, "uid": claim.meta.uid if claim else ""},
                    "InvalidTolerations",
                    f"{err.path}: {err.message}; draco ignores this annotation until it is fixed", "Warning")

    async def _report_failures(self) -> None:
        """Claims and pods the index skipped because deciding them raised."""
        for failure in self.index.new_failures:
            ref = failure.ref
            report_error(self.name, "plan", failure.error, kind=ref.kind, namespace=ref.namespace, name=ref.name)
            if ref.kind == "ResourceClaim":
                obj: Any = self.tracker.claim(NamespacedName(ref.namespace, ref.name))
                api_version = "resource.k8s.io/v1"
            else:
                obj = self.tracker.pod(NamespacedName(ref.namespace, ref.name))
                api_version = "v1"
            await self._report_failure(
                {"kind": ref.kind, "apiVersion": api_version, "namespace": ref.namespace, "name": ref.name,
                 "uid": obj.meta.uid if obj is not None else ""}, failure.error)

    async def _report_failure(self, involved: dict[str, Any], error: BaseException | None) -> None:
        """A Warning Event on an object a step failed on (deduplicated by the recorder)."""
        what = f"{type(error).__name__}: {error}" if error is not None else "unknown error"
        await self.events.emit(
            involved, "DeviceTaintEvictionFailed",
            f"draco's device-taint eviction controller failed on this object ({what}); it skips "
            "the object and tries again when it changes or on the next retry", "Warning")
