"""The devices check's loop: AdmissionChecks made Active, Workloads answered, devices
kept for them until their pods come.

Which Workloads: those whose `status.admissionChecks` names an AdmissionCheck whose
`spec.controllerName` is `resource.draco.dev/devices`, with quota reserved
(`QuotaReserved` True and an admission) and that check `Pending`. Each is decided as
one gang (`admission.decide`) over the tracker's device view, with what other claims
hold and what other Workloads' reservations keep counted as in use; decisions run one
at a time in the loop, so two Workloads never get the same devices.

Ready: the reservation (`admission.reservation`) is kept here at once, then written
onto the Workload as an annotation (with the resourceVersion the decision read), then
the check is set `Ready` with its podSetUpdates. A draco that restarts, or a new
leader, reads the annotations in its first listing and keeps the same devices; a
Pending check on a Workload with a valid reservation is answered from it, never
searched again, so a Workload is never Ready with two placements. A write refused
(409) drops what it meant to keep and the Workload is decided again from its newer
version.

Released: when the Workload finishes, is evicted, loses its quota reservation or is
deleted (the annotation is removed where the Workload still exists), and when no pod
of it came within `pod_timeout` seconds of the reservation: then the check turns
`Retry` and Kueue evicts and requeues it.

Retry and Rejected are written as the check's state with the message (and for Retry
`requeueAfterSeconds`); Kueue releases the quota and requeues, or deactivates.

Kueue not installed: the loop says so once, stays idle and looks again every
`probe_interval` seconds; draco's other controllers go on.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import structlog

from operators.admission.checks import active_conditions, check_unchanged, with_check_state
from operators.admission.decide import (
    DEFAULT_REQUEUE_S,
    WORKLOAD_ANNOTATION,
    Decision,
    decide,
    empty_view,
)
from operators.admission.reservation import (
    RESERVATION_ANNOTATION,
    Reservation,
    Reservations,
    admission_fingerprint,
    honoured_reservation,
    reservation_of,
)
from operators.admission.workload import (
    CONTROLLER_NAME,
    KUEUE_GROUP,
    KUEUE_VERSION,
    Workload,
    WorkloadError,
    flavor_labels,
    parse_workload,
)
from operators.admission_controller.arrivals import Arrival, Arrivals
from operators.allocator.allocate import DEFAULT_BUDGET_S, in_use_from_tracker, shares_from_tracker
from operators.allocator.features import gated_inventory
from operators.allocator.inventory import inventory_from_tracker
from operators.allocator.nodes import NodeIndex
from operators.allocator.reserved import Reserved
from operators.allocator_controller.holds import Holds, InUse
from operators.allocator_controller.release import ServerRelease
from operators.kube.client import KubeClient
from operators.kube.conditions import rfc3339
from operators.kube.node_cache import NodeCache
from operators.kube.shell import KeyedPassLoop
from operators.kube.supervision import guarded
from operators.model import NamespacedName
from operators.model.gangs import Gang
from operators.tracker import Change, Tracker
from operators.tracker.gangs import gang_overlay

log = structlog.get_logger("draco.admission")

KUEUE = f"/apis/{KUEUE_GROUP}/{KUEUE_VERSION}"
IDLE = 60.0


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class AdmissionSettings:
    workers: int = 8
    budget: float = DEFAULT_BUDGET_S  # seconds one Workload's search may take
    retry_after: float = 5.0  # a failed write is tried again after this
    requeue_after: int = DEFAULT_REQUEUE_S  # Retry's requeueAfterSeconds
    pod_timeout: float = 600.0  # a reservation no pod came for is released after this
    probe_interval: float = 300.0  # how often an absent Kueue is looked for again
    controller_name: str = CONTROLLER_NAME


def workload_path(key: NamespacedName) -> str:
    return f"{KUEUE}/namespaces/{key.namespace}/workloads/{key.name}"


def _key(body: Mapping[str, Any]) -> NamespacedName:
    md = body.get("metadata") if isinstance(body.get("metadata"), Mapping) else {}
    assert isinstance(md, Mapping)
    return NamespacedName(str(md.get("namespace") or ""), str(md.get("name") or ""))


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _copy(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_copy(v) for v in value]
    return value


def _plain(body: Mapping[str, Any]) -> dict[str, Any]:
    """A deep, plain copy (kopf hands out read-only mappings)."""
    out = _copy(body)
    assert isinstance(out, dict)
    return out


def _seconds_since(text: str, now: datetime) -> float:
    try:
        then = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return 0.0
    return max((now - then).total_seconds(), 0.0)


class AdmissionController(KeyedPassLoop):
    name = "admission"

    def __init__(self, tracker: Tracker, client: KubeClient, settings: AdmissionSettings | None = None,
                 *, clock: Callable[[], datetime] = _utcnow,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.tracker = tracker
        self.client = client
        self.settings = settings or AdmissionSettings()
        self.clock = clock
        self.monotonic = monotonic
        self.sem = asyncio.Semaphore(self.settings.workers)  # the shell's loop makes it anew
        self.workloads: dict[NamespacedName, dict[str, Any]] = {}
        self.checks: dict[str, dict[str, Any]] = {}  # AdmissionCheck name -> object
        self.templates: dict[NamespacedName, dict[str, Any]] = {}  # ResourceClaimTemplates
        self.flavors: dict[str, dict[str, Any]] = {}  # ResourceFlavors
        self.node_cache = NodeCache()
        self.listed = False  # Kueue's objects listed once (see _list_all)
        self.reservations = Reservations()
        self.arrivals = Arrivals(tracker, self.reservations, clock, monotonic)
        self.expires: dict[NamespacedName, float] = {}  # monotonic: no pod came by then
        self.pending: set[NamespacedName] = set()
        self.in_flight: set[NamespacedName] = set()
        self.again: set[NamespacedName] = set()
        self.retry_at: dict[NamespacedName, float] = {}
        self.active_due: set[str] = set()
        self.served: bool | None = None  # Kueue's API: None until probed
        self._probed_at = -1e18
        self._index: NodeIndex | None = None
        self._empty: NodeIndex | None = None  # the index without taints (see empty_view)
        self.k8s_release = ServerRelease("admission")  # read once Kueue is served
        self.decisions = 0
        self.answers: dict[str, int] = {}  # state -> how many written (tests and logs)
        self._init_loop()

    @property
    def reservations_known(self) -> bool:
        """Every reservation the cluster's Workloads record is kept here: the first
        listing is done, or Kueue is not served (then none can exist). The allocator
        starts only then (`cli.run.reservations_known`)."""
        return self.listed or self.served is False

    # -- what the loop hears

    @property
    def ours(self) -> frozenset[str]:
        return frozenset(n for n, c in self.checks.items()
                         if (c.get("spec") or {}).get("controllerName") == self.settings.controller_name)

    def resync(self) -> None:
        self.pending |= set(self.workloads)
        self.active_due |= self.ours
        self._index = None

    def _on_change(self, change: Change) -> None:
        if change.devices or change.pools or change.slices or change.device_classes:
            self._index = None  # the next decision reads the new view; nothing waits on it
        if self.arrivals.on_change(change):
            self.wake.set()  # a pod came: its claims are held, to be written

    def attach(self, holds: Holds) -> None:
        """Keep the reservations in the allocator controller's holds (see `arrivals`)."""
        self.arrivals.attach(holds)

    def _keep(self, key: NamespacedName, r: Reservation) -> None:
        self.reservations.hold(key, r)
        self.arrivals.mirror(key)

    def workload_event(self, etype: str, body: Mapping[str, Any]) -> None:
        key = _key(body)
        if etype == "DELETED":
            self.workloads.pop(key, None)
        else:
            self.workloads[key] = _plain(body)
            self._adopt(key, self.workloads[key])
        self.pending.add(key)
        self.wake.set()

    def _adopt(self, key: NamespacedName, body: Mapping[str, Any]) -> None:
        """Keep a valid reservation the moment it is seen (a restart, a new leader): no
        decision of the same pass may hand its devices to another Workload."""
        if key in self.reservations or RESERVATION_ANNOTATION not in str(body.get("metadata")):
            return
        held = honoured_reservation(body)
        if held is not None:
            self._keep(key, held[1])

    def check_event(self, etype: str, body: Mapping[str, Any]) -> None:
        name = _key(body).name
        before = self.ours
        if etype == "DELETED":
            self.checks.pop(name, None)
        else:
            self.checks[name] = _plain(body)
            if name in self.ours:
                self.active_due.add(name)
        if self.ours != before:
            self.pending |= set(self.workloads)
        self.wake.set()

    def template_event(self, etype: str, body: Mapping[str, Any]) -> None:
        key = _key(body)
        if etype == "DELETED":
            self.templates.pop(key, None)
        else:
            self.templates[key] = _plain(body)
        self.pending |= {k for k in self.workloads if k.namespace == key.namespace}
        self.wake.set()

    def flavor_event(self, etype: str, body: Mapping[str, Any]) -> None:
        name = _key(body).name
        if etype == "DELETED":
            self.flavors.pop(name, None)
        else:
            self.flavors[name] = _plain(body)

    def node_event(self, etype: str, body: Mapping[str, Any]) -> None:
        if self.node_cache.event(etype, body) is not None:
            self._index = None

    # -- the pass

    async def _probe(self) -> bool:
        now = self.monotonic()
        if self.served or now - self._probed_at < self.settings.probe_interval:
            return bool(self.served)
        self._probed_at = now
        resp = await self.client.get(KUEUE)
        if not resp.ok and resp.status != 404:
            # not an answer (an outage, a refusal): asked again after retry_after; until
            # then no reservation is known, and the allocator waits (reservations_known)
            self._probed_at = -1e18
            raise RuntimeError(f"cannot tell whether Kueue's API is served: {KUEUE} answered "
                               f"{resp.status}")
        served = resp.ok
        if served and self.served is False:
            log.info("Kueue's API is served now; the admission check starts", api=KUEUE)
        elif not served and self.served is None:
            log.warning("Kueue's API is not served: the admission check stays idle until it is",
                        api=KUEUE, status=resp.status, check=self.settings.controller_name)
        self.served = served
        return served

    async def _list_all(self) -> None:
        """Everything the decisions read, listed once before the first one: a Workload is
        never decided before every reservation of the cluster is known (the watches may
        deliver them later)."""
        stores: list[tuple[str, Callable[[str, Mapping[str, Any]], None]]] = [
            (f"{KUEUE}/admissionchecks", self.check_event),
            (f"{KUEUE}/resourceflavors", self.flavor_event),
            ("/apis/resource.k8s.io/v1/resourceclaimtemplates", self.template_event),
            (f"{KUEUE}/workloads", self.workload_event)]
        for path, store in stores:
            resp = await self.client.get(path)
            if not resp.ok or not isinstance(resp.body, Mapping):
                raise RuntimeError(f"cannot list {path}: {resp.status}")
            for item in resp.body.get("items") or []:
                if isinstance(item, Mapping) and not self._known(path, item):
                    store("ADDED", item)
        self.listed = True

    def _known(self, path: str, item: Mapping[str, Any]) -> bool:
        key = _key(item)
        if path.endswith("/workloads"):
            return key in self.workloads
        if path.endswith("/admissionchecks"):
            return key.name in self.checks
        if path.endswith("/resourceflavors"):
            return key.name in self.flavors
        return key in self.templates

    async def step(self) -> float:
        if not await self._probe():
            return self.settings.probe_interval
        if not self.k8s_release.known:
            await self.k8s_release.learn(self.client)
            self._index = None  # built before the release was known
        if not self.node_cache.listed and await self.node_cache.load(self.client) is None:
            self._index = None
        if not self.listed:
            await self._list_all()
        for name in sorted(self.active_due & self.ours):
            self._background(self._activate(name))
        self.active_due.clear()
        now = self.monotonic()
        keys = self.pending
        self.pending = set()
        keys |= {k for k, when in self.retry_at.items() if when <= now}
        keys |= {k for k, when in self.expires.items() if when <= now}
        for key in sorted(keys):
            with guarded(self.name, "decide", kind="Workload", namespace=key.namespace, name=key.name):
                self._consider(key, now)
            if self.expires.get(key, now + 1) <= now:  # not Ready yet (or no check): later
                self.expires[key] = now + self.settings.pod_timeout
        for pkey, came in self.arrivals.take():
            self._background(self._arrive(pkey, came))
        soonest = [*self.retry_at.values(), *self.expires.values()]
        if not soonest:
            return IDLE
        return min(IDLE, max(min(soonest) - now, 0.05))

    def _consider(self, key: NamespacedName, now: float) -> None:
        raw = self.workloads.get(key)
        if raw is None:
            self._release(key, "deleted")
            return
        if self._deferred(key, now):
            return
        try:
            wl = parse_workload(raw)
        except WorkloadError as e:
            self._release(key, "unreadable")
            log.warning("cannot read the Workload", kind="Workload", namespace=key.namespace,
                        name=key.name, error=str(e))
            return
        found = reservation_of(wl)
        over = wl.over
        if over is not None:
            self._release(key, over)
            if found is not None and not wl.deleting:
                self._spawn(key, self._unannotate(key, wl))
            return
        valid = found is not None and found.valid_for(wl)
        if found is not None and valid:
            if self.reservations.get(key) != found:
                self._keep(key, found)  # adopted: a restart, a new leader
            self._expiry(key, found)
        mine = [c for c in wl.checks if c.name in self.ours]
        if not mine:
            return  # kept as they are: the check may not be listed yet
        check = mine[0]
        if found is not None and valid:
            if check.state == "Pending":
                self._spawn(key, self._answer(key, wl, check.name, "Ready", found.message,
                                              found.pod_set_updates, None, False))
            elif check.state == "Ready" and self.expires.get(key, now + 1) <= now:
                if self._pods_came(wl):
                    self.expires.pop(key, None)  # kept until the Workload is over
                    return
                self._release(key, "no pod came")
                self._spawn(key, self._answer(
                    key, wl, check.name, "Retry",
                    f"no pod of the Workload came within {self.settings.pod_timeout:g}s of the "
                    "reservation; its devices are released", (), self.settings.requeue_after, True))
            return
        if check.state != "Pending":
            return  # Kueue's turn (Retry, Rejected), or Ready without a reservation of ours
        self._release(key, "stale")
        decision = self._decide(wl)
        self.decisions += 1
        if decision.status == "ready":
            reservation = Reservation(wl.uid, admission_fingerprint(wl), rfc3339(self.clock()),
                                      decision.devices, decision.allocations_json(), decision.nodes_json(),
                                      decision.pod_set_updates, decision.message)
            self._keep(key, reservation)  # before any write: the next decision sees it
            self._expiry(key, reservation)
            self._spawn(key, self._reserve(key, wl, check.name, reservation))
            return
        state = "Retry" if decision.status == "retry" else "Rejected"
        self._spawn(key, self._answer(key, wl, check.name, state, decision.message, (),
                                      decision.requeue_after, found is not None))

    def _decide(self, wl: Workload) -> Decision:
        key = NamespacedName(wl.namespace, wl.name)
        # what claims hold, what this draco's allocator decided and has not seen back yet,
        # and what the other Workloads' reservations keep
        held = InUse(in_use_from_tracker(self.tracker), self.arrivals.holds)
        in_use = Reserved(held, self.reservations.devices(but=key))
        templates = {k.name: t for k, t in self.templates.items() if k.namespace == wl.namespace}
        gangs = gang_overlay(self.tracker)

        def gang(ns: str, name: str) -> Gang | None:
            return gangs.gang("Gang", ns, name) if gangs is not None else None

        index = self.node_index()
        if self._empty is None:
            self._empty = empty_view(index)
        return decide(wl, index, {c.name: c for c in self.tracker.device_classes()}, in_use,
                      templates=templates, claims=self.tracker.claim, gangs=gang,
                      flavor_nodes=flavor_labels(list(self.flavors.values())),
                      shares=shares_from_tracker(self.tracker), budget_s=self.settings.budget,
                      requeue_s=self.settings.requeue_after, empty=self._empty,
                      features=self.k8s_release.gates)

    def node_index(self) -> NodeIndex:
        if self._index is None:
            self._empty = None
            self._index = NodeIndex(gated_inventory(inventory_from_tracker(self.tracker),
                                                    self.k8s_release.gates),
                                    self.node_cache.in_order())
        return self._index

    def _expiry(self, key: NamespacedName, r: Reservation) -> None:
        if key not in self.expires:
            left = self.settings.pod_timeout - _seconds_since(r.reserved_at, self.clock())
            self.expires[key] = self.monotonic() + max(left, 0.0)

    def _pods_came(self, wl: Workload) -> bool:
        return any(p.meta.namespace == wl.namespace and p.meta.annotations.get(WORKLOAD_ANNOTATION) == wl.name
                   for p in self.tracker.pods())

    def _release(self, key: NamespacedName, why: str) -> None:
        self.expires.pop(key, None)
        self.arrivals.forget(key)
        if self.reservations.release(key) is not None:
            log.info("devices of the Workload released", kind="Workload", namespace=key.namespace,
                     name=key.name, why=why)

    def retry(self, key: NamespacedName) -> None:
        self.retry_at[key] = self.monotonic() + self.settings.retry_after
        self.wake.set()

    # -- the writes

    async def _arrive(self, pkey: NamespacedName, came: Arrival) -> None:
        with guarded(self.name, "arrival", kind="Pod", namespace=pkey.namespace, name=pkey.name) as g:
            async with self.sem:
                await self.arrivals.write(self.client, pkey, came)
        if g.failed:
            self.arrivals.undo(came)

    async def _activate(self, name: str) -> None:
        check = self.checks.get(name)
        if check is None:
            return
        conditions = active_conditions(check, rfc3339(self.clock()))
        if conditions is None:
            return
        with guarded(self.name, "activate", kind="AdmissionCheck", name=name):
            resp = await self.client.merge_patch(f"{KUEUE}/admissionchecks/{name}/status",
                                                 {"status": {"conditions": conditions}})
            if resp.ok and isinstance(resp.body, Mapping):
                self.checks[name] = _plain(resp.body)
            elif not resp.ok and resp.status != 404:
                log.warning("cannot mark the AdmissionCheck active", kind="AdmissionCheck", name=name,
                            status=resp.status)

    async def _reserve(self, key: NamespacedName, wl: Workload, check: str, r: Reservation) -> None:
        """The annotation first (the record a restart finds), then Ready."""
        with guarded(self.name, "reserve", kind="Workload", namespace=key.namespace, name=key.name) as g:
            resp = await self.client.merge_patch(workload_path(key), {"metadata": {
                "resourceVersion": wl.resource_version, "annotations": {RESERVATION_ANNOTATION: r.to_json()}}})
            if not resp.ok:
                if self.reservations.get(key) == r:
                    self._release(key, f"the reservation's write was refused ({resp.status})")
                if resp.status in (413, 422):  # too large, or not acceptable: never will be
                    why = resp.body.get("message") if isinstance(resp.body, Mapping) else None
                    await self._write_state(key, wl, check, "Rejected", (
                        f"the devices fit, but the reservation cannot be recorded on the Workload "
                        f"(HTTP {resp.status}: {why or 'refused'})")[:2048], (), None)
                    return
                await self._refused(key, resp.status)
                return
            wl = self._stored(key, resp.body) or wl
            log.info("devices reserved for the Workload", kind="Workload", namespace=key.namespace,
                     name=key.name, devices=len(r.devices), message=r.message)
            await self._write_state(key, wl, check, "Ready", r.message, r.pod_set_updates, None)
        if g.failed:
            self.retry(key)

    async def _answer(self, key: NamespacedName, wl: Workload, check: str, state: str, message: str,
                      updates: Any, requeue: int | None, unannotate: bool) -> None:
        with guarded(self.name, "answer", kind="Workload", namespace=key.namespace, name=key.name) as g:
            if unannotate:
                resp = await self.client.merge_patch(workload_path(key), {"metadata": {
                    "resourceVersion": wl.resource_version, "annotations": {RESERVATION_ANNOTATION: None}}})
                if not resp.ok:
                    await self._refused(key, resp.status)
                    return
                wl = self._stored(key, resp.body) or wl
            await self._write_state(key, wl, check, state, message, updates, requeue)
        if g.failed:
            self.retry(key)

    async def _unannotate(self, key: NamespacedName, wl: Workload) -> None:
        with guarded(self.name, "release", kind="Workload", namespace=key.namespace, name=key.name) as g:
            resp = await self.client.merge_patch(workload_path(key), {"metadata": {
                "resourceVersion": wl.resource_version, "annotations": {RESERVATION_ANNOTATION: None}}})
            if resp.ok:
                self._stored(key, resp.body)
            elif resp.status != 404:
                await self._refused(key, resp.status)
        if g.failed:
            self.retry(key)

    async def _write_state(self, key: NamespacedName, wl: Workload, check: str, state: str, message: str,
                           updates: Any, requeue: int | None) -> None:
        raw = wl.raw.get("status") if isinstance(wl.raw.get("status"), Mapping) else {}
        assert isinstance(raw, Mapping)
        current = [c for c in raw.get("admissionChecks") or [] if isinstance(c, Mapping)]
        if check_unchanged(current, check, state, message, updates, requeue):
            return
        checks = with_check_state(current, check, state, message, rfc3339(self.clock()),
                                  pod_set_updates=updates, requeue_after=requeue)
        resp = await self.client.merge_patch(f"{workload_path(key)}/status", {
            "metadata": {"resourceVersion": wl.resource_version}, "status": {"admissionChecks": checks}})
        if not resp.ok:
            await self._refused(key, resp.status)
            return
        self._stored(key, resp.body)
        self.answers[state] = self.answers.get(state, 0) + 1
        log.info("admission check answered", kind="Workload", namespace=key.namespace, name=key.name,
                 check=check, state=state, message=message)

    def _stored(self, key: NamespacedName, body: Any) -> Workload | None:
        """The Workload as the write left it (the watch event follows; until then the next
        write carries the newer resourceVersion)."""
        if not isinstance(body, Mapping) or body.get("kind") not in (None, "Workload"):
            return None
        self.workloads[key] = _plain(body)
        try:
            return parse_workload(body)
        except WorkloadError:
            return None

    async def _refused(self, key: NamespacedName, status: int) -> None:
        if status == 409:
            log.info("the Workload changed under the write; deciding again", kind="Workload",
                     namespace=key.namespace, name=key.name)
            resp = await self.client.get(workload_path(key))  # not waiting for the watch
            if resp.ok:
                self._stored(key, resp.body)
            elif resp.status == 404:
                self.workloads.pop(key, None)
            self.again.add(key)  # looked at again when this write ends
        elif status != 404:
            log.warning("cannot write the Workload; retrying later", kind="Workload",
                        namespace=key.namespace, name=key.name, status=status)
            self.retry(key)


__all__ = ["AdmissionController", "AdmissionSettings", "workload_path"]
