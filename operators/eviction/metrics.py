"""Prometheus metrics, named after upstream's devicetainteviction metrics with draco's prefix.

The per-rule series (`draco_device_taint_rule_*`, labels rule and driver) follow the
DeviceTaintRules: made when the controller first sees a rule, removed when the rule is
gone, so their number is the number of rules, not of every rule that ever existed.
`driver` is the rule's deviceSelector driver ("" when it names none), for dashboards
that show one driver's rules.
"""

from __future__ import annotations

import contextlib

from prometheus_client import Counter, Gauge, Histogram

POD_DELETIONS = Counter(
    "draco_device_taint_pod_deletions_total",
    "Pods deleted (or evicted) because of untolerated NoExecute device taints.",
)
POD_DELETION_LATENCY = Histogram(
    "draco_device_taint_pod_deletion_duration_seconds",
    "Time from when a pod became due for eviction until draco deleted it.",
    buckets=(0.005, 0.025, 0.1, 0.5, 1, 2.5, 10, 30, 60, 120, 180, 240),
)
QUEUE_DEPTH = Gauge(
    "draco_device_taint_eviction_queue_depth",
    "Pods that are due for eviction and not yet deleted.",
)
LEFT_TO_UPSTREAM = Counter(
    "draco_device_taint_pods_left_to_upstream_total",
    "Pods due for eviction that draco left to kube-controller-manager's device-taint-eviction "
    "controller, because it evicts them for the same taints at the same time or earlier.",
)
UPSTREAM_EVICTS = Gauge(
    "draco_device_taint_upstream_evicts",
    "1 where draco leaves eviction for a taint source to kube-controller-manager (--slice-taints "
    "and discovery): source=slice-taints for ResourceSlice taints, source=upstream-rules for "
    "upstream's own DeviceTaintRules. draco's own DeviceTaintRules are always draco's.",
    ["source"],
)


def publish_ownership(slice_taints: bool, upstream_rules: bool) -> None:
    UPSTREAM_EVICTS.labels(source="slice-taints").set(int(slice_taints))
    UPSTREAM_EVICTS.labels(source="upstream-rules").set(int(upstream_rules))


RULE_PODS_PENDING = Gauge(
    "draco_device_taint_rule_pods_pending",
    "Pods a NoExecute DeviceTaintRule still has to evict (0 for other effects; effect None's "
    "what-if count is in the rule's condition, not here).",
    ["rule", "driver"],
)
RULE_PODS_EVICTED = Counter(
    "draco_device_taint_rule_pods_evicted_total",
    "Pods draco evicted because of this DeviceTaintRule's NoExecute taint.",
    ["rule", "driver"],
)
RULE_EVICTION_IN_PROGRESS = Gauge(
    "draco_device_taint_rule_eviction_in_progress",
    "1 while the DeviceTaintRule's EvictionInProgress condition is True, else 0.",
    ["rule", "driver"],
)
_RULE_METRICS = (RULE_PODS_PENDING, RULE_PODS_EVICTED, RULE_EVICTION_IN_PROGRESS)
_drivers: dict[str, str] = {}  # rule -> the driver label its series carry


def rule_seen(rule: str, driver: str | None) -> None:
    """Make (or move to a changed driver) the rule's series; cheap when nothing changed."""
    label = driver or ""
    old = _drivers.get(rule)
    if old == label:
        return
    if old is not None:
        rule_gone(rule)
    _drivers[rule] = label
    for metric in _RULE_METRICS:
        metric.labels(rule=rule, driver=label)


def rule_condition(rule: str, pending: int, in_progress: bool) -> None:
    """The rule's condition as computed in this pass."""
    label = _drivers.get(rule, "")
    RULE_PODS_PENDING.labels(rule=rule, driver=label).set(pending)
    RULE_EVICTION_IN_PROGRESS.labels(rule=rule, driver=label).set(int(in_progress))


def rule_evicted(rule: str) -> None:
    # a rule not seen yet (evicted for before its first status pass) counts under "",
    # and its first sighting moves it to its driver
    RULE_PODS_EVICTED.labels(rule=rule, driver=_drivers.setdefault(rule, "")).inc()


def rule_gone(rule: str) -> None:
    """Remove the rule's series (a rule deleted, or its driver changed)."""
    label = _drivers.pop(rule, "")
    for metric in _RULE_METRICS:
        with contextlib.suppress(KeyError):  # never made
            metric.remove(rule, label)
