"""Which pods device taints evict, and when: pure functions over the tracker's view.

Mirrors kube-controller-manager's devicetainteviction controller: an allocated claim
gets the earliest eviction time over all NoExecute taints of its allocated devices
(taints of a pool's newest generation plus DeviceTaintRules, which also reach devices
whose slice is gone); every scheduled pod that uses the claim — it references the
claim (directly, through a template's generated claim, or as its extended-resource
claim) and the claim is reserved for it — is evicted at the earliest time over its
claims. Terminating and finished pods are left alone.

Where upstream's own controller evicts too (kube-controller-manager on 1.36+), an
`Ownership` says for which taint sources it does: slice taints, upstream's
DeviceTaintRules, or both. A pod keeps its eviction in the plan (the CLI shows it, the
rules count it) but carries `upstream_when`, the earliest time upstream evicts it; when
that is no later than draco's own time (or the moment draco acts, if later) plus
`DEFER_WINDOW`, draco leaves the pod to upstream (`deferred_at`), so one pod never
receives two DELETEs. draco's own
DeviceTaintRules are draco's alone: upstream cannot see them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from operators.eviction.tolerations import eviction_time
from operators.model import (
    DeviceTaint,
    DeviceToleration,
    ModelError,
    NamespacedName,
    ObjectMeta,
    Pod,
    ResourceClaim,
)
from operators.tracker import Tracker

RULE_PREFIX = "DeviceTaintRule/"
SLICE_PREFIX = "ResourceSlice/"
UPSTREAM_RULE_PREFIX = "DeviceTaintRule.resource.k8s.io/"
# Upstream evicting at most this much later than draco would still takes the pod: the
# two controllers learn of a taint through separate watches, and a DELETE that loses
# the race is a second eviction of the same pod.
DEFER_WINDOW = timedelta(seconds=2)


@dataclass(frozen=True, slots=True)
class Ownership:
    """For which taint sources upstream's eviction controller evicts (draco defers)."""

    slice_taints: bool = False
    upstream_rules: bool = False
    # Whether upstream's controller sees a pod's extended-resource claim (KEP-5004,
    # `status.extendedResourceClaimStatus`): from 1.37 it does; before, it reads only
    # `spec.resourceClaims` and never evicts such a pod (kubernetes/kubernetes#141290),
    # so draco does not leave it to upstream.
    extended_claims: bool = True

    def upstream_evicts(self, source: str) -> bool:
        if source.startswith(SLICE_PREFIX):
            return self.slice_taints
        if source.startswith(UPSTREAM_RULE_PREFIX):
            return self.upstream_rules
        return False


DRACO_ALONE = Ownership()  # draco evicts for every taint source
UPSTREAM = Ownership(slice_taints=True, upstream_rules=True)
SLICE_TAINT_MODES = ("auto", "draco", "upstream")


def ownership_for(mode: str, upstream_evicts: bool, server_version: str | None = None) -> Ownership:
    """`--slice-taints`: `auto` leaves slice taints (and upstream's own rules) to upstream
    where its controller runs by default (`upstream_evicts`, from discovery), except for
    pods whose device came through an extended resource on servers before 1.37, which
    upstream's controller does not see; `draco` is for clusters whose administrators
    turned upstream's controller off, so draco evicts for upstream's rules too;
    `upstream` defers whatever discovery and the version say."""
    if mode not in SLICE_TAINT_MODES:
        raise ValueError(f"unknown --slice-taints mode {mode!r}; choose from {', '.join(SLICE_TAINT_MODES)}")
    if mode == "upstream":
        return UPSTREAM
    if mode == "auto" and upstream_evicts:
        return replace(UPSTREAM, extended_claims=sees_extended_claims(server_version))
    return DRACO_ALONE


def sees_extended_claims(server_version: str | None) -> bool:
    """Whether upstream's eviction controller of this version evicts pods for their
    extended-resource claim: 1.37 and later (read in its code: 1.36.3 walks only
    `spec.resourceClaims`, 1.37 every claim of the pod). A version draco cannot read
    counts as seeing them: then draco still evicts such a pod once upstream's grace
    (`upstream_grace`) is over, and never twice."""
    match = re.match(r"v?(\d+)\.(\d+)", server_version or "")
    if match is None:
        return True
    return (int(match.group(1)), int(match.group(2))) >= (1, 37)


def upstream_sees(pod: Pod, claim: NamespacedName, ownership: Ownership) -> bool:
    """Whether upstream's controller finds CLAIM through POD (draco may leave it to it)."""
    if ownership.extended_claims:
        return True
    ext = pod.extended_resource_claim_status
    return not (ext is not None and ext.resource_claim_name == claim.name
                and claim.name not in (pod.claim_name(pc) for pc in pod.resource_claims))


@dataclass(frozen=True, slots=True)
class ClaimEviction:
    when: datetime
    reasons: frozenset[str]  # taint sources: "DeviceTaintRule/<name>", "ResourceSlice/<name>"
    upstream_when: datetime | None = None  # earliest eviction by upstream's controller

    @property
    def rules(self) -> frozenset[str]:
        return frozenset(r.removeprefix(RULE_PREFIX) for r in self.reasons if r.startswith(RULE_PREFIX))


@dataclass(frozen=True, slots=True)
class PodEviction:
    pod: NamespacedName
    uid: str
    when: datetime
    reasons: frozenset[str]
    claims: tuple[NamespacedName, ...]
    upstream_when: datetime | None = None

    @property
    def rules(self) -> frozenset[str]:
        return frozenset(r.removeprefix(RULE_PREFIX) for r in self.reasons if r.startswith(RULE_PREFIX))

    @property
    def deferred(self) -> bool:
        """Upstream's controller evicts this pod (first, or close enough): draco does not."""
        return self.deferred_at(self.when)

    def deferred_at(self, now: datetime) -> bool:
        """As `deferred`, deciding at `now`: a pod that upstream's controller evicts by
        then (both overdue after a restart, say) is upstream's too, whoever was first."""
        return self.upstream_when is not None and self.upstream_when <= max(self.when, now) + DEFER_WINDOW


@dataclass
class EvictionPlan:
    """Every pod that taints evict, now or later, with the claims' problems on the side."""

    pods: dict[NamespacedName, PodEviction] = field(default_factory=dict)
    claims: dict[NamespacedName, ClaimEviction] = field(default_factory=dict)
    errors: list[ModelError] = field(default_factory=list)

    def due(self, now: datetime) -> list[PodEviction]:
        return sorted((p for p in self.pods.values() if p.when <= now), key=lambda p: p.pod)

    def later(self, now: datetime) -> list[PodEviction]:
        return sorted((p for p in self.pods.values() if p.when > now), key=lambda p: (p.when, p.pod))

    def pending_for_rule(self, rule: str) -> list[PodEviction]:
        return [p for p in self.pods.values() if rule in p.rules]


def _taints(tracker: Tracker, claim: ResourceClaim, simulate: str | None) -> Iterable[tuple[int, DeviceTaint]]:
    assert claim.allocation is not None
    for index, result in enumerate(claim.allocation.results):
        view = tracker.device(result.id)
        if view is None:
            continue
        for taint in view.taints:
            if simulate is not None and taint.source == RULE_PREFIX + simulate:
                taint = DeviceTaint(taint.key, taint.value, "NoExecute", taint.time_added, taint.source)
            yield index, taint


def _earliest(a: datetime | None, b: datetime | None) -> datetime | None:
    if a is None:
        return b
    return a if b is None or a <= b else b


def claim_eviction(tracker: Tracker, claim: ResourceClaim, simulate: str | None = None,
                   ownership: Ownership = DRACO_ALONE) -> ClaimEviction | None:
    """The claim's eviction, None if no NoExecute taint on its devices evicts.

    Raises ModelError when the claim's tolerations annotation is malformed: the caller
    reports it and treats the claim as having no annotation tolerations.
    """
    if claim.allocation is None:
        return None
    when: datetime | None = None
    upstream_when: datetime | None = None
    reasons: set[str] = set()
    tolerations_by_result: dict[int, tuple[DeviceToleration, ...]] = {}
    for index, taint in _taints(tracker, claim, simulate):
        if taint.effect != "NoExecute":
            continue
        if index not in tolerations_by_result:
            tolerations_by_result[index] = claim.tolerations_for(claim.allocation.results[index])
        t = eviction_time(taint, tolerations_by_result[index])
        if t is None:
            continue
        reasons.add(taint.source)
        when = t if when is None or t < when else when
        if ownership.upstream_evicts(taint.source):
            upstream_when = _earliest(upstream_when, t)
    return None if when is None else ClaimEviction(when, frozenset(reasons), upstream_when)


def safe_claim_eviction(tracker: Tracker, claim: ResourceClaim, simulate: str | None,
                         errors: list[ModelError],
                         ownership: Ownership = DRACO_ALONE) -> ClaimEviction | None:
    try:
        return claim_eviction(tracker, claim, simulate, ownership)
    except ModelError as err:
        errors.append(err)
        stripped = ResourceClaim(meta=_without_annotation(claim), requests=claim.requests,
                                 constraints=claim.constraints, config=claim.config,
                                 allocation=claim.allocation, reserved_for=claim.reserved_for)
        return claim_eviction(tracker, stripped, simulate, ownership)


def _without_annotation(claim: ResourceClaim) -> ObjectMeta:
    from dataclasses import replace

    from operators.model.claims import TOLERATIONS_ANNOTATION

    annotations = {k: v for k, v in claim.meta.annotations.items() if k != TOLERATIONS_ANNOTATION}
    return replace(claim.meta, annotations=annotations)


def is_user(pod: Pod, claim: ResourceClaim) -> bool:
    """The pod references the claim as upstream's controller accepts it, and the claim is
    reserved for this pod instance. A claim the pod finds through its status (generated
    from a template, or its extended-resource claim) counts only when it is controlled by
    the pod (ownerReference with `controller: true` and the pod's UID): a claim of the
    same name that another pod or a user made is not the pod's."""
    if not any(name == claim.name and (not must_own or claim.meta.controller_uid == pod.meta.uid)
               for name, must_own in pod.claim_refs()):
        return False
    return any((r.is_pod and r.name == pod.name and r.uid == pod.meta.uid)
               or (r.is_pod_group and pod.pod_group and r.name == pod.pod_group)  # KEP-5729
               for r in claim.reserved_for)


def evictable(pod: Pod) -> bool:
    return bool(pod.node_name) and not pod.terminal and not pod.meta.deleting


def plan(tracker: Tracker, simulate: str | None = None,
         claims: Mapping[NamespacedName, ClaimEviction] | None = None,
         ownership: Ownership = DRACO_ALONE) -> EvictionPlan:
    """Pods to evict now or later. `simulate` names a rule whose effect counts as NoExecute."""
    result = EvictionPlan()
    if claims is None:
        for claim in tracker.claims():
            ev = safe_claim_eviction(tracker, claim, simulate, result.errors, ownership)
            if ev is not None:
                result.claims[claim.meta.key] = ev
    else:
        result.claims = dict(claims)
    for key, ev in result.claims.items():
        owner = tracker.claim(key)
        if owner is None:
            continue
        for pod_key in tracker.pods_of_claim(key):
            pod = tracker.pod(pod_key)
            if pod is None or not evictable(pod) or key not in pod.claim_keys() or not is_user(pod, owner):
                continue
            prev = result.pods.get(pod_key)
            upstream_when = ev.upstream_when if upstream_sees(pod, key, ownership) else None
            if prev is None:
                result.pods[pod_key] = PodEviction(pod_key, pod.meta.uid, ev.when, ev.reasons, (key,),
                                                   upstream_when)
            else:
                result.pods[pod_key] = PodEviction(
                    pod_key, pod.meta.uid, min(prev.when, ev.when), prev.reasons | ev.reasons,
                    tuple(sorted({*prev.claims, key})), _earliest(prev.upstream_when, upstream_when))
    return result


def pod_eviction(tracker: Tracker, key: NamespacedName,
                 claims: Mapping[NamespacedName, ClaimEviction],
                 ownership: Ownership = DRACO_ALONE) -> PodEviction | None:
    """One pod's eviction given the evictions of claims (None: the pod stays).

    The pod-centric form of what `plan` decides claim by claim: the earliest time over
    the claims the pod uses and is a reserved user of, all their taint sources.
    """
    pod = tracker.pod(key)
    if pod is None or not evictable(pod):
        return None
    when: datetime | None = None
    upstream_when: datetime | None = None
    reasons: set[str] = set()
    used: list[NamespacedName] = []
    for claim_key in dict.fromkeys(pod.claim_keys()):
        ev = claims.get(claim_key)
        if ev is None:
            continue
        owner = tracker.claim(claim_key)
        if owner is None or not is_user(pod, owner):
            continue
        when = ev.when if when is None or ev.when < when else when
        if upstream_sees(pod, claim_key, ownership):
            upstream_when = _earliest(upstream_when, ev.upstream_when)
        reasons |= ev.reasons
        used.append(claim_key)
    if when is None:
        return None
    return PodEviction(key, pod.meta.uid, when, frozenset(reasons), tuple(sorted(used)), upstream_when)
