"""The allocator controller's loop: claims of pods gated by draco, allocated and reserved.

Decisions come from `pod_claims` (tracker), `nodes.place` (pure allocation, node choice
and scoring over draco's device view); this class schedules the writes. Once every
claim of a pod is allocated and reserved for it, the narrowing controller narrows the
pod to the chosen node and removes the gate; nothing here touches the pod's spec.

Per gated pod: its unallocated claims are allocated together on one node, among the
nodes kube-scheduler could put the pod on (`nodes.candidate_nodes`: not cordoned, no
NoSchedule/NoExecute taint the pod does not tolerate, within its nodeSelector and
required node affinity, and accepted by every claim already allocated); claims
allocated already are reserved for the pod. The node cache (labels, taints, cordon)
comes from one listing and a Node watch; a change of any of those wakes the pods
waiting for a node.
Each claim is written as kube-scheduler writes it (`claim_writer`). Decisions run one
at a time in the loop; the writes run beside it (`workers` at once).

Never one device for two claims: the devices of a decision are held (`holds`) from the
moment it is made until the tracker shows the claim allocated, the write fails, or a
written hold is still unconfirmed after `hold_ttl` seconds. A write that finds the
claim changed under it (replaced, allocated elsewhere, a device taken) drops its holds
and the pod is decided again from the tracker.

Gate etiquette (`model.gates`, `gate_waits`): a pod that carries another controller's
gate besides draco's (Kueue's admission or topology gate, anything not named in
`act_beside`) is left alone — nothing allocated, preempted or placed for it, alone or in
its gang — and told so (`WaitingForGate`). The pod update that removes that gate wakes it.

Nodes another controller chose (the pod's nodeSelector and required node affinity, an
allocated claim's node selector) bound the candidates (`nodes.candidate_nodes`); when no
device fits there, the report names that choice (`pod_claims.node_choice`).

When a pod cannot be served: a Warning Event and the pod condition `DracoAllocation`
(False; reason `Unschedulable`, `AllocationError` for what upstream reports as an
error — CEL runtime errors, a missing DeviceClass, `All` over an incomplete pool —, or
`TooComplex` when the search ran out of its `budget` seconds), with the explain
summary. Reported once per reason; a changed message is reported again at most every
`report_interval` seconds. The pod is decided again when the device view changes
(slices, classes, claims' allocations, DeviceTaintRules, ResourceSlicePatches, nodes),
never by polling. Once allocated after such a report the condition turns True.

Pods deleted before ungating: their claims keep the allocation and the reservation
draco wrote. kube-controller-manager's resource-claim controller (1.34, pinned in
tests/e2e/test_allocator_e2e.py) drops reservedFor entries of pods that no longer
exist and, when none is left, clears the allocation and the delete-protection
finalizer, exactly as for claims kube-scheduler allocated; draco does not duplicate
that. The embedded API server runs no such controller: there the claim stays
allocated until someone deallocates it.

Supervised like the other loops: each step about one pod is guarded, a failed write is
retried after `retry_after` seconds.
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import structlog
from prometheus_client import Counter

from operators.allocator.allocate import DEFAULT_BUDGET_S
from operators.allocator.capacity import Shares
from operators.allocator.features import gated_inventory
from operators.allocator.inventory import inventory_from_tracker
from operators.allocator.nodes import (
    NodeIndex,
    Placement,
    PodFit,
    candidate_nodes,
    filter_shape,
    place,
)
from operators.allocator.pod_claims import (
    GATE,
    Blocked,
    Done,
    GateWait,
    NotOurs,
    Release,
    Waiting,
    Work,
    node_choice,
    pod_work,
)
from operators.allocator_controller.claim_writer import (
    WriteResult,
    pod_reference,
    release_claim,
    write_claim,
)
from operators.allocator_controller.gang_loop import PREEMPTING, GangPlacer
from operators.allocator_controller.gang_preempt_loop import GangPreemptor
from operators.allocator_controller.gate_waits import GATE_WAIT, GateWaits
from operators.allocator_controller.holds import DEFAULT_TTL, Holds, InUse
from operators.allocator_controller.preempt_loop import Preemptor
from operators.allocator_controller.release import ServerRelease
from operators.allocator_controller.taken import Taken
from operators.kube.client import KubeClient
from operators.kube.conditions import rfc3339
from operators.kube.metrics import gated_pod_done
from operators.kube.node_cache import NodeCache
from operators.kube.pod_reports import PodReporter, Reported
from operators.kube.shell import KeyedPassLoop
from operators.kube.supervision import guarded
from operators.model import DeviceClass, DeviceID, NamespacedName
from operators.model.binding import BINDING_TIMEOUT_S
from operators.preemption.nomination import NOMINATION_ANNOTATION
from operators.tracker import Change, Tracker
from operators.tracker.gangs import GANG_KINDS, GangKey

log = structlog.get_logger("draco.allocator")

CONDITION = "DracoAllocation"
REASONS = {"unsatisfiable": "Unschedulable", "error": "AllocationError", "too-complex": "TooComplex"}
UNSCHEDULABLE = "Unschedulable"
GANG_MISFITS = ("GangUnschedulable", "WaitLimitExceeded")  # gang_loop's reasons for no fit
IDLE = 60.0

OUTCOMES = Counter("draco_allocator_pods_total",
                   "Gated pods the allocator decided, by outcome.", ["outcome"])


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class AllocatorSettings:
    workers: int = 32  # concurrent pod writes (each 3 sequential requests)
    budget: float = DEFAULT_BUDGET_S  # seconds one pod's allocation may search
    retry_after: float = 5.0
    report_interval: float = 60.0
    hold_ttl: float = DEFAULT_TTL
    gate: str = GATE
    binding_timeout: float = BINDING_TIMEOUT_S  # KEP-5007: kube-scheduler's default bindingTimeout
    preemption: bool = False  # evict lower-priority pods for a gated pod that does not fit
    nomination_timeout: float = 300.0  # seconds a nomination keeps its devices
    use_eviction_api: bool = False  # victims through policy/v1 Eviction (budgets enforced)
    budgets_refresh: float = 30.0  # seconds between reads of PodDisruptionBudgets
    act_beside: frozenset[str] = frozenset()  # other gates draco may act beside ("*": all)


class AllocatorController(KeyedPassLoop):
    name = "allocator"

    def __init__(self, tracker: Tracker, client: KubeClient, settings: AllocatorSettings | None = None,
                 *, clock: Callable[[], datetime] = _utcnow,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.tracker = tracker
        self.client = client
        self.settings = settings or AllocatorSettings()
        self.clock = clock
        self.monotonic = monotonic
        self.reports = PodReporter(client, self.name, "draco-allocator", CONDITION, clock)
        self.sem = asyncio.Semaphore(self.settings.workers)
        self.holds = Holds(self.settings.hold_ttl)
        self.k8s_release = ServerRelease(self.name)  # the cluster's release, read at the first pass
        self.pending: set[NamespacedName] = set()
        self.in_flight: set[NamespacedName] = set()
        self.again: set[NamespacedName] = set()
        self.unsatisfied: dict[NamespacedName, str] = {}  # waiting for the device view to change
        self.retry_at: dict[NamespacedName, float] = {}
        self.binding_at: dict[NamespacedName, float] = {}  # monotonic: a binding times out
        self.stale: set[NamespacedName] = set()  # the last write found its claim changed
        self.reported: dict[NamespacedName, Reported] = {}
        self.gate_waits = GateWaits(self.reports, self.reported, self.settings.gate,
                                    self.settings.act_beside, clock, monotonic)
        self.node_cache = NodeCache()  # labels, taints, cordon
        self._index: NodeIndex | None = None
        self._nodes_changed: set[str] = set()  # nodes changed since the index was built
        self._next_start = 0  # where the next node search begins (see nodes.place)
        self._classes: dict[str, DeviceClass] = {}
        self.taken = Taken(tracker, self.holds)
        self._allowed_text = ""  # the nodes the last placement could use, for its report
        self.allocated_total = 0
        self.decisions = 0  # allocations searched (tests assert work per event with it)
        self.passes = 0
        self._rescan = True
        self.preemptor = Preemptor(tracker, client, self.settings, self.reports, self, clock)
        self.gang_preemptor = GangPreemptor(self.preemptor)
        self.gangs = GangPlacer(tracker, client, self.holds, self.settings, self.reports, self.sem, self,
                                self.gate_waits, self.preemptor, self.gang_preemptor, clock, monotonic)
        self._budgets_at = -1e9
        self._swept_at = -1e9
        self._init_loop()

    def resync(self) -> None:
        self._rescan = True
        self._index = None
        self._nodes_changed = set()
        self.taken.reset()

    # -- what wakes the loop

    def _on_change(self, change: Change) -> None:
        woken = set(change.pods)
        for key in change.claims:
            self.holds.settle(key, self.tracker.claim(key))
            woken.update(self.tracker.pods_of_claim(key))
        self.pending |= woken
        self.gangs.on_change(change, woken)
        self.preemptor.on_change(bool(change.claims or change.pods or change.allocations))
        device_objects = any(r.kind not in GANG_KINDS for r in change.objects)
        if change.devices or change.pools or change.slices or change.device_classes or device_objects:
            self._index = None
            self._view_changed()
        if change.allocations and self.taken.allocations_changed(change.allocations):
            self._view_changed()  # taking a device helps no waiting pod; freeing one may
        self.wake.set()

    def _view_changed(self) -> None:
        self.pending.update(self.unsatisfied)
        self.gangs.view_changed()

    def node_event(self, etype: str, body: Mapping[str, Any]) -> None:
        """A Node watch event: where devices can be used, or which pods a node takes,
        changed (labels, taints, cordon; heartbeats and status updates change nothing)."""
        changed = self.node_cache.event(etype, body)
        if changed is not None:
            self._nodes_changed.add(changed)
            self._view_changed()
            self.wake.set()

    # -- main loop

    async def step(self) -> float:
        self.passes += 1
        if not self.k8s_release.known:
            await self.k8s_release.learn(self.client)
            self._index = None  # built before the release was known
            # gangs and preemption allocate as the same release
            self.preemptor.features = self.gangs.features = self.k8s_release.gates
        if not self.node_cache.listed:
            failed = await self.node_cache.load(self.client)
            if failed is not None:
                log.warning("cannot list nodes; allocating on the nodes the watch reports",
                            status=failed)
            else:
                self._index = None
        now = self.monotonic()
        expired = self.holds.expire(now)
        if expired:
            self._view_changed()
            for ckey in expired:
                self.pending.update(self.tracker.pods_of_claim(ckey))
        keys: set[NamespacedName] = set()
        if self._rescan:
            self._rescan = False
            keys = {p.key for p in self.tracker.pods() if p.has_gate(self.settings.gate)}
            self.gangs.rescan()
        self.gangs.step()  # gangs first: a pass never gives their devices to single pods
        if self.settings.preemption and self.unsatisfied and \
                now - self._budgets_at >= self.settings.budgets_refresh:
            self._budgets_at = now
            await self.preemptor.load_budgets()  # victim selection orders by disruption budgets
        if self.settings.preemption and now - self._swept_at >= self.settings.nomination_timeout:
            self._swept_at = now
            await self.preemptor.sweep_fences()  # fences a dead draco left behind
        keys |= self.pending
        self.pending = set()
        keys |= {k for k, when in self.retry_at.items() if when <= now}
        keys |= {k for k, when in self.binding_at.items() if when <= now}
        for key in sorted(keys, key=self._queue_order):
            self._consider(key, now)
        soonest = list(self.retry_at.values()) + list(self.binding_at.values())
        for expiry in (self.holds.next_expiry(), self.gangs.next_reservation_expiry()):
            if expiry is not None:
                soonest.append(expiry)
        if not soonest:
            return IDLE
        return min(IDLE, max(min(soonest) - now, 0.05))

    def _queue_order(self, key: NamespacedName) -> tuple[float, NamespacedName]:
        """Older pods first, as kube-scheduler's queue orders pods of equal priority
        (then by name, so that a pass is deterministic)."""
        pod = self.tracker.pod(key)
        created = pod.meta.creation_timestamp if pod is not None else None
        return (created.timestamp() if created is not None else float("inf"), key)

    def _consider(self, key: NamespacedName, now: float) -> None:
        with guarded(self.name, "decide", kind="Pod", namespace=key.namespace, name=key.name):
            work = pod_work(self.tracker, key, self.settings.gate, self.clock(),
                            self.settings.binding_timeout, self.settings.act_beside)
            if isinstance(work, NotOurs):
                self._forget(key)
                self.preemptor.nomination_forgotten(key)
                return
            if self._deferred(key, now):
                return
            self.binding_at.pop(key, None)
            if isinstance(work, GateWait):
                self.unsatisfied.pop(key, None)
                if self.gangs.gang_of(key) is None:  # a gang's members are told by the gang
                    self._spawn(key, self.gate_waits.tell(key, work.uid, work.why))
                return
            self.gate_waits.actionable(key)
            if isinstance(work, Waiting):
                return  # woken by the claim or pod update that ends the wait
            if isinstance(work, Release):
                self._spawn(key, self._release(key, work))
                return
            if isinstance(work, Done):
                self.preemptor.nomination_done(key, work.uid)
                if work.deadline is not None:  # looked at again when the binding times out
                    self.binding_at[key] = now + max((work.deadline - self.clock()).total_seconds(), 0)
                self.unsatisfied.pop(key, None)
                if self.reported.pop(key, None) is not None:
                    self._background(self.reports.condition(key, work.uid, "True", "Allocated",
                                                            "claims allocated and reserved"))
                return
            if isinstance(work, Blocked):
                self.unsatisfied[key] = work.uid
                OUTCOMES.labels(outcome=UNSCHEDULABLE).inc()
                self._spawn(key, self.report(key, work.uid, UNSCHEDULABLE, work.message))
                return
            if self.gangs.gang_of(key) is not None and work.pending:
                return  # decided with its gang (queued when the pod or its gang changed)
            if self.settings.preemption:
                self.preemptor.note_nomination(work.pod)
            self._decide(key, work)

    def _decide(self, key: NamespacedName, work: Work) -> None:
        placement: Placement | None = None
        if any(c.meta.key in self.holds for c in work.pending):
            return  # written, not seen back yet: the watch event (or the hold's expiry) wakes it
        if work.pending:
            self.decisions += 1
            placement = self._place(work)
            if not placement.allocated:
                outcome = placement.outcome
                if self.settings.preemption and outcome.status == "unsatisfiable" and \
                        self.preemptor.preempt(key, work.pod, self.node_index(), self._classes,
                                               self.preemptor.nominated_from(
                                                   (key,), self.gangs.reserved_from(key, self.current_in_use()))):
                    self.unsatisfied[key] = work.uid  # decided again as the victims go
                    self._spawn(key, self.report(
                        key, work.uid, PREEMPTING, f"{outcome.reason or outcome.status}; "
                        "lower-priority pods are being preempted for it (see the "
                        f"{NOMINATION_ANNOTATION} annotation)"))
                    return
                reason = REASONS.get(outcome.status, UNSCHEDULABLE)
                OUTCOMES.labels(outcome=reason).inc()
                self.unsatisfied[key] = work.uid
                choice = node_choice(work.pod) if outcome.status == "unsatisfiable" else None
                within = f" (within the nodes the pod's {choice} allows{self._allowed_text})" \
                    if choice else ""
                message = (f"{outcome.reason or outcome.status}{within}; the scheduling gate "
                           f"{self.settings.gate} stays, and draco tries again when devices, "
                           "claims, device classes, nodes, taint rules or patches change")
                self._spawn(key, self.report(key, work.uid, reason, message))
                return
            for i, claim in enumerate(work.pending):
                results = [r for r in placement.outcome.allocations[i].results if not r.admin_access]
                self.holds.hold(claim.meta.key, claim.meta.uid,
                                [r.id for r in results if not r.share_id],
                                [(r.id, tuple(r.consumed_capacity.items())) for r in results if r.share_id])
        self.unsatisfied.pop(key, None)
        self._spawn(key, self._write(key, work, placement))

    def _place(self, work: Work) -> Placement:
        index = self.node_index()
        shape = None if work.allocated else filter_shape(work.pod)
        found = index.filtered.get(shape) if shape is not None else None
        if found is None:
            found = candidate_nodes(index.nodes, [PodFit(work.pod, work.allocated)])
            if shape is not None:
                if len(index.filtered) >= 1024:  # bounded: pod shapes are few, but who knows
                    index.filtered.clear()
                index.filtered[shape] = found
        allowed, refused = found
        shown = ", ".join(n.name for n in allowed[:3]) + (", ..." if len(allowed) > 3 else "")
        self._allowed_text = f": {shown}" if allowed else ": none"
        view = copy.copy(index)  # shares the per-node caches; only the candidate list differs
        view.nodes = allowed
        in_use = self.preemptor.nominated_from(
            (work.pod.meta.key,), self.gangs.reserved_from(work.pod.meta.key, self.current_in_use()))
        placement = place(list(work.pending), view, self._classes, in_use,
                          self.settings.budget, refused=refused, start=self._next_start,
                          shares=self.current_shares(), features=self.k8s_release.gates)
        if allowed:
            self._next_start = (self._next_start + placement.examined) % len(allowed)
        return placement

    def node_index(self) -> NodeIndex:
        if self._index is None:
            self._index = NodeIndex(gated_inventory(inventory_from_tracker(self.tracker),
                                                    self.k8s_release.gates), self.node_cache.in_order())
            self._classes = {c.name: c for c in self.tracker.device_classes()}
        elif self._nodes_changed:  # the devices are the same: only the node list is new
            self._index = self._index.with_nodes(list(self.node_cache.nodes.values()), self._nodes_changed)
        self._nodes_changed = set()
        return self._index

    def current_in_use(self) -> InUse:
        return self.taken.in_use()

    def current_shares(self) -> Shares:
        return self.taken.shares()

    def still_free(self, claim: NamespacedName, devices: Iterable[DeviceID]) -> bool:
        return self.taken.still_free(claim, devices)

    async def _release(self, key: NamespacedName, work: Release) -> None:
        """KEP-5007: the pod's claims whose devices failed to bind are released
        (`claim_writer.release_claim`), so that the pod is allocated afresh; the pod's
        Warning says which device and why."""
        with guarded(self.name, "release", kind="Pod", namespace=key.namespace, name=key.name) as g:
            for claim, why in work.claims:
                log.warning("binding failed; releasing the claim", kind="ResourceClaim",
                            namespace=claim.namespace, name=claim.name, pod=key.name, reason=why)
                status = await release_claim(self.client, claim.meta.key, work.uid)
                if status not in (200, 404):
                    raise RuntimeError(f"releasing claim {claim.name} answered {status}")
            OUTCOMES.labels(outcome="BindingFailed").inc()
            message = "; ".join(f"claim {c.name}: {why}" for c, why in work.claims)
            await self.reports.event(key, work.uid, "BindingFailed",
                                     f"{message}; released, to be allocated again", "Warning")
        if g.failed:
            self.retry(key)

    def _forget(self, key: NamespacedName) -> None:
        self.stale.discard(key)
        self.unsatisfied.pop(key, None)
        self.retry_at.pop(key, None)
        self.binding_at.pop(key, None)
        self.reported.pop(key, None)
        self.gate_waits.forget(key)

    # -- the writes

    async def _write(self, key: NamespacedName, work: Work, placement: Placement | None) -> None:
        ns, name = key.namespace, key.name
        ref = pod_reference(name, work.uid)
        pending = list(work.pending)
        with guarded(self.name, "write", kind="Pod", namespace=ns, name=name) as g:
            async with self.sem:
                for i, claim in enumerate(pending):
                    assert placement is not None
                    ckey = claim.meta.key
                    devices = [r.id for r in placement.outcome.allocations[i].results]
                    allocation = placement.outcome.allocation_api(i)
                    if any(r.binding_conditions for r in placement.outcome.allocations[i].results):
                        # KEP-5007: the binding timeout counts from here, as kube-scheduler's
                        allocation["allocationTimestamp"] = rfc3339(self.clock())
                    result = await write_claim(
                        self.client, ckey, claim.meta.uid, ref, allocation,
                        owner=work.uid if claim.name in work.generated else None,
                        still_free=lambda ckey=ckey, devices=devices: self.still_free(ckey, devices),  # type: ignore[misc]
                        resource_version=claim.meta.resource_version)
                    if not result.ok:
                        self._abandon(key, [c.meta.key for c in pending[i:]], result, claim.name)
                        return
                    self.holds.written(ckey, self.monotonic())
                for claim in work.reserve:
                    result = await write_claim(self.client, claim.meta.key, claim.meta.uid, ref, None)
                    if not result.ok:
                        self._abandon(key, [], result, claim.name)
                        return
        if g.failed:
            for claim in pending:
                if self.holds.written_at(claim.meta.key) is None:
                    self.holds.release(claim.meta.key)
            self.retry(key)
            return
        self.stale.discard(key)
        self.allocated_total += 1
        OUTCOMES.labels(outcome="Allocated").inc()
        self._allocated(key, work, placement)

    def _abandon(self, key: NamespacedName, claims: list[NamespacedName], result: WriteResult,
                 claim: str) -> None:
        for ckey in claims:
            self.holds.release(ckey)
        log_fields = {"kind": "Pod", "namespace": key.namespace, "name": key.name, "claim": claim,
                      "outcome": result.outcome, "why": result.message}
        if result.outcome == "failed":
            log.warning("cannot write the claim; retrying later", status=result.status,
                        retry_after=self.settings.retry_after, **log_fields)
            self.retry(key)
        elif key in self.stale:
            # Stale twice in a row: the tracker has not caught up, or the claim cannot be
            # ours (not created for the pod). Not a hot loop: retried after retry_after.
            log.warning("claim changed under the write again; retrying later", **log_fields)
            self.stale.discard(key)
            self.retry(key)
            found = self.tracker.pod(key)
            uid = found.meta.uid if found is not None else ""
            if uid and "not created for this pod" in result.message:
                self._background(self.report(key, uid, UNSCHEDULABLE,
                                              f"claim {claim}: {result.message}"))
        else:
            log.info("claim changed under the write; deciding again", **log_fields)
            self.stale.add(key)
            self.pending.add(key)
            self.wake.set()

    # -- what the preemptors ask of their owner (preempt_loop.PreemptionOwner; retry is
    # the controller's own)

    def spawn(self, key: NamespacedName, coro: Coroutine[Any, Any, None]) -> None:
        self._spawn(key, coro)

    def background(self, coro: Coroutine[Any, Any, None]) -> None:
        self._background(coro)

    def decide_again(self, key: NamespacedName | None) -> None:
        if key is not None:
            self.pending.add(key)
        self.wake.set()

    def decide_gang_again(self, gkey: GangKey) -> None:
        self.gangs.again(gkey)

    def retry_gang(self, gkey: GangKey) -> None:
        self.gangs.retry(gkey)

    # -- what the gang placer asks of its owner (gang_loop.GangOwner; node_index,
    # current_in_use, current_shares, still_free and report are the controller's own)

    def device_classes(self) -> dict[str, DeviceClass]:
        return self._classes

    def wake_loop(self) -> None:
        self.wake.set()

    def decided(self) -> None:
        self.decisions += 1

    def mark_unsatisfied(self, key: NamespacedName, uid: str) -> None:
        self.unsatisfied[key] = uid

    def clear_unsatisfied(self, key: NamespacedName) -> None:
        self.unsatisfied.pop(key, None)

    def retry_unsatisfied(self) -> None:
        self.pending.update(self.unsatisfied)
        self.wake.set()

    def retry(self, key: NamespacedName) -> None:
        self.retry_at[key] = self.monotonic() + self.settings.retry_after
        self.wake.set()

    def _allocated(self, key: NamespacedName, work: Work, placement: Placement | None) -> None:
        self.preemptor.nomination_done(key, work.uid)  # a preemptor's nomination ends here
        gated_pod_done(self.name, self.gate_waits.started(work.pod), self.clock())
        ns, name = key.namespace, key.name
        node = placement.node if placement is not None else None
        claims = [c.name for c in work.pending]
        reserved = [c.name for c in work.reserve]
        log.info("claims allocated and reserved", kind="Pod", namespace=ns, name=name,
                 allocated=claims, reserved=reserved, node=node)
        parts = []
        if claims and placement is not None:
            devices = ", ".join(f"{r.pool}/{r.device}" for a in placement.outcome.allocations
                                for r in a.results)
            where = f"node {node}" if node else "devices reachable from every node"
            parts.append(f"allocated {', '.join(claims)} on {where} ({devices})")
        if reserved:
            parts.append(f"reserved {', '.join(reserved)}")
        self._background(self.reports.event(key, work.uid, "Allocated", "; ".join(parts) + " for the pod"))
        if self.reported.pop(key, None) is not None:
            self._background(self.reports.condition(key, work.uid, "True", "Allocated",
                                                    "claims allocated and reserved"))

    # -- reports

    async def report(self, key: NamespacedName, uid: str, reason: str, message: str) -> None:
        """Warning Event and condition False: once per reason; a new message for the same
        reason at most every `report_interval` seconds. A gang member's report also names
        its own node choice (its nodeSelector or required affinity), which the gang's
        reason counts but cannot spell out for every member."""
        if reason in GANG_MISFITS:
            pod = self.tracker.pod(key)
            choice = node_choice(pod) if pod is not None else None
            if choice:
                message = f"{message}; this member's node choice: {choice}"
        old = self.reported.get(key)
        now = self.monotonic()
        if old is not None and old.uid == uid and old.reason == reason and (
                old.message == message or now - old.at < self.settings.report_interval):
            return
        since = old.since if old is not None and old.uid == uid else rfc3339(self.clock())
        self.reported[key] = Reported(uid, reason, message, since, now)
        log.warning("cannot allocate the pod's claims", kind="Pod", namespace=key.namespace,
                    name=key.name, reason=reason, message=message)
        await self.reports.held(key, uid, reason, message, since)


__all__ = ["CONDITION", "GATE_WAIT", "AllocatorController", "AllocatorSettings"]
