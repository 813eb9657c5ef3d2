"""Preemption in the allocator controller (opt-in: `draco run --preemption`, the chart's
`preemption.enabled`): the shell around `preemption.preemption.select_victims`.

When a gated pod's claims cannot be allocated (unsatisfiable, not an error), its
`preemptionPolicy` is not `Never`, and lower-priority running pods hold devices that
would let it fit, draco

1. records the nomination on the preemptor pod (`preemption.nomination`) before any
   victim is touched: the nominated devices, the victims, a deadline;
2. evicts the victims as the eviction controller does: `DisruptionTarget` condition
   (reason `PreemptionByDraco`), then a graceful delete with the pod's own grace period
   (or a policy/v1 Eviction with `--use-eviction-api`), guarded by the victim's UID;
   an Event on the victim (`Preempted`) and on the preemptor (`Preempting`);
3. keeps the nominated devices from every other pod it allocates while the nomination
   stands; the preemptor is allocated on them as soon as the victims' claims are
   released, then narrowed and ungated as any pod.

The nomination ends when the preemptor is allocated (the annotation is removed), is
deleted (the annotation goes with it) or its deadline passes (removed; the pod may be
nominated anew, with victims chosen again). A draco that starts or takes over reads
standing nominations from the gated pods it decides and finishes them: the same victims,
no new ones.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Coroutine
from datetime import datetime, timedelta
from typing import Any, Protocol

import structlog
from prometheus_client import Counter, Gauge

from operators.allocator.features import DEFAULT_GATES, FeatureGates
from operators.allocator.nodes import NodeIndex
from operators.allocator.reserved import Reserved
from operators.allocator.search import NOMINATED_TAINT
from operators.kube.client import KubeClient
from operators.kube.conditions import rfc3339
from operators.kube.pod_reports import PodReporter
from operators.model import DeviceClass, DeviceID, ModelError, NamespacedName, Pod
from operators.model.disruption import DisruptionBudget, parse_disruption_budget
from operators.preemption.nomination import (
    NOMINATION_ANNOTATION,
    Nomination,
    nominated_devices,
    nomination_of,
    parse_device,
    parse_victim,
)
from operators.preemption.preemption import Prepared, prepare, select_victims
from operators.preemption.preemption_inputs import gang_units, running_pods
from operators.tracker import Tracker
from operators.tracker.gangs import GangKey

log = structlog.get_logger("draco.allocator")

PREEMPTIONS = Counter("draco_preemptions_total",
                      "Preemptions of the allocator, by outcome: nominated, allocated (the "
                      "preemptor got its devices), expired (the deadline passed).", ["outcome"])
VICTIMS = Counter("draco_preemption_victims_total",
                  "Pods the allocator evicted so that a higher-priority gated pod fits.")
NOMINATION_AGE = Gauge("draco_nomination_oldest_age_seconds",
                       "Age of the oldest standing nomination (0 when none).")
PREEMPTION_REASON = "PreemptionByDraco"
# kube-scheduler's fence: one upstream DeviceTaintRule per nominated device (1.37+, where
# resource.k8s.io/v1 serves DeviceTaintRule), NoSchedule, labelled with the preemptor's UID
FENCE_RULES = "/apis/resource.k8s.io/v1/devicetaintrules"
FENCE_LABEL = "resource.draco.dev/nominated-for"


def fence_name(uid: str, device: DeviceID) -> str:
    """Deterministic, so that any draco finds (and removes) what another one created."""
    return "draco-nominated-" + hashlib.sha256(f"{uid}/{device}".encode()).hexdigest()[:16]


def fence_rule(uid: str, device: DeviceID) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
            "metadata": {"name": fence_name(uid, device), "labels": {FENCE_LABEL: uid}},
            "spec": {"deviceSelector": {"driver": device.driver, "pool": device.pool,
                                        "device": device.device},
                     "taint": {"key": NOMINATED_TAINT, "value": uid, "effect": "NoSchedule"}}}


class PreemptionOwner(Protocol):
    """What the preemptor asks of the controller that owns it: to run its writes beside
    the loop, and to decide a pod or a gang again."""

    def spawn(self, key: NamespacedName, coro: Coroutine[Any, Any, None]) -> None: ...

    def background(self, coro: Coroutine[Any, Any, None]) -> None: ...

    def retry(self, key: NamespacedName) -> None: ...  # decided again after retry_after

    def decide_again(self, key: NamespacedName | None) -> None: ...  # None: only wake the loop

    def decide_gang_again(self, gkey: GangKey) -> None: ...

    def retry_gang(self, gkey: GangKey) -> None: ...


class Preemptor:
    """The allocator controller's preemption, a collaborator it owns: the standing
    nominations and what this process knows of them (fences, victims evicted, the
    victims' view), the victim choice for one pod and the writes that follow. The
    controller asks through the methods below; the preemptor asks back through its
    `owner` (PreemptionOwner) only."""

    def __init__(self, tracker: Tracker, client: KubeClient, settings: Any, reports: PodReporter,
                 owner: PreemptionOwner, clock: Callable[[], datetime]) -> None:
        self.tracker = tracker
        self.client = client
        self.settings = settings
        self.reports = reports
        self.owner = owner
        self.clock = clock
        self.features: FeatureGates = DEFAULT_GATES  # the cluster's release (the owner sets it)
        self.nominations: dict[NamespacedName, Nomination] = {}
        self.nominee_uids: dict[NamespacedName, str] = {}
        self.evicted: set[str] = set()  # victim UIDs whose eviction was accepted
        self.fence_served: bool | None = None  # None: not known yet
        self.fenced: set[str] = set()  # nominee UIDs whose fences this draco wrote
        self.prepared: Prepared | None = None  # victim selection's view of the claims
        self.unreadable: set[NamespacedName] = set()  # pods whose nomination was warned about
        self.budgets: list[DisruptionBudget] = []  # refreshed by load_budgets
        # pods (or gangs) whose nomination or evictions are being written: left alone
        # until the task ends, so that no victim is evicted twice nor the pod nominated anew
        self.preempting: set[object] = set()
        # nominations this process wrote and has not seen back on the pod yet: kept even
        # though the tracker's copy of the pod has no annotation (it is older)
        self.unconfirmed: set[NamespacedName] = set()

    # -- hooks the controller calls ------------------------------------------------------

    def on_change(self, claims_or_pods_changed: bool) -> None:
        if claims_or_pods_changed:
            self.prepared = None

    def busy(self, mark: object) -> bool:
        return mark in self.preempting

    def task(self, mark: object, coro: Coroutine[Any, Any, None]) -> Coroutine[Any, Any, None]:
        """CORO, with MARK (a pod's or a gang's key) left alone while it runs."""
        self.preempting.add(mark)

        async def task() -> None:
            try:
                await coro
            finally:
                self.preempting.discard(mark)
                # a pod is decided again now; for a gang, only the loop is woken
                self.owner.decide_again(mark if isinstance(mark, NamespacedName) else None)

        return task()

    def note_nomination(self, pod: Pod) -> None:
        """Keep the pod's nomination as the API has it (a new leader learns it here)."""
        if pod.meta.key in self.preempting:
            return  # being written: the tracker's copy says nothing yet
        nomination = nomination_of(pod)
        text = pod.meta.annotations.get(NOMINATION_ANNOTATION)
        if nomination is None and text is None and pod.meta.key in self.unconfirmed:
            return  # written here, not seen back yet
        self.unconfirmed.discard(pod.meta.key)
        if nomination is None:
            if text is not None and pod.meta.key not in self.unreadable:
                self.unreadable.add(pod.meta.key)
                log.warning("cannot read the pod's nomination; it is ignored and the pod "
                            "nominated anew if preemption helps", kind="Pod",
                            namespace=pod.meta.namespace, name=pod.meta.name, value=text[:200])
            self.nominations.pop(pod.meta.key, None)
        else:
            self.nominations[pod.meta.key] = nomination
            self.nominee_uids[pod.meta.key] = pod.meta.uid
        self.age()

    def nominated_from(self, own: Collection[NamespacedName],
                        in_use: Collection[DeviceID]) -> Collection[DeviceID]:
        """IN_USE for the pods OWN (one pod, or a gang's members), plus the devices
        standing nominations promise to others."""
        if not self.nominations:
            return in_use
        others = ((k, n) for k, n in self.nominations.items() if k not in own)
        extra = frozenset(nominated_devices(others, self.clock()))
        return Reserved(in_use, extra) if extra else in_use  # in use, plus others' nominations

    def nomination_done(self, key: NamespacedName, uid: str) -> None:
        """The preemptor is allocated: its nomination ends."""
        nomination = self.nominations.pop(key, None)
        self.unconfirmed.discard(key)
        if nomination is not None:
            PREEMPTIONS.labels(outcome="allocated").inc()
            self.age()
            self.nominee_uids.pop(key, None)
            self.owner.background(self.clear(key, uid))
            self.owner.background(self.unfence(uid, nomination.devices))

    def nomination_forgotten(self, key: NamespacedName) -> None:
        """The pod is no longer draco's to allocate (gone, or its gate removed): a
        nomination still on it is removed, never left behind."""
        nomination = self.nominations.pop(key, None)
        self.unreadable.discard(key)
        self.unconfirmed.discard(key)
        uid = self.nominee_uids.pop(key, "")
        self.age()
        if nomination is not None and uid:
            self.owner.background(self.unfence(uid, nomination.devices))
        pod = self.tracker.pod(key)
        if pod is not None and NOMINATION_ANNOTATION in pod.meta.annotations:
            self.owner.background(self.clear(key, pod.meta.uid))

    def preempt(self, key: NamespacedName, pod: Pod, index: NodeIndex, classes: dict[str, DeviceClass],
                in_use: Collection[DeviceID]) -> bool:
        """Called when POD cannot be allocated. True: a nomination stands (victims are
        going); False: preemption does not help, report as unschedulable."""
        now = self.clock()
        if key in self.preempting:
            return True  # its nomination or evictions are being written: decided again after
        standing = self.nominations.get(key)
        if standing is not None and not standing.expired(now):
            if pod.meta.uid not in self.fenced:  # a new leader fences what it finds
                self.fenced.add(pod.meta.uid)
                self.owner.background(self.fence(pod.meta.uid, standing.devices))
            self.spawn_evictions(key, pod, standing)
            return True
        if standing is not None:  # the deadline passed: choose again, from scratch
            self.nominations.pop(key, None)
            self.unconfirmed.discard(key)
            PREEMPTIONS.labels(outcome="expired").inc()
        if not self._choose(key, pod, index, classes, in_use, now, standing):
            if standing is not None:  # no new nomination replaces it: it goes
                self.owner.background(self.clear(key, pod.meta.uid))
                self.owner.background(self.unfence(pod.meta.uid, standing.devices))
            return False
        return True

    def _choose(self, key: NamespacedName, pod: Pod, index: NodeIndex, classes: dict[str, DeviceClass],
                in_use: Collection[DeviceID], now: datetime, stale: Nomination | None) -> bool:
        """Victims for POD, nominated (True), or none that help (False). STALE: the pod's
        expired nomination, which the new one replaces (its fences go first)."""
        if pod.preemption_policy == "Never":
            return False
        member_claims = [c for k in pod.claim_keys() if (c := self.tracker.claim(k)) is not None]
        pending = [c for c in member_claims if c.allocation is None]
        allocated = [c for c in member_claims if c.allocation is not None]
        if not pending:
            return False
        if self.prepared is None:  # kept until a claim, pod or allocation changes
            self.prepared = prepare(running_pods(self.tracker), self.tracker.claims())
        decision = select_victims(pod, pending, allocated, (), index, classes, in_use, (),
                                  self.budgets, gang_units(self.tracker),
                                  self.settings.budget, prepared=self.prepared,
                                  features=self.features)
        if decision.verdict != "preempt":
            return False
        nomination = Nomination(
            decision.node, tuple(sorted({parse_device(d) for d in decision.devices})),
            tuple(sorted(parse_victim(v) for v in decision.victims)),
            now + timedelta(seconds=self.settings.nomination_timeout))
        self.nominations[key] = nomination
        self.nominee_uids[key] = pod.meta.uid
        self.age()
        PREEMPTIONS.labels(outcome="nominated").inc()
        self.owner.spawn(key, self.task(key, self._nominate(
            key, pod.meta.uid, nomination, decision.reason, stale)))
        return True

    # -- writes -------------------------------------------------------------------------

    async def _nominate(self, key: NamespacedName, uid: str, nomination: Nomination,
                        why: str, stale: Nomination | None = None) -> None:
        """The nomination first, then the victims: a draco that dies in between leaves
        a nomination the next one finishes. STALE's fences on devices the new nomination
        does not keep go first (the same device keeps its fence: names are per device)."""
        if stale is not None:
            await self.unfence(uid, tuple(d for d in stale.devices if d not in nomination.devices))
        path = f"/api/v1/namespaces/{key.namespace}/pods/{key.name}"
        resp = await self.client.merge_patch(path, {"metadata": {
            "uid": uid, "annotations": {NOMINATION_ANNOTATION: nomination.to_annotation()}}})
        if not resp.ok:
            log.warning("cannot record the nomination; deciding again later", kind="Pod",
                        namespace=key.namespace, name=key.name, status=resp.status)
            self.nominations.pop(key, None)
            self.owner.retry(key)
            return
        self.unconfirmed.add(key)
        await self.nominated_node(key, uid, nomination.node)
        self.fenced.add(uid)
        await self.fence(uid, nomination.devices)
        victims = ", ".join(f"{v.namespace}/{v.name}" for v in nomination.victims)
        log.info("preempting", kind="Pod", namespace=key.namespace, name=key.name,
                 victims=victims, node=nomination.node, devices=[str(d) for d in nomination.devices])
        await self.reports.event(key, uid, "Preempting",
                                 f"evicting {victims} for devices "
                                 f"{', '.join(str(d) for d in nomination.devices)}: {why}")
        await self.evict_all(key, nomination)

    def spawn_evictions(self, key: NamespacedName, pod: Pod, nomination: Nomination,
                         mark: object = None) -> None:
        """A standing nomination whose victims are not all gone (a new leader, a failed
        eviction): evict those that remain, and no one else."""
        if any(self._victim_pod(v) is not None for v in nomination.victims):
            self.owner.spawn(key, self.task(
                mark if mark is not None else key, self.evict_all(key, nomination)))

    def _victim_pod(self, key: NamespacedName) -> Pod | None:
        pod = self.tracker.pod(key)
        if pod is None or pod.terminal or pod.meta.deleting or pod.meta.uid in self.evicted:
            return None
        return pod

    async def evict_all(self, key: NamespacedName, nomination: Nomination) -> None:
        for victim in nomination.victims:
            pod = self._victim_pod(victim)
            if pod is not None:
                await self._evict(pod, key)

    async def _evict(self, pod: Pod, preemptor: NamespacedName) -> None:
        ns, name, uid = pod.meta.namespace, pod.meta.name, pod.meta.uid
        path = f"/api/v1/namespaces/{ns}/pods/{name}"
        message = f"preempted by draco for the higher-priority pod {preemptor.namespace}/{preemptor.name}"
        cond = {"type": "DisruptionTarget", "status": "True", "reason": PREEMPTION_REASON,
                "message": message, "lastTransitionTime": rfc3339(self.clock())}
        patched = await self.client.strategic_patch(
            f"{path}/status", {"metadata": {"uid": uid}, "status": {"conditions": [cond]}})
        if patched.status in (404, 409):
            return
        if not patched.ok:
            log.warning("cannot mark the victim", kind="Pod", namespace=ns, name=name,
                        status=patched.status)
            return
        options = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}}
        if self.settings.use_eviction_api:
            resp = await self.client.post(f"{path}/eviction", {
                "apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": name, "namespace": ns}, "deleteOptions": options})
        else:
            resp = await self.client.delete(path, options)
        if resp.ok:
            self.evicted.add(uid)
            VICTIMS.inc()
            log.info("evicted a preemption victim", kind="Pod", namespace=ns, name=name,
                     preemptor=f"{preemptor.namespace}/{preemptor.name}")
            await self.reports.event(pod.meta.key, uid, "Preempted", message, "Warning")
        elif resp.status not in (404, 409):
            log.warning("cannot evict the victim; trying again on the next decision",
                        kind="Pod", namespace=ns, name=name, status=resp.status)

    async def clear(self, key: NamespacedName, uid: str) -> None:
        path = f"/api/v1/namespaces/{key.namespace}/pods/{key.name}"
        resp = await self.client.merge_patch(path, {"metadata": {
            "uid": uid, "annotations": {NOMINATION_ANNOTATION: None}}})
        if not resp.ok and resp.status not in (404, 409):
            log.warning("cannot remove the nomination", kind="Pod", namespace=key.namespace,
                        name=key.name, status=resp.status)
        if resp.status not in (404, 409):
            await self.nominated_node(key, uid, None)

    async def nominated_node(self, key: NamespacedName, uid: str, node: str | None) -> None:
        """kube-scheduler's words for a nomination: `status.nominatedNodeName` (through
        pods/status), set when the nominated devices are all on one node and cleared
        with the nomination; the annotation stays the record draco reads back."""
        resp = await self.client.merge_patch(
            f"/api/v1/namespaces/{key.namespace}/pods/{key.name}/status",
            {"metadata": {"uid": uid}, "status": {"nominatedNodeName": node}})
        if not resp.ok and resp.status not in (404, 409):
            log.warning("cannot write the pod's nominatedNodeName", kind="Pod",
                        namespace=key.namespace, name=key.name, node=node, status=resp.status)

    async def fence(self, uid: str, devices: tuple[DeviceID, ...]) -> None:
        """Keep kube-scheduler off the nominated devices: a NoSchedule DeviceTaintRule of
        upstream's per device. Where the API is not served (1.34; 1.36 with its beta off)
        there is no fence: draco's own allocator still keeps them, by the nomination."""
        if self.fence_served is False:
            return
        for device in devices:
            resp = await self.client.post(FENCE_RULES, fence_rule(uid, device))
            if resp.status == 404:
                self.fence_served = False
                log.info("upstream's DeviceTaintRule is not served: kube-scheduler is not "
                         "fenced off nominated devices on this cluster")
                return
            self.fence_served = True
            if not resp.ok and resp.status != 409:  # 409: there already
                log.warning("cannot fence a nominated device", device=str(device),
                            status=resp.status)

    async def unfence(self, uid: str, devices: tuple[DeviceID, ...]) -> None:
        if self.fence_served is False:
            return
        for device in devices:
            resp = await self.client.delete(f"{FENCE_RULES}/{fence_name(uid, device)}")
            if not resp.ok and resp.status != 404:
                log.warning("cannot remove a nominated device's fence", device=str(device),
                            status=resp.status)

    async def sweep_fences(self) -> None:
        """Fences whose nominee no longer stands (a draco that died before removing them):
        removed. Run when preemption starts and at each nomination timeout."""
        if self.fence_served is False:
            return
        resp = await self.client.get(f"{FENCE_RULES}?labelSelector={FENCE_LABEL}")
        if resp.status == 404:
            self.fence_served = False
            return
        if not resp.ok or not isinstance(resp.body, dict):
            return
        self.fence_served = True
        now = self.clock()
        standing = {p.meta.uid for p in self.tracker.pods()
                    if (n := nomination_of(p)) is not None and not n.expired(now)}
        for rule in resp.body.get("items") or []:
            md = rule.get("metadata") or {}
            if (md.get("labels") or {}).get(FENCE_LABEL) not in standing:
                gone = await self.client.delete(f"{FENCE_RULES}/{md.get('name')}")
                if not gone.ok and gone.status != 404:
                    log.warning("cannot remove a stale fence", rule=md.get("name"),
                                status=gone.status)

    # -- reads --------------------------------------------------------------------------

    async def load_budgets(self) -> None:
        """The PodDisruptionBudgets victim selection orders by (the tracker keeps none),
        refreshed before preemption decisions; a failure leaves the last list (the API
        server still enforces budgets with --use-eviction-api)."""
        resp = await self.client.get("/apis/policy/v1/poddisruptionbudgets")
        if not resp.ok or not isinstance(resp.body, dict):
            return
        budgets = []
        for item in resp.body.get("items") or []:
            try:
                budgets.append(parse_disruption_budget({"kind": "PodDisruptionBudget", **item}))
            except ModelError as e:
                log.warning("cannot read a PodDisruptionBudget; its pods count as unprotected",
                            why=str(e))
        self.budgets = budgets

    def age(self) -> None:
        if not self.nominations:
            self.evicted.clear()  # only standing nominations' victims matter: bounded by them
            self.fenced.clear()
        now: datetime = self.clock()
        timeout = timedelta(seconds=self.settings.nomination_timeout)
        ages = [(now - (n.deadline - timeout)).total_seconds() for n in self.nominations.values()]
        NOMINATION_AGE.set(max(ages, default=0.0))


__all__ = ["NOMINATION_AGE", "PREEMPTIONS", "PREEMPTION_REASON", "VICTIMS", "PreemptionOwner", "Preemptor"]
