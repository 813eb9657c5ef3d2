"""metav1.Condition bookkeeping: lastTransitionTime moves only when the status flips."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, cast


def rfc3339(moment: datetime) -> str:
    """A condition's or Event's timestamp as the API writes it (UTC, whole seconds)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def transition_time(previous: Mapping[str, Any] | None, status: str | None, now: str) -> str:
    """The `lastTransitionTime` for a condition about to read `status`: kept while the
    status stays what `previous` said, `now` when it flips or was never stamped."""
    since = previous.get("lastTransitionTime") if previous else None
    if not previous or previous.get("status") != status or not since:
        return now
    return cast(str, since)  # as stored: the API hands out RFC 3339 strings


def merge_condition(existing: Sequence[Mapping[str, Any]], new: Mapping[str, Any],
                    now: str) -> list[dict[str, Any]]:
    """The condition list with `new` replacing the entry of its type."""
    out: list[dict[str, Any]] = []
    placed = False
    for cond in existing:
        if cond.get("type") == new["type"]:
            merged = dict(new)
            merged["lastTransitionTime"] = transition_time(cond, new.get("status"), now)
            out.append(merged)
            placed = True
        else:
            out.append(dict(cond))
    if not placed:
        out.append({**new, "lastTransitionTime": now})
    return out
