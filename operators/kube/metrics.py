"""Metrics of draco's API traffic and of its gated pods' waits (names prefixed `draco_`).

Here, below every controller, because more than one controller reports into them: the
allocator and the narrowing controller observe the same latency histogram, each under
its own `controller` label, and every request of the process goes through the client
and the list+watch feeds of this package.

Label values come from short closed sets (HTTP verbs, error classes, controller names),
so no series grows with the cluster. The error counter's series are made at import, at
zero: a dashboard or alert then has a series to show from the first scrape, and
`rate()` sees the first error as an increase rather than as a series appearing.
"""

from __future__ import annotations

from datetime import datetime

from prometheus_client import Counter, Histogram

VERBS = ("GET", "LIST", "WATCH", "POST", "PUT", "PATCH", "DELETE")
# Why a request failed: no answer (connection, TLS, timeout), the server failed (5xx),
# it throttled draco (429), it refused draco's credentials or rights (401, 403), or it
# refused the request itself (any other 4xx but 404 and 409, which draco expects: an
# object gone, a conflict it reads again for).
REASONS = ("transport", "server", "throttled", "denied", "rejected")

API_ERRORS = Counter(
    "draco_api_request_errors_total",
    "Kubernetes API requests of draco that failed, by verb and reason: transport (no answer), "
    "server (5xx), throttled (429), denied (401, 403), rejected (other 4xx but 404 and 409, "
    "which draco expects). Every attempt counts, retries too; a PodDisruptionBudget refusing "
    "an eviction (429 on pods/eviction) does not (the eviction controller reports it).",
    ["verb", "reason"],
)
for _verb in VERBS:
    for _reason in REASONS:
        API_ERRORS.labels(verb=_verb, reason=_reason)

# Seconds, from 50 ms (a pod decided and written at once) to an hour (a pod that waited
# for devices to be freed); a wait beyond that is the gated-pods alert's business.
ALLOCATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
ALLOCATION_DURATION = Histogram(
    "draco_allocation_duration_seconds",
    "Seconds from a gated pod's creation (or, for a pod that waited for other controllers' "
    "scheduling gates, from when they left) until a controller finished its part: "
    "controller=allocator when its claims were allocated and reserved, controller=narrowing "
    "when it was narrowed and ungated.",
    ["controller"],
    buckets=ALLOCATION_BUCKETS,
)
for _controller in ("allocator", "narrowing"):
    ALLOCATION_DURATION.labels(controller=_controller)


def error_reason(status: int, path: str = "") -> str | None:
    """The REASONS class of an answer with STATUS (0: no answer), or None when it is not
    an error draco should be alerted about."""
    if status == 0:
        return "transport"
    if status >= 500:
        return "server"
    if status == 429:
        # a PodDisruptionBudget refusing an eviction is an answer, not a failure
        return None if path.endswith("/eviction") else "throttled"
    if status in (401, 403):
        return "denied"
    if status >= 400 and status not in (404, 409):
        return "rejected"
    return None


def count_answer(verb: str, status: int, path: str = "") -> None:
    """Count one answer to a request of VERB (an HTTP method, or LIST/WATCH) when it is an error."""
    reason = error_reason(status, path)
    if reason is not None:
        API_ERRORS.labels(verb=verb, reason=reason).inc()


def gated_pod_done(controller: str, created: datetime | None, now: datetime) -> None:
    """Observe how long a gated pod created at CREATED waited for CONTROLLER's part."""
    if created is not None:
        ALLOCATION_DURATION.labels(controller=controller).observe(
            max((now - created).total_seconds(), 0.0))


__all__ = ["ALLOCATION_DURATION", "API_ERRORS", "REASONS", "VERBS", "count_answer", "error_reason",
           "gated_pod_done"]
