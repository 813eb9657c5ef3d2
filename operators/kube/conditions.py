"""metav1.Condition bookkeeping: lastTransitionTime moves only when the status flips."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def merge_condition(existing: Sequence[Mapping[str, Any]], new: Mapping[str, Any],
                    now: str) -> list[dict[str, Any]]:
    """The condition list with `new` replacing the entry of its type."""
    out: list[dict[str, Any]] = []
    placed = False
    for cond in existing:
        if cond.get("type") == new["type"]:
            merged = dict(new)
            merged["lastTransitionTime"] = (cond.get("lastTransitionTime") or now
                                            if cond.get("status") == new.get("status") else now)
            out.append(merged)
            placed = True
        else:
            out.append(dict(cond))
    if not placed:
        out.append({**new, "lastTransitionTime": now})
    return out
