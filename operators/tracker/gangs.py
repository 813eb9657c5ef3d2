"""Gangs in the shared tracker: draco's `Gang` objects and upstream's `PodGroup`s, parsed.

An overlay only in form: it contributes nothing to any device. It keeps the groups the
allocator (joint placement) and the narrowing controller (ungate only complete gangs)
both read, fed by the same watch machinery as every other kind. A group that cannot
be read is dropped and its error recorded: its pods are then placed by no one (fail
closed) until it is fixed. Which pods belong to which group is not kept here (pods are
the tracker's; see `allocator.gang_members`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from operators.model import DeviceID
from operators.model.gangs import Gang, parse_gang, parse_pod_group
from operators.tracker.overlay import EventType, OverlayBase

GangKey = tuple[str, str, str]  # (kind, namespace, name)
GANG_KINDS = frozenset({"Gang", "PodGroup"})


class GangOverlay(OverlayBase):
    name = "gangs"
    kinds = GANG_KINDS

    def __init__(self) -> None:
        super().__init__()
        self.gangs: dict[GangKey, Gang] = {}
        self.basic: set[GangKey] = set()  # PodGroups without a gang policy: no gang
        self.generation = 0  # bumped on every change, for caches

    def apply(self, event_type: EventType, obj: Any) -> Iterable[DeviceID]:
        kind = str(obj.get("kind") or "")
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        key = (kind, str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        self.generation += 1
        self.gangs.pop(key, None)
        self.basic.discard(key)
        if event_type == "DELETED":
            return ()
        # a ModelError propagates: the tracker records it, and the group stays dropped
        if kind == "Gang":
            self.gangs[key] = parse_gang(obj)
        else:
            parsed = parse_pod_group(obj)
            if parsed is None:
                self.basic.add(key)
            else:
                self.gangs[key] = parsed
        return ()

    def gang(self, kind: str, namespace: str, name: str) -> Gang | None:
        return self.gangs.get((kind, namespace, name))

    def is_basic(self, kind: str, namespace: str, name: str) -> bool:
        return (kind, namespace, name) in self.basic


def gang_overlay(tracker: Any) -> GangOverlay | None:
    """The tracker's GangOverlay, if one is registered."""
    for overlay in tracker.overlays:
        if isinstance(overlay, GangOverlay):
            return overlay
    return None


__all__ = ["GANG_KINDS", "GangKey", "GangOverlay", "gang_overlay"]
