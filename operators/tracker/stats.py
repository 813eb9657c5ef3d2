"""Counters of the work the tracker did, so tests assert the work instead of timing it."""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(slots=True)
class TrackerStats:
    events: int = 0
    parse_errors: int = 0
    slice_updates: int = 0
    device_updates: int = 0  # published devices re-examined
    view_updates: int = 0  # device views recomposed
    overlay_calls: int = 0
    claim_updates: int = 0
    pod_updates: int = 0
    class_updates: int = 0
    notifications: int = 0
    subscriber_errors: int = 0

    def snapshot(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


__all__ = ["TrackerStats"]
