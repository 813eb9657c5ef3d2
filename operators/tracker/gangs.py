"""Gangs in the shared tracker: draco's `Gang` objects and upstream's `PodGroup`s, parsed.

An overlay only in form: it contributes nothing to any device. It keeps the groups the
allocator (joint placement) and the narrowing controller (ungate only complete gangs)
both read, fed by the same watch machinery as every other kind. A group that cannot
be read is dropped and its error recorded: its pods are then placed by no one (fail
closed) until it is fixed. Which pods belong to which group is not kept here (pods are
the tracker's; see `gangs.gang_members`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from operators.model import DeviceID, NamespacedName, Pod, ResourceClaim
from operators.model.gangs import Gang, gang_of, parse_gang, parse_pod_group
from operators.tracker.overlay import EventType, OverlayBase

GangKey = tuple[str, str, str]  # (kind, namespace, name)


class TrackerReads(Protocol):
    """What the membership index reads of the tracker (this module sits below it)."""

    def pod(self, key: NamespacedName) -> Pod | None: ...

    def pods(self) -> Iterable[Pod]: ...

    def claim(self, key: NamespacedName) -> ResourceClaim | None: ...
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


def gang_key(pod: Pod) -> GangKey | None:
    found = gang_of(pod)
    return None if found is None else (found[0], pod.meta.namespace, found[1])


class GangMembers:
    """pod -> gang and gang -> pods, for the pods the tracker keeps; finished pods
    (Succeeded or Failed) apart, in `finished`: they are no members, but one the gang
    let go and that finished still counts toward its minCount (`released`)."""

    def __init__(self) -> None:
        self.of_pod: dict[NamespacedName, GangKey] = {}
        self.pods: dict[GangKey, set[NamespacedName]] = {}
        self.of_finished: dict[NamespacedName, GangKey] = {}
        self.finished: dict[GangKey, set[NamespacedName]] = {}

    def update(self, tracker: TrackerReads, keys: Iterable[NamespacedName]) -> set[GangKey]:
        """Follow the pods named; returns the gangs whose membership or members changed."""
        touched: set[GangKey] = set()
        for key in keys:
            pod = tracker.pod(key)
            gkey = None if pod is None else gang_key(pod)
            done = pod is not None and pod.terminal
            touched |= _move(key, None if done else gkey, self.of_pod, self.pods)
            _move(key, gkey if done else None, self.of_finished, self.finished)
        return touched

    def members(self, key: GangKey) -> set[NamespacedName]:
        """The gang's pods, finished ones included."""
        return self.pods.get(key, set()) | self.finished.get(key, set())

    def rescan(self, tracker: TrackerReads) -> set[GangKey]:
        for table in (self.of_pod, self.pods, self.of_finished, self.finished):
            table.clear()
        return self.update(tracker, [p.meta.key for p in tracker.pods()])


def _move(key: NamespacedName, new: GangKey | None, of: dict[NamespacedName, GangKey],
          index: dict[GangKey, set[NamespacedName]]) -> set[GangKey]:
    """KEY's entry in one pod -> gang index moved to NEW (None: out); the gangs touched
    (the old one whenever the pod had one, since its member changed)."""
    touched: set[GangKey] = set()
    old = of.get(key)
    if old is not None:
        touched.add(old)
    if old == new:
        return touched
    if old is not None:
        members = index.get(old)
        if members is not None:
            members.discard(key)
            if not members:
                del index[old]
        del of[key]
    if new is not None:
        of[key] = new
        index.setdefault(new, set()).add(key)
        touched.add(new)
    return touched


def placed(tracker: TrackerReads, pod: Pod) -> bool:
    """A member with its devices: unfinished, not being deleted, every claim it names
    known, existing and allocated."""
    if pod.terminal or pod.meta.deleting:
        return False
    if any(pod.claim_name(pc) is None for pc in pod.resource_claims):
        return False
    for key in pod.claim_keys():
        claim = tracker.claim(key)
        if claim is None or claim.allocation is None:
            return False
    return True


def released(pod: Pod, gate: str) -> bool:
    """A member the gang already let go: bound to a node and no longer held by draco's
    gate, running or finished successfully. It counts toward the gang's `minCount` even
    once it finished and its claims went (under kwok a Job's pod completes as soon as it
    is bound): the gang was complete when it was let go, and the members still being
    ungated are the rest of that release, not a partial placement to take back. A
    member that failed or is being deleted does not count (a restarted JobSet deletes
    its old pods, and their gang is placed anew)."""
    return bool(pod.node_name) and not pod.has_gate(gate) and not pod.meta.deleting \
        and pod.phase != "Failed"


def placed_count(tracker: TrackerReads, members: GangMembers, key: GangKey, gate: str) -> int:
    """Members with their devices, or already let go (`released`)."""
    return sum(1 for k in members.members(key) if (p := tracker.pod(k)) is not None
               and (placed(tracker, p) or released(p, gate)))


def gang_overlay(tracker: Any) -> GangOverlay | None:
    """The tracker's GangOverlay, if one is registered."""
    for overlay in tracker.overlays:
        if isinstance(overlay, GangOverlay):
            return overlay
    return None


__all__ = ["GANG_KINDS", "GangKey", "GangMembers", "GangOverlay", "gang_key", "gang_overlay",
           "placed", "placed_count", "released"]
