"""Which NoExecute taints a claim's allocated device results tolerate, and for how long.

Upstream's controller reads only the tolerations copied into the allocation result and
only those with effect NoExecute. draco reads the union DESIGN.md describes (result copy,
the allocated request's or subrequest's own tolerations, the claim annotation) and —
as the DeviceToleration API documents — lets an empty effect match every effect.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from operators.eviction.timemath import plus_seconds
from operators.model import DeviceTaint, DeviceToleration

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
NEVER = None


def applies_to_eviction(toleration: DeviceToleration) -> bool:
    """Tolerations that can hold off a NoExecute eviction: effect NoExecute or empty."""
    return toleration.effect in ("", "NoExecute")


def eviction_time(taint: DeviceTaint, tolerations: Iterable[DeviceToleration]) -> datetime | None:
    """When `taint` evicts the users of a device with these tolerations; None for never.

    Only NoExecute taints evict. A matching toleration without tolerationSeconds
    tolerates forever; otherwise the smallest matching tolerationSeconds (negative
    counts as zero) is added to the taint's timeAdded. A taint without a time counts
    from the epoch: it is already due. An expiry past 9999-12-31T23:59:59Z never comes,
    so such a toleration tolerates forever (upstream's int64 nanoseconds would wrap and
    evict at once; see `timemath`).
    """
    if taint.effect != "NoExecute":
        return NEVER
    seconds: int | None = None
    for tol in tolerations:
        if not applies_to_eviction(tol) or not tol.tolerates(taint):
            continue
        if tol.toleration_seconds is None:
            return NEVER
        s = max(tol.toleration_seconds, 0)
        seconds = s if seconds is None else min(seconds, s)
    start = taint.time_added or EPOCH
    return start if seconds is None else plus_seconds(start, seconds)
