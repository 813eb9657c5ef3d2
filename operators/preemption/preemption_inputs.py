"""What victim selection reads from the tracker: the pods that hold allocated claims,
the members of running gangs (those holding no device too), and the gangs. Shared by
`draco allocate --preempt` and the allocator controller, so that both choose the same
victims."""

from __future__ import annotations

from operators.model import Pod
from operators.preemption.preemption import Running
from operators.preemption.victim_gangs import VictimGang, VictimGangs
from operators.tracker import Tracker
from operators.tracker.gangs import GangMembers, gang_key, gang_overlay, placed


def _runs(pod: Pod) -> bool:
    """Running as far as preemption cares: bound, or ungated (a gated pod holds nothing)."""
    return bool(pod.node_name or not pod.scheduling_gates)


def running_pods(tracker: Tracker) -> list[Running]:
    """Pods holding allocated claims, and running gang members holding none (a
    launcher): those can only go with their gang, and count towards its minCount."""
    out = []
    for pod in tracker.pods():
        if pod.terminal or pod.meta.deleting or not _runs(pod):
            continue
        if not pod.resource_claims:
            if gang_key(pod) is not None:
                out.append(Running(pod, ()))
            continue
        claims = [c for k in pod.claim_keys() if (c := tracker.claim(k)) is not None
                  and c.allocation is not None]
        if claims:
            out.append(Running(pod, tuple(claims)))
    return out


def gang_units(tracker: Tracker) -> VictimGangs:
    """Each running gang with its running members (placed: every claim allocated, or
    none to allocate) and its minCount."""
    gangs = gang_overlay(tracker)
    if gangs is None:
        return VictimGangs()
    members = GangMembers()
    members.rescan(tracker)
    out: list[VictimGang] = []
    for key, pods in members.pods.items():
        gang = gangs.gang(*key)
        if gang is None:
            continue
        keys = sorted(k for k in pods if (p := tracker.pod(k)) is not None and placed(tracker, p)
                      and _runs(p))
        if keys:
            out.append(VictimGang("/".join(key), tuple(f"{k.namespace}/{k.name}" for k in keys),
                                  gang.min_count))
    return VictimGangs(out)


__all__ = ["gang_units", "running_pods"]
