"""The eviction controller's rule side: `spec.taint.timeAdded` stamps, the
`EvictionInProgress` condition (at most one write per rule per interval), and the
Events on a rule. Mixed into `EvictionController`; the decisions are `status`'s.

Each rule is one supervised step: a rule whose handling raises is logged, counted,
reported in a Warning Event on it, and the other rules still get their status.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import structlog

from operators.eviction import metrics
from operators.eviction import status as rule_status
from operators.eviction.decisions import EvictionPlan
from operators.eviction.index import EvictionIndex
from operators.eviction.settings import EvictionSettings
from operators.eviction.timemath import duration, plus, seconds_until
from operators.kube.client import KubeClient
from operators.kube.conditions import merge_condition
from operators.kube.events import EventRecorder
from operators.kube.supervision import guarded
from operators.tracker import Tracker
from operators.tracker.taint_rules import DeviceTaintRule

log = structlog.get_logger("draco.eviction")
RULES_PATH = "/apis/resource.draco.dev/v1alpha1/devicetaintrules"
GATE = "resource.draco.dev/allocation"
IDLE = 5.0  # the longest sleep between passes


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class RuleState:
    evicted: int = 0
    last_write: float = -1e9
    effect: str | None = None
    effect_since: datetime | None = None
    written_generation: int | None = None
    announced: int = 0  # evictions already reported in an Event on the rule
    evicted_claims: dict[str, set[str]] = field(default_factory=dict)  # device -> claim uids
    warned: set[str] = field(default_factory=set)


class RuleSteps:
    """The rule half of the controller (see the module docstring)."""

    name: str
    tracker: Tracker
    client: KubeClient
    settings: EvictionSettings
    events: EventRecorder
    index: EvictionIndex
    rules: dict[str, RuleState]

    async def _report_failure(self, involved: dict[str, Any], error: BaseException | None) -> None:
        raise NotImplementedError

    async def _rules_step(self, now: datetime, current: EvictionPlan | None) -> float:
        wake = IDLE
        seen = set()
        for rule in rule_status.rules(self.tracker):
            seen.add(rule.name)
            with guarded(self.name, "rule-status", kind="DeviceTaintRule", name=rule.name) as g:
                wake = min(wake, await self._rule_step(rule, now, current))
            if g.failed:
                await self._report_failure(self._involved(rule), g.error)
                wake = min(wake, self.settings.retry_after)
        for gone in set(self.rules) - seen:
            del self.rules[gone]
            metrics.rule_gone(gone)
        return wake

    async def _rule_step(self, rule: DeviceTaintRule, now: datetime,
                         current: EvictionPlan | None) -> float:
        state = self.rules.setdefault(rule.name, RuleState())
        metrics.rule_seen(rule.name, rule.selector.driver if rule.selector is not None else None)
        if state.effect != rule.effect:
            if state.effect is None:
                created = rule.meta.creation_timestamp
                since = (rule.time_added if rule.time_added and created and rule.time_added > created
                         else created) or now
                # a timeAdded in the future (a user's, a skewed clock) starts the grace now:
                # otherwise the condition would wait for that moment, up to year 9999
                state.effect_since = min(since, now)
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
        return await self._write_status(rule, state, now, current)

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

    async def _warn_reallocation(self, rule: DeviceTaintRule, state: RuleState) -> None:
        if rule.effect != "NoExecute" or not state.evicted_claims:
            return
        if self.settings.full_replan:
            claims = list(self.tracker.claims())
        else:  # only claims whose allocation may have moved since the last pass
            claims = [c for k in self.index.touched_claims if (c := self.tracker.claim(k)) is not None]
        for claim in claims:
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

    def _counts(self, rule: DeviceTaintRule) -> rule_status.RuleCounts | None:
        if self.settings.full_replan:
            return None  # `compute` counts over the whole cluster, as before the index
        if rule.effect == "None":
            return self.index.simulated_counts(self.tracker, rule)
        return self.index.counts(rule.name)

    async def _write_status(self, rule: DeviceTaintRule, state: RuleState, now: datetime,
                            current: EvictionPlan | None) -> float:
        if rule.effect == "None" and state.written_generation == rule.meta.generation:
            return IDLE  # the preview is written once per spec generation
        grace = duration(self.settings.grace_period)
        cond = rule_status.compute(
            self.tracker, rule, now, evicted=state.evicted, effect_since=state.effect_since,
            grace=grace, current=current, counts=self._counts(rule))
        metrics.rule_condition(rule.name, cond.counts.pending_pods if rule.effect == "NoExecute" else 0,
                               cond.status == "True")
        if cond.status is None:
            held = seconds_until(plus(state.effect_since or now, grace), now)
            return max(min(held, IDLE), 0.05)
        existing = rule.condition(rule_status.CONDITION)
        if not rule_status.condition_changed(existing, cond):
            if rule.effect == "None":
                state.written_generation = rule.meta.generation
            return IDLE
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
            return IDLE
        if resp.status != 404:
            log.warning("cannot write rule status", kind="DeviceTaintRule", name=rule.name, status=resp.status)
        return self.settings.status_interval
