"""Prometheus metrics of the ResourceSlicePatch reporter (names prefixed `draco_`)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

MATCHED_DEVICES = Gauge(
    "draco_resourceslicepatch_matched_devices",
    "Devices each ResourceSlicePatch's filter currently matches.",
    ["patch"],
)
FAULTY = Gauge(
    "draco_resourceslicepatch_faulty",
    "1 when the ResourceSlicePatch has a faulty selector, a missing class or a bad spec.",
    ["patch"],
)
EVENTS = Counter(
    "draco_resourceslicepatch_events_total",
    "Events posted about ResourceSlicePatches, by reason.",
    ["reason"],
)
STATUS_WRITES = Counter(
    "draco_resourceslicepatch_status_writes_total",
    "Status subresource writes made by the ResourceSlicePatch reporter.",
)
