"""Preemption for a gang in the allocator controller: the shell around
`preemption.gang_preemption.select_gang_victims`, built on the pod's (`preempt_loop`).

When a gang's core cannot be placed and preemption is on, draco chooses victims for the
whole gang, then records one nomination per member still to place (the annotation of
`preemption.nomination`, each with the member's node and devices and the gang's victims),
all before the first victim is touched, fences the nominated devices off kube-scheduler
(1.37+), and evicts the victims once. Each nomination ends as a pod's does: its member
allocated (the gang is placed on the freed devices, all or nothing), deleted, or the
deadline passed; an expired gang nomination is dropped for every member at once, and
the gang is decided again from scratch.

A draco that starts or takes over reads the members' nominations and finishes them: the
union of their victims is evicted, no one else.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime, timedelta

import structlog

from operators.allocator.capacity import Shares
from operators.allocator.nodes import NodeIndex
from operators.allocator_controller.preempt_loop import PREEMPTIONS, Preemptor
from operators.gangs.gang import GangOutcome
from operators.gangs.gang_members import GangView
from operators.model import DeviceClass, DeviceID, NamespacedName
from operators.preemption.gang_preemption import select_gang_victims
from operators.preemption.nomination import NOMINATION_ANNOTATION, Nomination
from operators.preemption.preemption import prepare
from operators.preemption.preemption_inputs import gang_units, running_pods

log = structlog.get_logger("draco.allocator")


class GangPreemptor:
    """Preemption for gangs, a collaborator of the controller beside the pod's
    `Preemptor`, whose nominations, fences and writes it shares (`self.pods`): a gang's
    nomination is one per member, and ends as a pod's does."""

    def __init__(self, pods: Preemptor) -> None:
        self.pods = pods

    def preempt(self, view: GangView, index: NodeIndex, classes: dict[str, DeviceClass],
                in_use: Collection[DeviceID], shares: Shares, outcome: GangOutcome) -> bool:
        """Called when the gang's core cannot be placed (OUTCOME, over IN_USE). True:
        nominations stand for its members (victims are going); False: preemption does
        not help."""
        pods = self.pods
        assert view.gang is not None
        now = pods.clock()
        members = [m.pod for m in view.pending]
        if view.key in pods.preempting:
            return True  # its nomination or evictions are being written: decided again after
        standing = [(p, n) for p in members if (n := pods.nominations.get(p.meta.key)) is not None]
        if standing and all(not n.expired(now) for _, n in standing):
            victims: set[NamespacedName] = set()
            for pod, nomination in standing:
                victims.update(nomination.victims)
                if pod.meta.uid not in pods.fenced:  # a new leader fences what it finds
                    pods.fenced.add(pod.meta.uid)
                    pods.owner.background(pods.fence(pod.meta.uid, nomination.devices))
            first = standing[0]
            pods.spawn_evictions(first[0].meta.key, first[0], Nomination(
                None, (), tuple(sorted(victims)), first[1].deadline), mark=view.key)
            return True
        stale = {pod.meta.key: (pod.meta.uid, n) for pod, n in standing}
        if standing:  # one expired: the gang's nomination goes whole, and is chosen anew
            PREEMPTIONS.labels(outcome="expired").inc()
            for pod, _ in standing:
                pods.nominations.pop(pod.meta.key, None)
                pods.nominee_uids.pop(pod.meta.key, None)
                pods.unconfirmed.discard(pod.meta.key)
            pods.age()
        if not self._choose_for_gang(view, index, classes, in_use, shares, now, stale, outcome):
            for key, (uid, nomination) in stale.items():  # nothing replaces them: they go
                pods.owner.background(pods.clear(key, uid))
                pods.owner.background(pods.unfence(uid, nomination.devices))
            return False
        return True

    def _choose_for_gang(self, view: GangView, index: NodeIndex, classes: dict[str, DeviceClass],
                         in_use: Collection[DeviceID], shares: Shares, now: datetime, stale: Mapping[NamespacedName, tuple[str, Nomination]],
                         outcome: GangOutcome) -> bool:
        """Victims for the gang, nominated on its core members (True), or none (False).
        STALE: members' expired nominations, replaced (their fences go first)."""
        pods = self.pods
        assert view.gang is not None
        if pods.prepared is None:
            pods.prepared = prepare(running_pods(pods.tracker), pods.tracker.claims())
        decision = select_gang_victims(view.gang, view.members, index, classes, in_use,
                                       pods.prepared, pods.budgets, gang_units(pods.tracker),
                                       pods.settings.budget, shares, known=outcome,
                                       features=pods.features)
        if decision.verdict != "preempt":
            return False
        deadline = now + timedelta(seconds=pods.settings.nomination_timeout)
        victims_of = tuple(sorted(NamespacedName(*v.split("/", 1)) for v in decision.victims))
        # only the core is nominated: extras are placed when they fit, never waited for
        need = max(0, view.gang.min_count - view.placed)
        core = sorted(view.pending, key=lambda m: m.label)[:need]
        by_label = {m.label: m.pod for m in core}
        nominated: list[tuple[NamespacedName, str, Nomination]] = []
        for placed in decision.placed:
            nominee = by_label.get(placed.label)
            if nominee is None:
                continue
            devices = tuple(sorted({r.id for _, a in placed.allocations for r in a.results}))
            nomination = Nomination(placed.node, devices, victims_of, deadline)
            pods.nominations[nominee.meta.key] = nomination
            pods.nominee_uids[nominee.meta.key] = nominee.meta.uid
            nominated.append((nominee.meta.key, nominee.meta.uid, nomination))
        if not nominated:
            return False
        pods.age()
        PREEMPTIONS.labels(outcome="nominated").inc()
        pods.owner.spawn(nominated[0][0], pods.task(
            view.key, self._nominate_gang(view, nominated, decision.reason, stale)))
        return True

    async def _nominate_gang(self, view: GangView,
                             nominated: Sequence[tuple[NamespacedName, str, Nomination]],
                             why: str, stale: Mapping[NamespacedName, tuple[str, Nomination]]) -> None:
        """Every member's nomination first, then the victims; if one cannot be recorded,
        those written are removed and the gang is decided again later. STALE nominations
        go first: their fences on devices no longer nominated, and the annotations of
        members not nominated again."""
        pods = self.pods
        try:
            new = {key: nomination for key, _, nomination in nominated}
            for key, (uid, old) in stale.items():
                kept = new.get(key)
                if kept is None:
                    await pods.clear(key, uid)
                await pods.unfence(uid, tuple(d for d in old.devices
                                               if kept is None or d not in kept.devices))
            await self._nominate_members(view, nominated, why)
        finally:
            pods.owner.decide_gang_again(view.key)

    async def _nominate_members(self, view: GangView,
                                nominated: Sequence[tuple[NamespacedName, str, Nomination]],
                                why: str) -> None:
        pods = self.pods
        written: list[tuple[NamespacedName, str, Nomination]] = []
        for key, uid, nomination in nominated:
            path = f"/api/v1/namespaces/{key.namespace}/pods/{key.name}"
            resp = await pods.client.merge_patch(path, {"metadata": {
                "uid": uid, "annotations": {NOMINATION_ANNOTATION: nomination.to_annotation()}}})
            if not resp.ok:
                log.warning("cannot record the gang's nomination; deciding the gang again later",
                            kind="Pod", namespace=key.namespace, name=key.name,
                            gang=view.label, status=resp.status)
                for k, _u, _ in nominated:
                    pods.nominations.pop(k, None)
                    pods.nominee_uids.pop(k, None)
                for k, u, _ in written:
                    await pods.clear(k, u)
                pods.age()
                pods.owner.retry_gang(view.key)
                return
            written.append((key, uid, nomination))
            pods.unconfirmed.add(key)
        for key, uid, nomination in written:  # kube-scheduler's words, before any victim
            await pods.nominated_node(key, uid, nomination.node)
        for _, uid, nomination in written:
            pods.fenced.add(uid)
            await pods.fence(uid, nomination.devices)
        victims = nominated[0][2].victims
        text = ", ".join(f"{v.namespace}/{v.name}" for v in victims)
        log.info("preempting for a gang", gang=view.label, victims=text,
                 members=[f"{k.namespace}/{k.name}" for k, _, _ in written])
        for key, uid, nomination in written:
            await pods.reports.event(key, uid, "Preempting",
                                     f"gang {view.label}: evicting {text} for devices "
                                     f"{', '.join(str(d) for d in nomination.devices)}: {why}")
        await pods.evict_all(nominated[0][0], nominated[0][2])


__all__ = ["GangPreemptor"]
