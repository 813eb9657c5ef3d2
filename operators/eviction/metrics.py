"""Prometheus metrics, named after upstream's devicetainteviction metrics with draco's prefix."""

from __future__ import annotations

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
