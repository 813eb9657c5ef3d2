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
