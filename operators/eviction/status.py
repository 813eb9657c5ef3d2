"""The DeviceTaintRule `EvictionInProgress` condition, computed as upstream does.

Reasons and messages follow kube-controller-manager's devicetainteviction controller:
`PodsPendingEviction` (True) while pods still have to go, `Completed` once pods were
evicted, `NotStarted` when none were, `NoEffect` with a what-if preview for
`effect: None`, `OtherEffect` for every other effect. draco adds a grace period after
a rule is created or its effect changes during which the condition is not set to
False, so a pod placed meanwhile is not missed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from operators.eviction.decisions import EvictionPlan, plan
from operators.eviction.timemath import plus
from operators.tracker import Tracker
from operators.tracker.taint_rules import DeviceTaintRule, TaintRuleOverlay

CONDITION = "EvictionInProgress"
DEFAULT_GRACE = timedelta(seconds=5)


@dataclass(frozen=True, slots=True)
class RuleCounts:
    affected_devices: int  # published devices (newest generation) the rule selects
    allocated_devices: int  # allocation results naming a selected device
    pending_pods: int
    namespaces: int


@dataclass(frozen=True, slots=True)
class RuleCondition:
    status: str | None  # "True", "False", or None while the grace period holds it back
    reason: str
    message: str
    observed_generation: int
    counts: RuleCounts

    def to_api(self, last_transition: str) -> dict[str, Any]:
        return {"type": CONDITION, "status": self.status, "reason": self.reason,
                "message": self.message, "observedGeneration": self.observed_generation,
                "lastTransitionTime": last_transition}


def _plural(n: int, one: str, many: str) -> str:
    return one if n == 1 else many % n


def count(tracker: Tracker, rule: DeviceTaintRule, eviction: EvictionPlan) -> RuleCounts:
    published = sum(1 for v in tracker.devices() if rule.matches(v.id))
    allocated = 0
    for claim in tracker.claims():
        if claim.allocation is not None:
            allocated += sum(1 for r in claim.allocation.results if rule.matches(r.id))
    pending = eviction.pending_for_rule(rule.name)
    return RuleCounts(published, allocated, len(pending), len({p.pod.namespace for p in pending}))


def compute(tracker: Tracker, rule: DeviceTaintRule, now: datetime, *,
            evicted: int = 0, effect_since: datetime | None = None,
            grace: timedelta = DEFAULT_GRACE, current: EvictionPlan | None = None,
            counts: RuleCounts | None = None) -> RuleCondition:
    """The condition for `rule` at `now`. `evicted` counts pods this controller evicted
    for the rule since it started; `current` is the plan for the real effects; `counts`,
    when the caller keeps them up to date itself, spares counting over the cluster
    (for `effect: None` they must be the simulated ones)."""
    effect = rule.effect
    if counts is None:
        if effect == "None":
            eviction = plan(tracker, simulate=rule.name)
        else:
            eviction = current if current is not None else plan(tracker)
        counts = count(tracker, rule, eviction)
    status: str | None = "False"
    message = ""
    if effect == "NoExecute":
        if counts.pending_pods > 0:
            status, reason = "True", "PodsPendingEviction"
            message = (_plural(counts.pending_pods, "1 pod needs", "%d pods need")
                       + " to be evicted in "
                       + _plural(counts.namespaces, "1 namespace.", "%d different namespaces."))
        elif evicted > 0:
            reason = "Completed"
        else:
            reason = "NotStarted"
    elif effect == "None":
        reason = "NoEffect"
        message = (_plural(counts.affected_devices, "1 published device selected. ",
                           "%d published devices selected. ")
                   + _plural(counts.allocated_devices, "1 allocated device selected. ",
                             "%d allocated devices selected. ")
                   + _plural(counts.pending_pods, "1 pod would be evicted in ",
                             "%d pods would be evicted in ")
                   + _plural(counts.namespaces, "1 namespace ", "%d different namespaces ")
                   + "if the effect was NoExecute. This information will not be updated again. "
                     "Recreate the DeviceTaintRule to trigger an update.")
    else:
        reason = "OtherEffect"
        message = "Eviction only happens for the NoExecute effect."
    if evicted > 0:
        message = (message + " " if message else "") + _plural(
            evicted, "1 pod ", "%d pods ") + "evicted since starting the controller."
    since = effect_since or rule.meta.creation_timestamp
    if status == "False" and since is not None:
        ends = plus(since, grace)
        if ends is None or now < ends:
            status = None
    return RuleCondition(status, reason, message, rule.meta.generation, counts)


def rules(tracker: Tracker) -> list[DeviceTaintRule]:
    for overlay in tracker.overlays:
        if isinstance(overlay, TaintRuleOverlay):
            return [overlay.rules[n] for n in sorted(overlay.rules)]
    return []


def condition_changed(existing: Mapping[str, Any] | None, new: RuleCondition) -> bool:
    if existing is None:
        return new.status is not None
    return any(existing.get(k) != v for k, v in (
        ("status", new.status), ("reason", new.reason), ("message", new.message),
        ("observedGeneration", new.observed_generation)))
