"""The eviction plan kept up to date change by change, instead of re-planned per event.

`plan(tracker)` decides over every claim in the cluster; at 10,000 claims that is a
sixth of a second, and a controller that re-plans on every pod status update burns a
core. `EvictionIndex` holds the same answer (checked against `plan` in the tests) and
updates it from the tracker's change notifications: a change costs work proportional
to the claims, pods and rules it touches, counted in `stats`.

What depends on what:
- a claim's eviction: the claim (tolerations, allocation) and the taints of its
  allocated devices (views in `Change.devices`);
- a pod's eviction: the pod (node, phase, uid, claim references), the evictions of
  the claims it uses, and whether each claim is reserved for it;
- a rule's counts: the published devices it selects, the allocation results on them,
  the pods whose eviction it is among the reasons of.

Pure (no I/O, no clock): times are data; which pods are due is asked with a `now`.
A claim or pod whose evaluation raises is skipped and listed in `failures`, so one bad
object never stops the plan for the others.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from datetime import datetime

from operators.eviction.decisions import (
    DRACO_ALONE,
    ClaimEviction,
    EvictionPlan,
    Ownership,
    PodEviction,
    plan,
    pod_eviction,
    safe_claim_eviction,
)
from operators.eviction.status import RuleCounts
from operators.model import DeviceID, ModelError, NamespacedName, ObjectRef
from operators.tracker import Change, Tracker
from operators.tracker.taint_rules import DeviceTaintRule, TaintRuleOverlay


@dataclass(slots=True)
class IndexStats:
    """Work done, so tests assert incrementality instead of timing it."""

    rebuilds: int = 0
    updates: int = 0
    claims_evaluated: int = 0
    pods_evaluated: int = 0
    devices_examined: int = 0
    rule_recounts: int = 0  # one rule counted over the whole cluster (selector changed)

    def snapshot(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class Failure:
    """An object whose evaluation raised: skipped until it changes again."""

    ref: ObjectRef
    error: Exception


def _rules_of(tracker: Tracker) -> Mapping[str, DeviceTaintRule]:
    for overlay in tracker.overlays:
        if isinstance(overlay, TaintRuleOverlay):
            return overlay.rules
    return {}


class EvictionIndex:
    def __init__(self, ownership: Ownership = DRACO_ALONE) -> None:
        self.stats = IndexStats()
        self.ownership = ownership  # changing it needs a rebuild
        self._reset()

    def _reset(self) -> None:
        self.claims: dict[NamespacedName, ClaimEviction] = {}
        self.pods: dict[NamespacedName, PodEviction] = {}
        self.errors: dict[NamespacedName, ModelError] = {}  # malformed tolerations annotation
        self.failures: dict[ObjectRef, Failure] = {}
        self.new_errors: list[ModelError] = []  # errors first seen in the last update
        self.new_failures: list[Failure] = []  # failures of the last update
        self.touched_claims: frozenset[NamespacedName] = frozenset()  # re-evaluated last update
        self._claim_pods: dict[NamespacedName, set[NamespacedName]] = {}  # claim -> pods it evicts
        self._claim_results: dict[NamespacedName, tuple[DeviceID, ...]] = {}
        self._device_claims: dict[DeviceID, set[NamespacedName]] = {}
        self._published: set[DeviceID] = set()
        self._rules: dict[str, DeviceTaintRule] = {}
        self._rule_published: Counter[str] = Counter()
        self._rule_claims: dict[str, Counter[NamespacedName]] = {}  # rule -> claim -> results
        self._rule_pods: dict[str, set[NamespacedName]] = {}
        self._rule_namespaces: dict[str, Counter[str]] = {}
        self._timeline: list[tuple[datetime, NamespacedName]] = []  # min-heap, stale entries skipped

    # ------------------------------------------------------------------ feeding

    def rebuild(self, tracker: Tracker) -> None:
        """Start over from the whole tracker (startup; the cost of one full plan)."""
        self._reset()
        self.stats.rebuilds += 1
        for name, rule in _rules_of(tracker).items():
            self._rules[name] = rule
        for view in tracker.devices():
            self._set_published(view.id, True)
        touched = [c.meta.key for c in tracker.claims()]
        self._evaluate(tracker, touched, set(touched), ())

    def update(self, tracker: Tracker, change: Change) -> None:
        """Bring the index up to date after `change` (possibly several merged)."""
        self.stats.updates += 1
        self.new_errors = []
        self.new_failures = []
        self._sync_rules(tracker)
        touched: dict[NamespacedName, None] = dict.fromkeys(change.claims)
        for did in change.devices:
            self.stats.devices_examined += 1
            view = tracker.device(did)
            self._set_published(did, view is not None and view.published)
            touched.update(dict.fromkeys(self._device_claims.get(did, ())))
        for did in change.allocations:
            self.stats.devices_examined += 1
            touched.update(dict.fromkeys(self._device_claims.get(did, ())))
            touched.update(dict.fromkeys(a.claim for a in tracker.allocations(did)))
        self._evaluate(tracker, list(touched), set(change.claims), change.pods)

    def _evaluate(self, tracker: Tracker, claims: Iterable[NamespacedName],
                  claim_objects_changed: set[NamespacedName], pods: Iterable[NamespacedName]) -> None:
        touched_pods: dict[NamespacedName, None] = dict.fromkeys(pods)
        evaluated = []
        for key in claims:
            evaluated.append(key)
            moved = self._set_claim(tracker, key)
            if moved or key in claim_objects_changed:
                touched_pods.update(dict.fromkeys(self._claim_pods.get(key, ())))
                if key in self.claims:
                    touched_pods.update(dict.fromkeys(tracker.pods_of_claim(key)))
        self.touched_claims = frozenset(evaluated)
        for key in touched_pods:
            self._set_pod(tracker, key)

    # ------------------------------------------------------------------ queries

    def as_plan(self) -> EvictionPlan:
        """The whole plan, as `plan(tracker)` would return it (errors in claim order)."""
        return EvictionPlan(pods=dict(self.pods), claims=dict(self.claims),
                            errors=[self.errors[k] for k in sorted(self.errors)])

    def pop_due(self, now: datetime) -> list[PodEviction]:
        """Pods that became due at or before `now` since the last call (each once per
        eviction time; the caller keeps failed ones for a retry)."""
        out: dict[NamespacedName, PodEviction] = {}
        timeline = self._timeline
        while timeline and timeline[0][0] <= now:
            when, key = heapq.heappop(timeline)
            current = self.pods.get(key)
            if current is not None and current.when == when:
                out[key] = current
        return list(out.values())

    def next_due(self) -> datetime | None:
        """The earliest eviction time not yet popped."""
        timeline = self._timeline
        while timeline:
            when, key = timeline[0]
            current = self.pods.get(key)
            if current is not None and current.when == when:
                return when
            heapq.heappop(timeline)
        return None

    def counts(self, rule: str) -> RuleCounts:
        """The rule's counts for its real effect (what `status.count` computes)."""
        claims = self._rule_claims.get(rule)
        return RuleCounts(self._rule_published.get(rule, 0), sum(claims.values()) if claims else 0,
                          len(self._rule_pods.get(rule, ())), len(self._rule_namespaces.get(rule, ())))

    def simulated_counts(self, tracker: Tracker, rule: DeviceTaintRule) -> RuleCounts:
        """Counts as if the rule's effect were NoExecute (the `effect: None` preview),
        deciding only the claims allocated on devices the rule selects."""
        evictions: dict[NamespacedName, ClaimEviction] = {}
        for key in self._rule_claims.get(rule.name, ()):
            claim = tracker.claim(key)
            if claim is None:
                continue
            self.stats.claims_evaluated += 1
            try:
                ev = safe_claim_eviction(tracker, claim, rule.name, [], self.ownership)
            except Exception:  # noqa: BLE001 - reported by the real evaluation; skipped here
                continue
            if ev is not None:
                evictions[key] = ev
        pending = plan(tracker, claims=evictions, ownership=self.ownership).pending_for_rule(rule.name)
        real = self.counts(rule.name)
        return RuleCounts(real.affected_devices, real.allocated_devices, len(pending),
                          len({p.pod.namespace for p in pending}))

    # ------------------------------------------------------------------ internals

    def _sync_rules(self, tracker: Tracker) -> None:
        current = _rules_of(tracker)
        if current.keys() == self._rules.keys() and all(
                self._rules[n] is r for n, r in current.items()):
            return
        for name in set(self._rules) - set(current):
            del self._rules[name]
            self._rule_published.pop(name, None)
            self._rule_claims.pop(name, None)
        for name, rule in current.items():
            old = self._rules.get(name)
            self._rules[name] = rule
            if old is None or old.selector != rule.selector:
                self._recount(rule)

    def _recount(self, rule: DeviceTaintRule) -> None:
        self.stats.rule_recounts += 1
        self._rule_published[rule.name] = sum(1 for d in self._published if rule.matches(d))
        claims: Counter[NamespacedName] = Counter()
        for key, results in self._claim_results.items():
            n = sum(1 for d in results if rule.matches(d))
            if n:
                claims[key] = n
        self._rule_claims[rule.name] = claims

    def _set_published(self, did: DeviceID, published: bool) -> None:
        if published == (did in self._published):
            return
        delta = 1 if published else -1
        if published:
            self._published.add(did)
        else:
            self._published.discard(did)
        for name, rule in self._rules.items():
            if rule.matches(did):
                self._rule_published[name] += delta

    def _set_claim(self, tracker: Tracker, key: NamespacedName) -> bool:
        """Re-decide one claim; True when its eviction changed."""
        self.stats.claims_evaluated += 1
        claim = tracker.claim(key)
        results = tuple(r.id for r in claim.allocation.results) if claim and claim.allocation else ()
        self._set_results(key, results)
        ev: ClaimEviction | None = None
        ref = ObjectRef("ResourceClaim", key.namespace, key.name)
        self.failures.pop(ref, None)
        old_error = self.errors.pop(key, None)
        if claim is not None:
            errors: list[ModelError] = []
            try:
                ev = safe_claim_eviction(tracker, claim, None, errors, self.ownership)
            except Exception as exc:  # noqa: BLE001 - one bad claim is skipped, not the plan
                failure = Failure(ref, exc)
                self.failures[ref] = failure
                self.new_failures.append(failure)
            if errors:
                self.errors[key] = errors[0]
                if old_error is None or str(old_error) != str(errors[0]):
                    self.new_errors.append(errors[0])
        old = self.claims.get(key)
        if ev is None:
            self.claims.pop(key, None)
        else:
            self.claims[key] = ev
        return old != ev

    def _set_results(self, key: NamespacedName, results: tuple[DeviceID, ...]) -> None:
        old = self._claim_results.get(key, ())
        if old == results:
            return
        for did in set(old) - set(results):
            holders = self._device_claims.get(did)
            if holders is not None:
                holders.discard(key)
                if not holders:
                    del self._device_claims[did]
        for did in results:
            self._device_claims.setdefault(did, set()).add(key)
        if results:
            self._claim_results[key] = results
        else:
            self._claim_results.pop(key, None)
        for name, rule in self._rules.items():
            n = sum(1 for d in results if rule.matches(d))
            claims = self._rule_claims.setdefault(name, Counter())
            if n:
                claims[key] = n
            else:
                claims.pop(key, None)

    def _set_pod(self, tracker: Tracker, key: NamespacedName) -> None:
        self.stats.pods_evaluated += 1
        ref = ObjectRef("Pod", key.namespace, key.name)
        self.failures.pop(ref, None)
        try:
            new = pod_eviction(tracker, key, self.claims, self.ownership)
        except Exception as exc:  # noqa: BLE001 - one bad pod is skipped, not the plan
            failure = Failure(ref, exc)
            self.failures[ref] = failure
            self.new_failures.append(failure)
            new = None
        old = self.pods.get(key)
        if old == new:
            return
        if old is not None:
            del self.pods[key]
            for claim in old.claims:
                pods = self._claim_pods.get(claim)
                if pods is not None:
                    pods.discard(key)
                    if not pods:
                        del self._claim_pods[claim]
            for rule in old.rules:
                self._rule_pod(rule, key, -1)
        if new is not None:
            self.pods[key] = new
            for claim in new.claims:
                self._claim_pods.setdefault(claim, set()).add(key)
            for rule in new.rules:
                self._rule_pod(rule, key, +1)
            heapq.heappush(self._timeline, (new.when, key))
            if len(self._timeline) > 2 * len(self.pods) + 1024:
                self._compact()

    def _compact(self) -> None:
        """Drop stale timeline entries (superseded times), keeping the un-popped ones."""
        self._timeline = [(w, k) for w, k in self._timeline
                          if (p := self.pods.get(k)) is not None and p.when == w]
        heapq.heapify(self._timeline)

    def _rule_pod(self, rule: str, key: NamespacedName, delta: int) -> None:
        pods = self._rule_pods.setdefault(rule, set())
        namespaces = self._rule_namespaces.setdefault(rule, Counter())
        if delta > 0:
            pods.add(key)
            namespaces[key.namespace] += 1
            return
        pods.discard(key)
        namespaces[key.namespace] -= 1
        if namespaces[key.namespace] <= 0:
            del namespaces[key.namespace]
        if not pods:
            del self._rule_pods[rule]
            del self._rule_namespaces[rule]


__all__ = ["EvictionIndex", "Failure", "IndexStats"]
