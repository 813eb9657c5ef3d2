"""The eviction controller's loop: decisions from the tracker, turned into API writes.

Everything it decides comes from `decisions` and `status` (pure); this class only
schedules work: evicting due pods with a bounded worker pool and a rate limit, stamping
`spec.taint.timeAdded` where the CRD could not default it, and writing each rule's
`EvictionInProgress` condition at most once a second.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog

from operators.eviction import metrics
from operators.eviction import status as rule_status
from operators.eviction.decisions import EvictionPlan, PodEviction, plan
from operators.kube.client import KubeClient
from operators.kube.conditions import merge_condition
from operators.kube.events import EventRecorder
from operators.model import NamespacedName
from operators.tracker import Tracker
from operators.tracker.taint_rules import DeviceTaintRule

log = structlog.get_logger("draco.eviction")
RULES_PATH = "/apis/resource.draco.dev/v1alpha1/devicetaintrules"
GATE = "resource.draco.dev/allocation"


def _utcnow() -> datetime:
    return datetime.now(UTC)


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class EvictionSettings:
    workers: int = 10
    grace_period: float = 5.0  # seconds before a condition may become False
    status_interval: float = 1.0  # at most one status write per rule per interval
    use_eviction_api: bool = False  # policy/v1 Eviction, honouring PodDisruptionBudgets
    evictions_per_second: float = 0.0  # 0: only the client's QPS limits evictions
    retry_after: float = 5.0  # when the Eviction API refuses (PDB) or a write fails


@dataclass
class _RuleState:
    evicted: int = 0
    last_write: float = -1e9
    effect: str | None = None
    effect_since: datetime | None = None
    written_generation: int | None = None
    announced: int = 0  # evictions already reported in an Event on the rule
    evicted_claims: dict[str, set[str]] = field(default_factory=dict)  # device -> claim uids
    warned: set[str] = field(default_factory=set)


class EvictionController:
    def __init__(self, tracker: Tracker, client: KubeClient, settings: EvictionSettings | None = None,
                 *, clock: Callable[[], datetime] = _utcnow) -> None:
        self.tracker = tracker
        self.client = client
        self.settings = settings or EvictionSettings()
        self.clock = clock
        self.events = EventRecorder(client, "draco-device-taint-eviction")
        self.wake = asyncio.Event()
        self.rules: dict[str, _RuleState] = {}
        self.in_flight: set[str] = set()  # pod uids being evicted
        self.done: set[str] = set()  # pod uids evicted (never twice)
        self.retry_at: dict[str, datetime] = {}
        self.sem = asyncio.Semaphore(self.settings.workers)
        self.tasks: set[asyncio.Task[None]] = set()
        self.evicted_total = 0
        self.errors_reported: set[str] = set()
        self._unsubscribe = tracker.subscribe(lambda change: self.wake.set())

    # -- main loop

    async def run(self) -> None:
        try:
            while True:
                delay = await self.step()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.wake.wait(), timeout=delay)
                self.wake.clear()
        finally:
            self._unsubscribe()
            for task in list(self.tasks):
                task.cancel()

    async def step(self) -> float:
        """One pass; returns how long to sleep unless woken earlier."""
        now = self.clock()
        current = plan(self.tracker)
        await self._report_claim_errors(current)
        due = [p for p in current.due(now) if p.uid not in self.done and p.uid not in self.in_flight
               and self.retry_at.get(p.uid, now) <= now]
        metrics.QUEUE_DEPTH.set(len([p for p in current.due(now) if p.uid not in self.done]))
        for pod in due:
            self._spawn(self._evict(pod, now))
        next_wake = 5.0
        later = current.later(now)
        if later:
            next_wake = min(next_wake, max((later[0].when - now).total_seconds(), 0.05))
        if self.retry_at:
            soonest = min(self.retry_at.values())
            next_wake = min(next_wake, max((soonest - now).total_seconds(), 0.05))
        next_wake = min(next_wake, await self._rules_step(now, current))
        return next_wake

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    # -- evictions

    async def _evict(self, pod: PodEviction, now: datetime) -> None:
        self.in_flight.add(pod.uid)
        try:
            async with self.sem:
                ok = await self._evict_one(pod)
            if ok:
                self.done.add(pod.uid)
                self.retry_at.pop(pod.uid, None)
                self.evicted_total += 1
                metrics.POD_DELETIONS.inc()
                metrics.POD_DELETION_LATENCY.observe(max((self.clock() - pod.when).total_seconds(), 0))
                for rule in pod.rules:
                    state = self.rules.setdefault(rule, _RuleState())
                    state.evicted += 1
                    self._remember_devices(rule, pod)
            else:
                self.retry_at[pod.uid] = self.clock() + timedelta(seconds=self.settings.retry_after)
        finally:
            self.in_flight.discard(pod.uid)
            self.wake.set()

    async def _evict_one(self, pod: PodEviction) -> bool:
        """Mark the pod with DisruptionTarget, then delete it, both guarded by its UID.

        A strategic merge patch merges conditions by type, so no GET is needed first;
        a UID mismatch (409) means the pod was replaced under the same name: done.
        """
        ns, name = pod.pod.namespace, pod.pod.name
        path = f"/api/v1/namespaces/{ns}/pods/{name}"
        involved = {"kind": "Pod", "apiVersion": "v1", "namespace": ns, "name": name, "uid": pod.uid}
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
        if (patched.body or {}).get("metadata", {}).get("deletionTimestamp"):
            return True  # already going
        await self.events.emit(involved, "DeviceTaintManagerEviction", "Marking for deletion")
        options = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": pod.uid}}
        if self.settings.use_eviction_api:
            resp = await self.client.post(f"{path}/eviction", {
                "apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": name, "namespace": ns}, "deleteOptions": options})
            if resp.status == 429:
                log.info("eviction refused by a disruption budget", kind="Pod", namespace=ns, name=name,
                         message=(resp.body or {}).get("message"))
                return False
        else:
            resp = await self.client.delete(path, options)
        if resp.ok or resp.status in (404, 409):
            log.info("evicted pod", kind="Pod", namespace=ns, name=name, reasons=sorted(pod.reasons))
            return True
        log.warning("cannot delete pod", kind="Pod", namespace=ns, name=name, status=resp.status)
        return False

    def _remember_devices(self, rule: str, pod: PodEviction) -> None:
        state = self.rules.setdefault(rule, _RuleState())
        for key in pod.claims:
            claim = self.tracker.claim(key)
            if claim is None or claim.allocation is None:
                continue
            for result in claim.allocation.results:
                state.evicted_claims.setdefault(str(result.id), set()).add(claim.meta.uid)

    async def _report_claim_errors(self, current: EvictionPlan) -> None:
        for err in current.errors:
            key = f"{err.ref}|{err.message}"
            if key in self.errors_reported:
                continue
            self.errors_reported.add(key)
            log.error("malformed claim tolerations", kind="ResourceClaim", namespace=err.ref.namespace,
                      name=err.ref.name, error=str(err))
            claim = self.tracker.claim(NamespacedName(err.ref.namespace, err.ref.name))
            await self.events.emit(
                {"kind": "ResourceClaim", "apiVersion": "resource.k8s.io/v1", "namespace": err.ref.namespace,
                 "name": err.ref.name, "uid": claim.meta.uid if claim else ""},
                "InvalidTolerations",
                f"{err.path}: {err.message}; draco ignores this annotation until it is fixed", "Warning")

    # -- rules

    async def _rules_step(self, now: datetime, current: EvictionPlan) -> float:
        wake = 5.0
        seen = set()
        for rule in rule_status.rules(self.tracker):
            seen.add(rule.name)
            state = self.rules.setdefault(rule.name, _RuleState())
            if state.effect != rule.effect:
                if state.effect is None:
                    created = rule.meta.creation_timestamp
                    state.effect_since = (rule.time_added if rule.time_added and created and rule.time_added > created
                                          else created) or now
                else:
                    state.effect_since = now
                    state.written_generation = None
                state.effect = rule.effect
            if rule.time_added is None or (state.effect_since == now and rule.time_added < now):
                await self._stamp_time_added(rule, state.effect_since or now)
            if rule.effect not in ("None", "NoExecute", "NoSchedule"):
                await self.events.emit(self._involved(rule), "UnknownEffect",
                                       f"effect {rule.effect!r} is not known to this draco version: "
                                       "nothing is evicted for this rule", "Warning")
            await self._warn_reallocation(rule, state)
            wake = min(wake, await self._write_status(rule, state, now, current))
        for gone in set(self.rules) - seen:
            del self.rules[gone]
        return wake

    def _involved(self, rule: DeviceTaintRule) -> dict[str, Any]:
        return {"kind": "DeviceTaintRule", "apiVersion": "resource.draco.dev/v1alpha1",
                "name": rule.name, "uid": rule.meta.uid}

    async def _stamp_time_added(self, rule: DeviceTaintRule, now: datetime) -> None:
        stamp = rfc3339(now.replace(microsecond=0))
        resp = await self.client.merge_patch(
            f"{RULES_PATH}/{rule.name}",
            {"metadata": {"uid": rule.meta.uid, "resourceVersion": rule.meta.resource_version},
             "spec": {"taint": {"timeAdded": stamp}}})
        if not resp.ok and resp.status not in (404, 409):
            log.warning("cannot set timeAdded", kind="DeviceTaintRule", name=rule.name, status=resp.status)

    async def _warn_reallocation(self, rule: DeviceTaintRule, state: _RuleState) -> None:
        if rule.effect != "NoExecute" or not state.evicted_claims:
            return
        for claim in self.tracker.claims():
            if claim.allocation is None:
                continue
            for result in claim.allocation.results:
                device = str(result.id)
                evicted = state.evicted_claims.get(device)
                if not evicted or claim.meta.uid in evicted or claim.meta.uid in state.warned:
                    continue
                state.warned.add(claim.meta.uid)
                await self.events.emit(
                    self._involved(rule), "TaintedDeviceReallocated",
                    f"device {device} was allocated again (claim {claim.meta.namespace}/{claim.meta.name}) "
                    f"after draco evicted its users: kube-scheduler does not know draco's DeviceTaintRules. "
                    f"Give such pods the scheduling gate {GATE} so that draco allocates their devices.",
                    "Warning")

    async def _write_status(self, rule: DeviceTaintRule, state: _RuleState, now: datetime,
                            current: EvictionPlan) -> float:
        if rule.effect == "None" and state.written_generation == rule.meta.generation:
            return 5.0  # the preview is written once per spec generation
        cond = rule_status.compute(
            self.tracker, rule, now, evicted=state.evicted, effect_since=state.effect_since,
            grace=timedelta(seconds=self.settings.grace_period), current=current)
        if cond.status is None:
            held = (state.effect_since or now) + timedelta(seconds=self.settings.grace_period) - now
            return max(held.total_seconds(), 0.05)
        existing = rule.condition(rule_status.CONDITION)
        if not rule_status.condition_changed(existing, cond):
            if rule.effect == "None":
                state.written_generation = rule.meta.generation
            return 5.0
        loop = asyncio.get_running_loop()
        since_write = loop.time() - state.last_write
        if since_write < self.settings.status_interval:
            return self.settings.status_interval - since_write
        state.last_write = loop.time()
        conditions = merge_condition(rule.conditions, cond.to_api(""), rfc3339(now))
        resp = await self.client.merge_patch(
            f"{RULES_PATH}/{rule.name}/status",
            {"metadata": {"uid": rule.meta.uid}, "status": {"conditions": conditions}})
        if resp.ok:
            if state.evicted > state.announced:
                await self.events.emit(self._involved(rule), "PodsEvicted",
                                       f"{state.evicted} pod(s) evicted for this rule since the "
                                       f"controller started; {cond.counts.pending_pods} still pending")
                state.announced = state.evicted
            if rule.effect == "None":
                state.written_generation = rule.meta.generation
            log.info("rule condition", kind="DeviceTaintRule", name=rule.name, status=cond.status,
                     reason=cond.reason, message=cond.message)
            return 5.0
        if resp.status != 404:
            log.warning("cannot write rule status", kind="DeviceTaintRule", name=rule.name, status=resp.status)
        return self.settings.status_interval
