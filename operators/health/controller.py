"""The health controller (`draco run --controllers health`): each DeviceHealthPolicy's
decision (`decisions.decide`) carried out as DeviceTaintRules, a status and Events.

One pass reads the tracker (devices with their slice taints and patched attributes,
pods with the kubelet's device health, draco's DeviceTaintRules) and, per policy,
writes only what differs: a rule created for a device newly tainted, a rule deleted
for a device recovered (or no longer selected, or of a deleted policy), the status
when a count or the bounded device list changed, and an Event per transition. The
rules are draco's own DeviceTaintRules, so the eviction controller, its condition,
`kubectl wait` and `draco evictions` handle them like any other; each carries the
policy as its controlling owner, so deleting the policy also deletes them (the garbage
collector, and this controller when it sees the policy go).

Passes run on a change of the tracker or of a policy (after a short debounce), and at
the next moment a decision can change by itself (the end of a `for` or `clearAfter`).
What the controller remembers about signals (`Memory`) lives in memory only: after a
restart a `for` or `clearAfter` starts again, so a taint comes late or stays longer,
never early.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import structlog

from operators.health import metrics
from operators.health.decisions import Decision, Memory, decide, rule_name
from operators.health.policy import (
    API_VERSION,
    KIND,
    HealthPolicy,
    PodHealthSignal,
    parse_health_policy,
)
from operators.health.signals import observe, pod_health
from operators.kube.supervision import guarded
from operators.model import DeviceID, ModelError
from operators.tracker import Tracker
from operators.tracker.change import Change
from operators.tracker.taint_rules import TaintRuleOverlay

log = structlog.get_logger("draco.health")

POLICY_LABEL = "resource.draco.dev/health-policy"
SIGNAL_LABEL = "resource.draco.dev/health-signal"
RULES_PATH = "/apis/resource.draco.dev/v1alpha1/devicetaintrules"
LIST_MAX = 50
STATES = ("Tainted", "HeldBack", "Pending", "Recovering")
STATUS_INTERVAL = 10.0  # seconds between status writes that change only the device list
RETRY_AFTER = timedelta(seconds=1)  # a policy whose pass failed is tried again this soon


class HealthWriter(Protocol):
    async def create_rule(self, body: Mapping[str, Any]) -> None: ...
    async def delete_rule(self, name: str) -> None: ...
    async def patch_status(self, name: str, status: Mapping[str, Any]) -> None: ...
    async def post_event(self, involved: Mapping[str, Any], reason: str, message: str, type_: str) -> None: ...


@dataclass
class _Policy:
    body: Mapping[str, Any]
    parsed: HealthPolicy | None
    error: str | None
    status: Mapping[str, Any]


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _stamp(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rule_body(policy: HealthPolicy, device: DeviceID, value: str) -> dict[str, Any]:
    """The DeviceTaintRule the policy keeps on DEVICE."""
    labels = {SIGNAL_LABEL: value}
    if len(policy.name) <= 63:
        labels[POLICY_LABEL] = policy.name
    return {
        "apiVersion": "resource.draco.dev/v1alpha1", "kind": "DeviceTaintRule",
        "metadata": {"name": rule_name(policy.name, device), "labels": labels,
                     "annotations": {POLICY_LABEL: policy.name},
                     "ownerReferences": [{"apiVersion": API_VERSION, "kind": KIND, "name": policy.name,
                                          "uid": policy.meta.uid, "controller": True}]},
        "spec": {"deviceSelector": {"driver": device.driver, "pool": device.pool, "device": device.device},
                 "taint": {"key": policy.taint_key, "value": value, "effect": policy.effect}},
    }


def status_of(policy: HealthPolicy, d: Decision, recovered: int, problems: list[str],
              previous: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    """The policy's status for decision D (conditions keep their transition time while
    their status holds)."""
    rows: list[tuple[int, DeviceID, dict[str, Any]]] = []
    for dev, value in d.taint.items():
        state = "Recovering" if dev in d.recovering else "Tainted"
        row: dict[str, Any] = {"signal": d.memory[dev].signal if dev in d.memory else value,
                               "rule": rule_name(policy.name, dev)}
        if dev in d.recovering:
            row["until"] = _stamp(d.recovering[dev])
        rows.append((STATES.index(state), dev, {"state": state, **row}))
    for dev in d.held_back:
        rows.append((1, dev, {"state": "HeldBack", "signal": d.memory[dev].signal}))
    for dev, until in d.pending.items():
        rows.append((2, dev, {"state": "Pending", "signal": d.memory[dev].signal, "until": _stamp(until)}))
    devices = [{"driver": dev.driver, "pool": dev.pool, "device": dev.device, **row}
               for _, dev, row in sorted(rows, key=lambda r: (r[0], r[1]))[:LIST_MAX]]
    throttled = "True" if d.throttled else "False"
    if d.throttled:
        message = (f"{len(d.held_back)} device(s) with a signal held back: maxUnavailable "
                   f"{policy.max_unavailable} allows {d.limit} of {d.selected} selected device(s) tainted")
    else:
        message = f"{len(d.taint)} of {d.selected} selected device(s) tainted" + (
            f" (maxUnavailable {policy.max_unavailable}: {d.limit})" if d.limit is not None else "")
    old = next((c for c in previous.get("conditions") or () if c.get("type") == "Throttled"), None)
    since = old["lastTransitionTime"] if old and old.get("status") == throttled else _stamp(now)
    return {
        "observedGeneration": policy.meta.generation, "selected": d.selected,
        "tainted": len(d.taint) - len(d.recovering), "pending": len(d.pending), "heldBack": len(d.held_back),
        "recovering": len(d.recovering), "recovered": recovered, "devices": devices,
        "problems": problems[:10],
        "conditions": [{"type": "Throttled", "status": throttled,
                        "reason": "MaxUnavailable" if d.throttled else "WithinLimit", "message": message,
                        "lastTransitionTime": since, "observedGeneration": policy.meta.generation}],
    }


def _same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Statuses equal but for the conditions' transition times."""
    def strip(s: Mapping[str, Any]) -> Any:
        return {**s, "conditions": [{k: v for k, v in c.items() if k != "lastTransitionTime"}
                                    for c in s.get("conditions") or ()]}
    return bool(strip(a) == strip(b))


class HealthController:
    def __init__(self, tracker: Tracker, writer: HealthWriter, *,
                 clock: Callable[[], datetime] = _utcnow, debounce: float = 0.2) -> None:
        self.tracker = tracker
        self.writer = writer
        self.clock = clock
        self.debounce = debounce
        self.policies: dict[str, _Policy] = {}
        self.memory: dict[str, dict[DeviceID, Memory]] = {}
        self.recovered: Counter[str] = Counter()
        self.created: dict[str, float] = {}  # rule name -> when: written, not yet seen
        self.deleted: set[str] = set()  # rule names deleted, maybe still seen
        self.rule_writes = 0
        self.passes = 0
        self.next_wake: datetime | None = None
        self.status_written: dict[str, float] = {}  # policy -> when its status was last written
        self.status_pending: dict[str, float] = {}  # policy -> when a held-back status write is due
        self._wake = asyncio.Event()
        self._unsubscribe: Callable[[], None] | None = None

    # -- inputs ---------------------------------------------------------------------

    def observe(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """A DeviceHealthPolicy event."""
        name = str((body.get("metadata") or {}).get("name") or "")
        if not name:
            return
        if event_type == "DELETED":
            self.policies.pop(name, None)
            self.memory.pop(name, None)
            self.status_written.pop(name, None)
            self.status_pending.pop(name, None)
        else:
            try:
                parsed, error = parse_health_policy(body), None
            except ModelError as err:
                parsed, error = None, str(err)
            status = body.get("status")
            self.policies[name] = _Policy(body, parsed, error, status if isinstance(status, Mapping) else {})
        self._wake.set()

    def _on_change(self, change: Change) -> None:
        # With no policy only draco's rules matter (those of a deleted policy); pods only
        # for a podHealth signal: a cluster without policies pays nothing per pod event.
        if change.objects or change.errors or (self.policies and change.devices) or \
                (change.pods and self._reads_pods()):
            self._wake.set()

    def _reads_pods(self) -> bool:
        return any(isinstance(signal, PodHealthSignal) for entry in self.policies.values()
                   if entry.parsed is not None for signal in entry.parsed.signals)

    # -- the loop -------------------------------------------------------------------

    async def run(self) -> None:
        if self._unsubscribe is None:
            self._unsubscribe = self.tracker.subscribe(self._on_change)
        self._wake.set()
        try:
            while True:
                timeout = None
                if self.next_wake is not None:
                    timeout = max(0.0, (self.next_wake - self.clock()).total_seconds())
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout)
                await asyncio.sleep(self.debounce)
                self._wake.clear()
                try:
                    await self.sync_once()
                except Exception:  # noqa: BLE001 - one failed pass is retried, never fatal
                    log.exception("health pass failed; retrying")
                    await asyncio.sleep(1.0)
                    self._wake.set()
        finally:
            if self._unsubscribe is not None:
                self._unsubscribe()
                self._unsubscribe = None

    def _rules(self) -> dict[str, Any]:
        for overlay in self.tracker.overlays:
            if isinstance(overlay, TaintRuleOverlay):
                return dict(overlay.rules)
        return {}

    async def sync_once(self) -> None:
        self.passes += 1
        now = self.clock()
        rules = self._rules()
        self.created = {n: t for n, t in self.created.items() if n not in rules and t > now.timestamp() - 60}
        self.deleted &= set(rules)
        by_uid: dict[str, dict[DeviceID, tuple[str, str]]] = {}
        for name, rule in rules.items():
            if rule.meta.controller_uid and rule.selector is not None and name not in self.deleted \
                    and None not in (rule.selector.driver, rule.selector.pool, rule.selector.device):
                dev = DeviceID(rule.selector.driver, rule.selector.pool, rule.selector.device)
                by_uid.setdefault(rule.meta.controller_uid, {})[dev] = (name, rule.value)
        views = list(self.tracker.devices()) if self.policies else []
        health = pod_health(self.tracker.pods()) if self._reads_pods() else {}
        wakes: list[datetime] = []
        live_uids = set()
        for name in sorted(self.policies):
            entry = self.policies[name]
            if entry.parsed is not None:
                live_uids.add(entry.parsed.meta.uid)
            # one policy whose pass fails (a write the API refuses, a bug) is logged,
            # counted and retried a second later; the others are still served
            with guarded("health", "policy", kind=KIND, name=name) as guard:
                wake = await self._sync_policy(name, entry, by_uid, views, health, now)
                if wake is not None:
                    wakes.append(wake)
            if guard.failed:
                wakes.append(now + RETRY_AFTER)
        metrics.keep_only(n for n, e in self.policies.items() if e.parsed is not None)
        # rules of policies that are gone (the garbage collector does it too, later)
        for uid, owned in by_uid.items():
            if uid in live_uids:
                continue
            for name, _ in owned.values():
                if rules[name].meta.annotations.get(POLICY_LABEL) is not None:
                    await self._delete(name)
        wakes += [datetime.fromtimestamp(t, UTC) for t in self.status_pending.values()]
        self.next_wake = min(wakes) if wakes else None

    async def _sync_policy(self, name: str, entry: _Policy, by_uid: Mapping[str, Mapping[DeviceID, tuple[str, str]]],
                           views: list[Any], health: Mapping[DeviceID, set[str]], now: datetime) -> datetime | None:
        """One policy's pass; returns when its decision can next change by itself."""
        if entry.parsed is None:
            await self._report_invalid(name, entry)
            return None
        policy = entry.parsed
        owned = by_uid.get(policy.meta.uid, {})
        seen = observe(policy, views, health)
        ruled = {dev: value for dev, (_, value) in owned.items()}
        for dev in seen.unknown:  # a signal draco cannot evaluate changes nothing
            seen.active.pop(dev, None)
        decision = decide(policy, seen.selected, seen.active, seen.siblings, ruled,
                          self.memory.get(name, {}), now)
        for dev in seen.unknown:
            if dev in ruled and dev in decision.untaint:
                decision.untaint.remove(dev)
                decision.taint[dev] = ruled[dev]
        self.memory[name] = decision.memory
        metrics.publish(policy, seen.selected, decision)
        await self._apply(policy, decision, owned, now)
        await self._write_status(name, entry, decision, seen.problems, now)
        return decision.next_wake()

    async def _apply(self, policy: HealthPolicy, d: Decision, owned: Mapping[DeviceID, tuple[str, str]],
                     now: datetime) -> None:
        involved = {"apiVersion": API_VERSION, "kind": KIND, "name": policy.name, "uid": policy.meta.uid}
        for dev, value in sorted(d.taint.items()):
            if dev in owned:
                continue
            body = rule_body(policy, dev, value)
            if body["metadata"]["name"] in self.created:
                continue
            await self.writer.create_rule(body)
            self.created[body["metadata"]["name"]] = now.timestamp()
            self.rule_writes += 1
            log.info("device tainted", policy=policy.name, device="/".join(dev), signal=value)
            await self.writer.post_event(involved, "DeviceTainted",
                                         f"{'/'.join(dev)}: {d.memory[dev].signal if dev in d.memory else value}; "
                                         f"DeviceTaintRule {body['metadata']['name']} written", "Warning")
        for dev in d.untaint:
            if dev not in owned:
                continue
            name = owned[dev][0]
            await self._delete(name)
            self.recovered[policy.name] += 1
            log.info("device recovered", policy=policy.name, device="/".join(dev))
            await self.writer.post_event(involved, "DeviceRecovered",
                                         f"{'/'.join(dev)}: no signal for {policy.clear_after}; "
                                         f"DeviceTaintRule {name} deleted", "Normal")

    async def _delete(self, name: str) -> None:
        if name in self.deleted:
            return
        await self.writer.delete_rule(name)
        self.deleted.add(name)
        self.rule_writes += 1

    async def _write_status(self, name: str, entry: _Policy, d: Decision, problems: list[str],
                            now: datetime) -> None:
        """Counts, conditions and problems are written when they change; a change only in
        the device list (a flapping device's `until`, say) waits up to STATUS_INTERVAL,
        so a flapping signal does not cost a status write a second."""
        assert entry.parsed is not None
        status = status_of(entry.parsed, d, self.recovered[name], problems, entry.status, now)
        if _same(status, entry.status):
            return
        summary_same = _same({**status, "devices": []}, {**entry.status, "devices": []})
        last = self.status_written.get(name, 0.0)
        if summary_same and now.timestamp() - last < STATUS_INTERVAL:
            self.status_pending[name] = last + STATUS_INTERVAL
            return
        self.status_pending.pop(name, None)
        self.status_written[name] = now.timestamp()
        was_throttled = any(c.get("type") == "Throttled" and c.get("status") == "True"
                            for c in entry.status.get("conditions") or ())
        known = set(entry.status.get("problems") or ())
        await self.writer.patch_status(name, status)
        entry.status = status
        involved = {"apiVersion": API_VERSION, "kind": KIND, "name": name, "uid": entry.parsed.meta.uid}
        if d.throttled and not was_throttled:
            await self.writer.post_event(involved, "Throttled", status["conditions"][0]["message"], "Warning")
        fresh = [p for p in status["problems"] if p not in known]
        if fresh:  # one Event per status write that brings new problems, never one per device
            more = f" (and {len(fresh) - 1} more; see status.problems)" if len(fresh) > 1 else ""
            await self.writer.post_event(involved, "SignalProblem", f"{fresh[0]}{more}", "Warning")

    async def _report_invalid(self, name: str, entry: _Policy) -> None:
        status = {"conditions": [{"type": "Throttled", "status": "Unknown", "reason": "InvalidPolicy",
                                  "message": entry.error or "", "lastTransitionTime": _stamp(self.clock())}],
                  "problems": [entry.error or ""]}
        if _same(status, entry.status):
            return
        meta = entry.body.get("metadata") or {}
        await self.writer.patch_status(name, status)
        entry.status = status
        await self.writer.post_event({"apiVersion": API_VERSION, "kind": KIND, "name": name,
                                      "uid": meta.get("uid", "")}, "InvalidPolicy", entry.error or "", "Warning")
