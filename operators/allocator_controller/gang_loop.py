"""The allocator's gang path: members of a gang are decided together, never one by one.

A gated pod that belongs to a gang (label `resource.draco.dev/gang`, or a PodGroup with
a gang policy through `spec.schedulingGroup`) is not allocated alone: its gang is
queued, and the gang is decided as a whole (`gang.place_gang`) over the same device
view, holds and node cache as single pods. Gangs are decided before single pods in
each pass, by priority (the highest member's `spec.priority`), then age.

Writes: when the gang fits, every device of every member is held first, then each
member's claims are written as one pod's are (`claim_writer.write_claim`: finalizer,
then allocation and reservation). The narrowing controller ungates members only once
the gang is complete (at least `minCount` members placed), so no member runs early.

Crash safety without a journal: the claims themselves are the record. A draco killed
mid-write (or a write refused) leaves some members placed and the gang incomplete.
Whoever decides the gang next (this process, after a restart, or a new leader) sees
those members as placed: their domain is the gang's, and only the rest is searched.
If the rest fits, the gang is completed (rolled forward); if it does not, the placed
members that are still gated are released (`claim_writer.release_claim`, as
kube-scheduler releases a failed binding), so an incomplete gang never holds devices.

Starvation: a gang that cannot be placed reserves the domain it came closest in for
`waitSeconds` (default `DEFAULT_WAIT_S`): single pods that are younger and of no
higher priority are allocated elsewhere, so freed devices there accumulate for the
gang. Past the limit the gang reports `WaitLimitExceeded` and stops reserving (it
keeps waiting, and is placed whenever it fits).

`GangPlacer` is a collaborator the controller owns: its own state (the queue, the
reservations), the controller reached through `GangOwner`, and the Gang objects' status
written by its `GangStatusWriter` (`gang_status`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection, Coroutine, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import structlog
from prometheus_client import Counter

from operators.allocator.capacity import Shares
from operators.allocator.features import DEFAULT_GATES, FeatureGates
from operators.allocator.nodes import NodeIndex
from operators.allocator.reserved import Reserved
from operators.allocator.results import allocation_to_api
from operators.allocator_controller.claim_writer import pod_reference, release_claim, write_claim
from operators.allocator_controller.gang_preempt_loop import GangPreemptor
from operators.allocator_controller.gang_status import GangStatusWriter
from operators.allocator_controller.gate_waits import GATE_WAIT, GateWaits
from operators.allocator_controller.holds import Holds, InUse
from operators.allocator_controller.preempt_loop import Preemptor
from operators.gangs.gang import GangOutcome, place_gang
from operators.gangs.gang_members import GangMembers, GangView, gang_view
from operators.kube.client import KubeClient
from operators.kube.conditions import rfc3339
from operators.kube.metrics import gated_pod_done
from operators.kube.pod_reports import PodReporter
from operators.kube.supervision import guarded
from operators.model import DeviceClass, DeviceID, ModelError, NamespacedName, parse_pod_object
from operators.model.errors import FieldError, ObjectRef
from operators.preemption.nomination import NOMINATION_ANNOTATION
from operators.tracker import Change, Tracker
from operators.tracker.gangs import GANG_KINDS, GangKey, gang_overlay

log = structlog.get_logger("draco.allocator")

DEFAULT_WAIT_S = 300.0
PREEMPTING = "WaitingForPreemption"  # as a single pod waiting for its victims reports
# the search ran out of its time budget before finding a placement or ruling one out:
# no verdict (and no preemption, which only follows a proven misfit)
UNDECIDED = "Undecided"
GANGS = Counter("draco_allocator_gangs_total", "Gang decisions, by outcome.", ["outcome"])


@dataclass
class Reservation:
    """Devices a waiting gang keeps younger, lower-or-equal-priority single pods off."""

    devices: frozenset[DeviceID]
    priority: int
    created: float  # the gang's age (creation time, epoch seconds)
    until: float  # monotonic


class GangOwner(Protocol):
    """What the gang placer asks of the controller that owns it: the shared view of
    nodes and devices in use, its writes run beside the loop, and the single pods'
    bookkeeping (a gang member waits, or single pods look again)."""

    def node_index(self) -> NodeIndex: ...

    def device_classes(self) -> dict[str, DeviceClass]: ...

    def current_in_use(self) -> InUse: ...

    def current_shares(self) -> Shares: ...

    def still_free(self, claim: NamespacedName, devices: Iterable[DeviceID]) -> bool: ...

    def spawn(self, key: NamespacedName, coro: Coroutine[Any, Any, None]) -> None: ...

    def background(self, coro: Coroutine[Any, Any, None]) -> None: ...

    def report(self, key: NamespacedName, uid: str, reason: str,
               message: str) -> Coroutine[Any, Any, None]: ...

    def wake_loop(self) -> None: ...

    def decided(self) -> None: ...  # one more allocation searched

    def mark_unsatisfied(self, key: NamespacedName, uid: str) -> None: ...

    def clear_unsatisfied(self, key: NamespacedName) -> None: ...

    def retry_unsatisfied(self) -> None: ...  # single pods waiting for devices look again


class GangPlacer:
    """The allocator controller's gang placement, a collaborator it owns: which gangs
    to decide, their reservations, writes, roll-backs and status. It asks the
    controller through `owner` (GangOwner) only, and its fellow collaborators (gate
    etiquette, the preemptors) through their own interfaces."""

    def __init__(self, tracker: Tracker, client: KubeClient, holds: Holds, settings: Any,
                 reports: PodReporter, sem: asyncio.Semaphore, owner: GangOwner,
                 gate_waits: GateWaits, preemptor: Preemptor, gang_preemptor: GangPreemptor,
                 clock: Callable[[], datetime], monotonic: Callable[[], float]) -> None:
        self.tracker = tracker
        self.client = client
        self.holds = holds
        self.settings = settings
        self.reports = reports
        self.sem = sem
        self.owner = owner
        self.gate_waits = gate_waits
        self.preemptor = preemptor
        self.gang_preemptor = gang_preemptor
        self.clock = clock
        self.monotonic = monotonic
        self.features: FeatureGates = DEFAULT_GATES  # the cluster's release (the owner sets it)
        self.gang_members = GangMembers()
        self.gang_queue: set[GangKey] = set()
        self.gang_waiting: set[GangKey] = set()  # unsatisfiable: decided again on a view change
        self.committing: set[GangKey] = set()
        self.reservations: dict[GangKey, Reservation] = {}
        self.gang_reports: dict[GangKey, str] = {}  # last message reported on the members
        self.gang_since: dict[GangKey, float] = {}  # when it first could not be placed
        self.gang_retry_at: dict[GangKey, float] = {}  # monotonic: after a failed write
        self.gang_limit_passed: set[GangKey] = set()
        self.gangs_allocated = 0
        # the Gang objects' status (`gang_status`): one write per gang at a time, the newest last
        self.status = GangStatusWriter(client, clock, owner.background)

    # -- what the controller and the gang preemptor ask

    def rescan(self) -> None:
        """Every gang with a member is decided (a resync, the first pass)."""
        self.gang_queue |= self.gang_members.rescan(self.tracker)

    def again(self, gkey: GangKey) -> None:
        """The gang is decided on the next pass."""
        self.gang_queue.add(gkey)
        self.owner.wake_loop()

    def retry(self, gkey: GangKey) -> None:
        """A write for the gang failed: decided again after `retry_after`."""
        self.gang_retry_at[gkey] = self.monotonic() + self.settings.retry_after

    def _gang_waits_for_gates(self, view: GangView) -> bool:
        """Whether the gang waits whole for other controllers' gates (`gate_waits`): then
        nothing is placed or reserved for it, each member draco gates is told which member
        waits for which gate, and the members' gate removals wake it."""
        kind = view.gang.kind if view.gang is not None else view.key[0]
        members = [self.tracker.pod(k) for k in sorted(self.gang_members.pods.get(view.key, ()))]
        wait = self.gate_waits.gang_wait(kind, view.label, members)
        if wait is None:
            for pod in members:
                if pod is not None:
                    self.gate_waits.actionable(pod.meta.key)
            return False
        self._unreserve(view.key)
        self.gang_waiting.discard(view.key)  # the members' gate removals wake it
        for pod in wait.told:
            self.owner.clear_unsatisfied(pod.meta.key)
            self.owner.spawn(pod.meta.key, self.gate_waits.tell(pod.meta.key, pod.meta.uid, wait.why))
        self.status.update(view, None, GATE_WAIT)
        return True

    # -- waking

    def on_change(self, change: Change, pods: Collection[NamespacedName]) -> None:
        touched = self.gang_members.update(self.tracker, pods)
        touched |= {(r.kind, r.namespace, r.name) for r in change.objects if r.kind in GANG_KINDS}
        self.gang_queue |= touched

    def view_changed(self) -> None:
        self.gang_queue |= self.gang_waiting

    def gang_of(self, key: NamespacedName) -> GangKey | None:
        """The gang the pod is decided with, None for a single pod (a PodGroup without a
        gang policy is no gang)."""
        gkey = self.gang_members.of_pod.get(key)
        if gkey is None:
            return None
        gangs = gang_overlay(self.tracker)
        if gangs is not None and gangs.is_basic(*gkey):
            return None
        return gkey

    def reserved_from(self, key: NamespacedName, in_use: Collection[DeviceID]) -> Collection[DeviceID]:
        """IN_USE for a single pod, plus the devices waiting gangs reserve from it."""
        if not self.reservations:
            return in_use
        pod = self.tracker.pod(key)
        if pod is None:
            return in_use
        now = self.monotonic()
        created = pod.meta.creation_timestamp.timestamp() if pod.meta.creation_timestamp else 0.0
        extra: set[DeviceID] = set()
        for r in self.reservations.values():
            if r.until <= now:
                continue  # the gang is decided again at its limit (gang_step)
            if pod.priority <= r.priority and created >= r.created:
                extra |= r.devices
        return Reserved(in_use, frozenset(extra)) if extra else in_use

    def _unreserve(self, gkey: GangKey) -> None:
        """The gang no longer keeps devices from single pods: those waiting look again."""
        if self.reservations.pop(gkey, None) is not None:
            self.owner.retry_unsatisfied()

    def next_reservation_expiry(self) -> float | None:
        """The next time a gang must be decided again on its own (a reservation's end, a
        failed write's retry)."""
        times = [r.until for r in self.reservations.values()] + list(self.gang_retry_at.values())
        return min(times, default=None)

    # -- deciding

    def _gang_order(self, gkey: GangKey) -> tuple[int, float, GangKey]:
        pods = [self.tracker.pod(k) for k in self.gang_members.pods.get(gkey, ())]
        priority = max((p.priority for p in pods if p is not None), default=0)
        gangs = gang_overlay(self.tracker)
        gang = gangs.gang(*gkey) if gangs is not None else None
        ts = gang.meta.creation_timestamp if gang is not None else None
        return (-priority, ts.timestamp() if ts is not None else float("inf"), gkey)

    def step(self) -> None:
        now = self.monotonic()
        self.gang_queue |= {g for g, r in self.reservations.items() if r.until <= now}
        self.gang_queue |= {g for g, when in self.gang_retry_at.items() if when <= now}
        queue, self.gang_queue = self.gang_queue, set()
        for gkey in sorted(queue, key=self._gang_order):
            with guarded("allocator", "gang", kind=gkey[0], namespace=gkey[1], name=gkey[2]):
                self._decide_gang(gkey)

    def _decide_gang(self, gkey: GangKey) -> None:
        gangs = gang_overlay(self.tracker)
        if gangs is None or gangs.is_basic(*gkey) or gkey in self.committing:
            return
        if self.gang_retry_at.get(gkey, 0.0) > self.monotonic():
            return  # a write failed: decided again after retry_after (gang_step)
        self.gang_retry_at.pop(gkey, None)
        view = gang_view(self.tracker, gangs, self.gang_members, gkey, self.settings.gate,
                         self.settings.act_beside)
        if view.gang is None:
            self._unreserve(gkey)
            if not view.members and not view.not_ready:
                self._forget_gang(gkey)  # gone, and no pod left of it: nothing to remember
                return
            error = self.tracker.errors.get(ObjectRef(*gkey))  # names the field it cannot read
            why = str(error) if error else f"{gkey[0]} {view.label} does not exist or cannot be read"
            self._gang_report(view, "GangNotFound", f"{why}; its members wait")
            self.gang_waiting.add(gkey)
            return
        if not view.complete and self._gang_waits_for_gates(view):
            return  # a member still carries another controller's gate: the gang waits whole
        if not view.pending:
            self.gang_waiting.discard(gkey)
            self._unreserve(gkey)
            if view.partial:  # a member went before the gang was let go: the rest let go too
                self._start_roll_back(view)
            self.status.update(view, None)
            return
        if any(c.meta.key in self.holds for m in view.pending for c in m.pending):
            return  # written, not seen back yet: the claims' events wake the gang
        if self.settings.preemption and self.preemptor.busy(gkey):
            # its nomination (or its victims' eviction) is being written: decided again
            # when that ends. Placed now, the nomination would end before its fences are
            # written, and they would stay until the next sweep (found by the chaos run).
            return
        index = self.owner.node_index()
        if self.settings.preemption:
            for m in view.pending:
                self.preemptor.note_nomination(m.pod)  # a new leader learns the gang's nomination here
        in_use = self.preemptor.nominated_from({m.pod.meta.key for m in view.members}, self.owner.current_in_use())
        outcome = place_gang(view.gang, view.members, index, self.owner.device_classes(), in_use,
                             self.settings.budget, shares=self.owner.current_shares(),
                             features=self.features)
        self.owner.decided()
        if outcome.allocated and outcome.placed:
            self.gang_waiting.discard(gkey)
            self._unreserve(gkey)
            self.gang_since.pop(gkey, None)
            self.gang_limit_passed.discard(gkey)
            GANGS.labels(outcome="Allocated").inc()
            placing = {p.label for p in outcome.placed}
            for m in view.pending:  # a nomination of a member left waiting ends here
                if m.label not in placing:
                    self.preemptor.nomination_forgotten(m.pod.meta.key)
            for placed in outcome.placed:
                for claim, allocation in placed.allocations:
                    results = [r for r in allocation.results if not r.admin_access]
                    self.holds.hold(claim.meta.key, claim.meta.uid,
                                    [r.id for r in results if not r.share_id],
                                    [(r.id, tuple(r.consumed_capacity.items()))
                                     for r in results if r.share_id])
            self.committing.add(gkey)
            self.owner.background(self._write_gang(view, outcome))
            return
        self.gang_waiting.add(gkey)
        if outcome.allocated:  # the core is placed; extras fit nowhere yet
            for m in view.pending:  # a nomination of a member left waiting ends here
                self.preemptor.nomination_forgotten(m.pod.meta.key)
            self.status.update(view, outcome)
            return
        GANGS.labels(outcome=UNDECIDED if outcome.status == "undecided" else "Unschedulable").inc()
        if view.partial:
            # an incomplete gang never holds devices: what a killed writer left is released
            self._start_roll_back(view)
        elif self.settings.preemption and outcome.status == "unsatisfiable" and \
                self.gang_preemptor.preempt(view, index, self.owner.device_classes(), in_use,
                                             self.owner.current_shares(), outcome):
            self._unreserve(view.key)  # the nomination keeps its devices, not a reservation
            self._gang_report(view, PREEMPTING, f"{view.gang.kind} {view.label}: "
                              f"{outcome.reason}; lower-priority pods are being preempted for "
                              f"it (see the members' {NOMINATION_ANNOTATION} annotation)")
            self.status.update(view, outcome, PREEMPTING)
            return
        self._reserve(view, outcome)
        reason = "WaitLimitExceeded" if view.key in self.gang_limit_passed else (
            UNDECIDED if outcome.status == "undecided" else "GangUnschedulable")
        self._gang_report(view, reason, f"{view.gang.kind} {view.label}: {outcome.reason}; the "
                          f"members stay gated ({self.settings.gate}) and are decided again when "
                          "devices, claims, nodes or the gang change")
        self.status.update(view, outcome, reason)

    def _reserve(self, view: GangView, outcome: GangOutcome) -> None:
        """Keep the devices of the domain the gang came closest in for it, up to its
        wait limit."""
        assert view.gang is not None
        now = self.monotonic()
        since = self.gang_since.setdefault(view.key, now)
        limit = float(view.gang.wait_seconds or DEFAULT_WAIT_S)
        if now - since >= limit:
            self._unreserve(view.key)
            self.gang_limit_passed.add(view.key)
            return
        devices = outcome.closest
        if not devices:
            self._unreserve(view.key)
            return
        pods = [self.tracker.pod(k) for k in self.gang_members.pods.get(view.key, ())]
        priority = max((p.priority for p in pods if p is not None), default=0)
        ts = view.gang.meta.creation_timestamp
        self.reservations[view.key] = Reservation(
            devices, priority, ts.timestamp() if ts is not None else time.time(), since + limit)

    # -- writing

    async def _write_gang(self, view: GangView, outcome: GangOutcome) -> None:
        members = {m.label: m for m in view.members}
        ok = True
        retry_later = False
        with guarded("allocator", "gang-write", kind=view.key[0], namespace=view.key[1],
                     name=view.key[2]) as g:
            async with self.sem:
                for placed in outcome.placed:
                    member = members[placed.label]
                    pod = member.pod
                    ref = pod_reference(pod.meta.name, pod.meta.uid)
                    generated = {pod.claim_name(pc) for pc in pod.resource_claims
                                 if not pc.resource_claim_name}
                    for claim, allocation in placed.allocations:
                        body = allocation_to_api(allocation)
                        if any(r.binding_conditions for r in allocation.results):
                            body["allocationTimestamp"] = rfc3339(self.clock())  # KEP-5007's clock
                        ckey, devices = claim.meta.key, [r.id for r in allocation.results]
                        result = await write_claim(
                            self.client, ckey, claim.meta.uid, ref, body,
                            owner=pod.meta.uid if claim.name in generated else None,
                            still_free=lambda ckey=ckey, devices=devices: self.owner.still_free(ckey, devices),  # type: ignore[misc]
                            resource_version=claim.meta.resource_version)
                        if not result.ok:
                            log.warning("gang claim write refused; the gang is decided again",
                                        kind="ResourceClaim", namespace=claim.namespace,
                                        name=claim.name, gang=view.label, why=result.message,
                                        outcome=result.outcome)
                            ok = False
                            retry_later = result.outcome == "failed"  # not a stale copy: back off
                            break
                        self.holds.written(claim.meta.key, self.monotonic())
                    if not ok:
                        break
                    for claim in member.allocated:
                        if not claim.reserved_for_pod(member.pod.meta.uid, member.pod.pod_group):
                            await write_claim(self.client, claim.meta.key, claim.meta.uid, ref, None)
        self.committing.discard(view.key)
        if g.failed or not ok:
            for placed in outcome.placed:
                for claim, _ in placed.allocations:
                    if self.holds.written_at(claim.meta.key) is None:
                        self.holds.release(claim.meta.key)
            if g.failed or retry_later:
                self.gang_retry_at[view.key] = self.monotonic() + self.settings.retry_after
            else:
                self.gang_queue.add(view.key)
            self.owner.wake_loop()
            return
        self.gangs_allocated += 1
        for placed in outcome.placed:
            member = members[placed.label]
            gated_pod_done("allocator", self.gate_waits.started(member.pod), self.clock())
            named = ", ".join(f"{r.pool}/{r.device}" for _, a in placed.allocations for r in a.results)
            where = f" in {outcome.domain}" if outcome.domain else ""
            await self.reports.event(
                member.pod.meta.key, member.pod.meta.uid, "Allocated",
                f"gang {view.label}: allocated on node {placed.node}{where} ({named})")
        self.status.update(view, outcome)
        self.owner.wake_loop()

    def _start_roll_back(self, view: GangView) -> None:
        """Release what the gang's placed, still gated members hold; the gang is not
        decided meanwhile (a decision seeing half-released members could roll forward
        onto claims about to go)."""
        self.committing.add(view.key)
        self.owner.background(self._roll_back(view))

    async def _roll_back(self, view: GangView) -> None:
        try:
            for key in view.gated_placed:
                pod = self.tracker.pod(key)
                if pod is None or not pod.has_gate(self.settings.gate) or pod.node_name:
                    continue  # ungated or bound meanwhile: no longer ours to release
                if not await self._still_gated(view.key, key, pod.meta.uid):
                    continue
                gangs = gang_overlay(self.tracker)
                if gangs is not None and gang_view(self.tracker, gangs, self.gang_members, view.key,
                                                   self.settings.gate, self.settings.act_beside).complete:
                    return  # completed meanwhile
                for ckey in pod.claim_keys():
                    claim = self.tracker.claim(ckey)
                    if claim is None or claim.allocation is None:
                        continue
                    status = await release_claim(self.client, ckey, pod.meta.uid)
                    log.info("released the claim of an incomplete gang", kind="ResourceClaim",
                             namespace=ckey.namespace, name=ckey.name, gang=view.label, status=status)
        finally:
            self.committing.discard(view.key)
            self.gang_queue.add(view.key)
            self.owner.wake_loop()

    async def _still_gated(self, gkey: GangKey, key: NamespacedName, uid: str) -> bool:
        """Whether the server's pod is still the one placed, held by draco's gate and
        unbound. The tracker's copy can lag the narrowing controller's ungating by a
        watch event, and a claim released under a pod that was let go (and maybe
        already runs on its devices) frees devices in use: kube-scheduler would give
        them to another pod (found by the JobSet test under kwok). Unreadable: not
        released now, the gang decided again after `retry_after`."""
        resp = await self.client.get(f"/api/v1/namespaces/{key.namespace}/pods/{key.name}")
        if resp.status == 404:
            return False  # gone: its claims are kube-controller-manager's to clean up
        try:
            pod = parse_pod_object(resp.body) if resp.ok and isinstance(resp.body, dict) else None
        except (ModelError, FieldError):
            pod = None
        if pod is None:
            log.warning("cannot read a gang member before releasing its claims; the gang "
                        "is decided again", kind="Pod", namespace=key.namespace, name=key.name,
                        status=resp.status)
            self.retry(gkey)
            return False
        return pod.meta.uid == uid and pod.has_gate(self.settings.gate) and not pod.node_name

    def _forget_gang(self, gkey: GangKey) -> None:
        self.status.forget(gkey)
        for table in (self.gang_reports, self.gang_since, self.gang_retry_at):
            table.pop(gkey, None)
        self.gang_waiting.discard(gkey)
        self.gang_limit_passed.discard(gkey)

    # -- reports

    def _gang_report(self, view: GangView, reason: str, message: str) -> None:
        if self.gang_reports.get(view.key) == message:
            return
        self.gang_reports[view.key] = message
        log.warning("gang waits", gang=view.label, reason=reason, message=message)
        for m in view.pending:
            self.owner.mark_unsatisfied(m.pod.meta.key, m.pod.meta.uid)
            self.owner.spawn(m.pod.meta.key, self.owner.report(
                m.pod.meta.key, m.pod.meta.uid, reason, message))


__all__ = ["DEFAULT_WAIT_S", "UNDECIDED", "GangOwner", "GangPlacer", "Reservation"]
