"""What victim selection reads from the tracker: the pods that hold allocated claims and
the pods that go together (gangs). Shared by `draco allocate --preempt` and the
allocator controller, so that both choose the same victims."""

from __future__ import annotations

from operators.allocator.preemption import Running
from operators.tracker import Tracker
from operators.tracker.gangs import GangMembers, gang_overlay, placed


def running_pods(tracker: Tracker) -> list[Running]:
    """Pods holding allocated claims: bound, or ungated (a gated pod holds none yet)."""
    out = []
    for pod in tracker.pods():
        if pod.terminal or pod.meta.deleting or not pod.resource_claims:
            continue
        claims = [c for k in pod.claim_keys() if (c := tracker.claim(k)) is not None
                  and c.allocation is not None]
        if claims and (pod.node_name or not pod.scheduling_gates):
            out.append(Running(pod, tuple(claims)))
    return out


def gang_units(tracker: Tracker) -> dict[str, tuple[str, ...]]:
    """A member of a gang goes with its gang's placed members, unless the gang keeps
    minCount placed members without it."""
    gangs = gang_overlay(tracker)
    members = GangMembers()
    members.rescan(tracker)
    out: dict[str, tuple[str, ...]] = {}
    for key, pods in members.pods.items():
        gang = gangs.gang(*key) if gangs is not None else None
        if gang is None:
            continue
        keys = sorted(k for k in pods if (p := tracker.pod(k)) is not None and placed(tracker, p))
        labels = tuple(f"{k.namespace}/{k.name}" for k in keys)
        if len(labels) - 1 < gang.min_count:
            for label in labels:
                out[label] = labels
    return out


__all__ = ["gang_units", "running_pods"]
