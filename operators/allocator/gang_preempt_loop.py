"""Preemption for a gang in the allocator controller: the shell around
`allocator.gang_preemption.select_gang_victims`, built on the pod's (`preempt_loop`).

When a gang's core cannot be placed and preemption is on, draco chooses victims for the
whole gang, then records one nomination per member still to place (the annotation of
`allocator.nomination`, each with the member's node and devices and the gang's victims),
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

from operators.allocator.gang import GangOutcome
from operators.allocator.gang_members import GangView
from operators.allocator.gang_preemption import select_gang_victims
from operators.allocator.nodes import NodeIndex
from operators.allocator.nomination import NOMINATION_ANNOTATION, Nomination
from operators.allocator.preempt_loop import PREEMPTIONS, PreemptionWork
from operators.allocator.preemption import prepare
from operators.allocator.preemption_inputs import gang_units, running_pods
from operators.model import DeviceID, NamespacedName

log = structlog.get_logger("draco.allocator")


class GangPreemptionWork(PreemptionWork):
    """Mixed into AllocatorController beside GangWork."""

    def _preempt_gang(self, view: GangView, index: NodeIndex, in_use: Collection[DeviceID],
                      outcome: GangOutcome) -> bool:
        """Called when the gang's core cannot be placed (OUTCOME, over IN_USE). True:
        nominations stand for its members (victims are going); False: preemption does
        not help."""
        assert view.gang is not None
        now = self.clock()  # type: ignore[attr-defined]
        members = [m.pod for m in view.pending]
        if view.key in self.preempting:
            return True  # its nomination or evictions are being written: decided again after
        standing = [(p, n) for p in members if (n := self.nominations.get(p.meta.key)) is not None]
        if standing and all(not n.expired(now) for _, n in standing):
            victims: set[NamespacedName] = set()
            for pod, nomination in standing:
                victims.update(nomination.victims)
                if pod.meta.uid not in self.fenced:  # a new leader fences what it finds
                    self.fenced.add(pod.meta.uid)
                    self._background(self._fence(pod.meta.uid, nomination.devices))  # type: ignore[attr-defined]
            first = standing[0]
            self._spawn_evictions(first[0].meta.key, first[0], Nomination(
                None, (), tuple(sorted(victims)), first[1].deadline), mark=view.key)
            return True
        stale = {pod.meta.key: (pod.meta.uid, n) for pod, n in standing}
        if standing:  # one expired: the gang's nomination goes whole, and is chosen anew
            PREEMPTIONS.labels(outcome="expired").inc()
            for pod, _ in standing:
                self.nominations.pop(pod.meta.key, None)
                self.nominee_uids.pop(pod.meta.key, None)
                self.unconfirmed.discard(pod.meta.key)
            self._age()
        if not self._choose_for_gang(view, index, in_use, now, stale, outcome):
            for key, (uid, nomination) in stale.items():  # nothing replaces them: they go
                self._background(self._clear(key, uid))  # type: ignore[attr-defined]
                self._background(self._unfence(uid, nomination.devices))  # type: ignore[attr-defined]
            return False
        return True

    def _choose_for_gang(self, view: GangView, index: NodeIndex, in_use: Collection[DeviceID],
                         now: datetime, stale: Mapping[NamespacedName, tuple[str, Nomination]],
                         outcome: GangOutcome) -> bool:
        """Victims for the gang, nominated on its core members (True), or none (False).
        STALE: members' expired nominations, replaced (their fences go first)."""
        assert view.gang is not None
        if self.prepared is None:
            self.prepared = prepare(running_pods(self.tracker), self.tracker.claims())
        decision = select_gang_victims(view.gang, view.members, index, self._classes, in_use,
                                       self.prepared, self.budgets, gang_units(self.tracker),
                                       self.settings.budget, self._current_shares(),  # type: ignore[attr-defined]
                                       known=outcome)
        if decision.verdict != "preempt":
            return False
        deadline = now + timedelta(seconds=self.settings.nomination_timeout)
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
            self.nominations[nominee.meta.key] = nomination
            self.nominee_uids[nominee.meta.key] = nominee.meta.uid
            nominated.append((nominee.meta.key, nominee.meta.uid, nomination))
        if not nominated:
            return False
        self._age()
        PREEMPTIONS.labels(outcome="nominated").inc()
        self._spawn(nominated[0][0], self._preemption_task(  # type: ignore[attr-defined]
            view.key, self._nominate_gang(view, nominated, decision.reason, stale)))
        return True

    async def _nominate_gang(self, view: GangView,
                             nominated: Sequence[tuple[NamespacedName, str, Nomination]],
                             why: str, stale: Mapping[NamespacedName, tuple[str, Nomination]]) -> None:
        """Every member's nomination first, then the victims; if one cannot be recorded,
        those written are removed and the gang is decided again later. STALE nominations
        go first: their fences on devices no longer nominated, and the annotations of
        members not nominated again."""
        try:
            new = {key: nomination for key, _, nomination in nominated}
            for key, (uid, old) in stale.items():
                kept = new.get(key)
                if kept is None:
                    await self._clear(key, uid)
                await self._unfence(uid, tuple(d for d in old.devices
                                               if kept is None or d not in kept.devices))
            await self._nominate_members(view, nominated, why)
        finally:
            self.gang_queue.add(view.key)  # type: ignore[attr-defined]
            self.wake.set()  # type: ignore[attr-defined]

    async def _nominate_members(self, view: GangView,
                                nominated: Sequence[tuple[NamespacedName, str, Nomination]],
                                why: str) -> None:
        written: list[tuple[NamespacedName, str, Nomination]] = []
        for key, uid, nomination in nominated:
            path = f"/api/v1/namespaces/{key.namespace}/pods/{key.name}"
            resp = await self.client.merge_patch(path, {"metadata": {
                "uid": uid, "annotations": {NOMINATION_ANNOTATION: nomination.to_annotation()}}})
            if not resp.ok:
                log.warning("cannot record the gang's nomination; deciding the gang again later",
                            kind="Pod", namespace=key.namespace, name=key.name,
                            gang=view.label, status=resp.status)
                for k, _u, _ in nominated:
                    self.nominations.pop(k, None)
                    self.nominee_uids.pop(k, None)
                for k, u, _ in written:
                    await self._clear(k, u)
                self._age()
                self.gang_retry_at[view.key] = self.monotonic() + self.settings.retry_after  # type: ignore[attr-defined]
                return
            written.append((key, uid, nomination))
            self.unconfirmed.add(key)
        for key, uid, nomination in written:  # kube-scheduler's words, before any victim
            await self._nominated_node(key, uid, nomination.node)
        for _, uid, nomination in written:
            self.fenced.add(uid)
            await self._fence(uid, nomination.devices)
        victims = nominated[0][2].victims
        text = ", ".join(f"{v.namespace}/{v.name}" for v in victims)
        log.info("preempting for a gang", gang=view.label, victims=text,
                 members=[f"{k.namespace}/{k.name}" for k, _, _ in written])
        for key, uid, nomination in written:
            await self.reports.event(key, uid, "Preempting",
                                     f"gang {view.label}: evicting {text} for devices "
                                     f"{', '.join(str(d) for d in nomination.devices)}: {why}")
        await self._evict_all(nominated[0][0], nominated[0][2])


__all__ = ["GangPreemptionWork"]
