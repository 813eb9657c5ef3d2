"""The narrowing controller's loop: gated pods whose claims are ready, narrowed and ungated.

Decisions come from `readiness` (tracker) and `narrow` (pure); this class schedules the
writes. Work per event: tracker changes name the pods to reconsider (a pod's own update,
or an update of one of its claims); only the first pass after (re)starting looks at
every pod.

One update per pod, with the pod's resourceVersion and UID as preconditions, carrying
the narrowed affinity and the gate list without draco's gate. First try: a merge PATCH
computed from the tracker's copy of the pod (one request; the time from a claim's
reservation to the ungated pod is what users wait for). When that copy is stale (409),
or the decision needs what the tracker does not keep (tolerations against tainted
nodes, a refusal to report, the chosen node's labels), a PUT of the pod read just before
(`read_modify_write`: a 409 re-reads the pod and recomputes from it). A pod that lost
draco's gate, was bound, deleted or replaced (another UID) in between is left alone.

Binding conditions (KEP-5007): a pod whose devices wait for them stays gated (a
`BindingConditionsPending` Event says which device and condition, once); a failed
binding is the allocator's to release.

Nodes another controller chose: when the allocations pin one node and its labels are
known (the watch-fed node cache), that node vouches for the narrowing (`_decide`): a
pod whose own nodeSelector or required node affinity excludes it gets
`PodRejectsChosenNode` (naming that choice) instead of an affinity no node satisfies.

Gate etiquette: a pod that still carries another controller's gate (Kueue's, any not
named in `act_beside`) is not narrowed (`readiness`), and its `timeout` counts from when
draco saw those gates gone, not from its creation.

When the pod cannot be narrowed (`CannotNarrow`), or its claims are not ready
`timeout` seconds after the pod was created, a Warning Event and the pod condition
`DracoNarrowing` (False, reason = why) say so, once per reason, and the gate stays.
Once the pod is narrowed after such a report, the condition turns True (`Narrowed`).

Nodes: the controller keeps its own small cache of Nodes (name, labels, taints, cordon),
fed by a Node watch (`on_node`) and one listing at start (`load_nodes`). A pod whose
narrowed placement accepts known nodes that all refuse it (an untolerated NoSchedule or
NoExecute taint, or a cordon: `operators.narrowing.nodes`) keeps its gate and is reported
like an impossible narrowing (reasons `UntoleratedNodeTaint`, `NodeUnschedulable`); a
change of a node's taints, cordon or labels, or a new node, looks at those pods again.

Supervised: each step about one pod is guarded (logged, counted in
`draco_controller_errors_total{controller="narrowing",step=…}`); a failed write is
retried after `retry_after` seconds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog
from prometheus_client import Counter

from operators.kube.client import KubeClient, Response
from operators.kube.conditions import rfc3339
from operators.kube.conflicts import read_modify_write
from operators.kube.metrics import gated_pod_done
from operators.kube.pod_reports import PodReporter, Reported
from operators.kube.shell import KeyedPassLoop
from operators.kube.supervision import guarded
from operators.model import NamespacedName, Pod
from operators.model.fields import thaw
from operators.model.nodes import NodeInfo, parse_node
from operators.narrowing.narrow import (
    DRACO_GATE,
    CannotNarrow,
    Narrowed,
    NarrowingResult,
    narrow,
    pod_rejects,
)
from operators.narrowing.nodes import refusal
from operators.narrowing.readiness import NotOurs, Ready, Waiting, readiness
from operators.tracker import Change, Tracker
from operators.tracker.gangs import GANG_KINDS, GangMembers, gang_key, gang_overlay, placed_count

log = structlog.get_logger("draco.narrowing")

CONDITION = "DracoNarrowing"
NOT_ALLOCATED = "ClaimsNotAllocated"
REJECTED = "NarrowingRejected"  # the API server refused the update (422)
SILENT = ("NotGated", "AlreadyBound")  # someone else got there first: nothing to say
NODE_REASONS = ("UntoleratedNodeTaint", "NodeUnschedulable")  # looked at again when nodes change
IDLE = 60.0

OUTCOMES = Counter("draco_narrowing_pods_total",
                   "Gated pods the narrowing controller finished with, by outcome.", ["outcome"])


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class NarrowingSettings:
    workers: int = 16
    timeout: float = 300.0  # seconds after pod creation before unready claims are reported
    retry_after: float = 5.0
    gate: str = DRACO_GATE
    act_beside: frozenset[str] = frozenset()  # other gates draco may act beside ("*": all)


class NarrowingController(KeyedPassLoop):
    name = "narrowing"

    def __init__(self, tracker: Tracker, client: KubeClient, settings: NarrowingSettings | None = None,
                 *, clock: Callable[[], datetime] = _utcnow) -> None:
        self.tracker = tracker
        self.client = client
        self.settings = settings or NarrowingSettings()
        self.clock = clock
        self.reports = PodReporter(client, self.name, "draco-narrowing", CONDITION, clock)
        self.sem = asyncio.Semaphore(self.settings.workers)
        self.pending: set[NamespacedName] = set()
        self.in_flight: set[NamespacedName] = set()
        self.again: set[NamespacedName] = set()  # changed while in flight: look once more
        self.deadlines: dict[NamespacedName, tuple[str, datetime]] = {}
        self.retry_at: dict[NamespacedName, datetime] = {}
        # the earliest deadline or retry (early, never late): a step scans both only when
        # one is due, not on every change (a thousand gated pods made each step O(n))
        self._due_at: datetime | None = None
        self.reported: dict[NamespacedName, Reported] = {}
        self.binding_told: dict[NamespacedName, str] = {}  # pod UID told it waits for binding
        # pods seen behind another controller's gate, and when those gates left: the
        # timeout counts from then, not from the pod's creation (Kueue may queue for hours)
        self.behind_gates: set[NamespacedName] = set()
        self.free_since: dict[NamespacedName, datetime] = {}
        self.node_labels: dict[str, Mapping[str, str] | None] = {}
        self.nodes: dict[str, NodeInfo] = {}
        self._nodes_deleted: set[str] = set()  # while the first listing is under way
        self.narrowed_total = 0
        self.considered = 0  # pods looked at (tests assert work per event with it)
        self.passes = 0
        self._rescan = True
        self.gang_members = GangMembers()
        self._init_loop()

    def resync(self) -> None:
        self._rescan = True  # changes may have been missed: look at every pod next pass

    def _on_change(self, change: Change) -> None:
        woken = set(change.pods)
        for claim in change.claims:
            woken.update(self.tracker.pods_of_claim(claim))
        self.pending |= woken
        # a gang completes with its last member's claim: every member is looked at again
        touched = self.gang_members.update(self.tracker, woken)
        touched |= {(r.kind, r.namespace, r.name) for r in change.objects if r.kind in GANG_KINDS}
        for gang in touched:
            self.pending |= self.gang_members.pods.get(gang, set())
        self.wake.set()

    # -- nodes

    def on_node(self, event_type: str, body: Mapping[str, Any]) -> None:
        """A Node watch event: keep the cache, and look again at the pods held for nodes
        when what scheduling reads of a node changed."""
        node = parse_node(body)
        if not node.name:
            return
        old = self.nodes.get(node.name)
        if event_type == "DELETED":
            self.nodes.pop(node.name, None)
            self.node_labels.pop(node.name, None)
            self._nodes_deleted.add(node.name)
            changed = old is not None
        else:
            self.nodes[node.name] = node
            self.node_labels[node.name] = node.labels
            self._nodes_deleted.discard(node.name)
            changed = old != node
        if changed:
            held = [k for k, r in self.reported.items() if r.reason in NODE_REASONS]
            if held:
                self.pending.update(held)
                self.wake.set()

    async def load_nodes(self) -> None:
        """List the nodes once at start; watch events that came first win (they are newer)."""
        self._nodes_deleted.clear()
        with guarded(self.name, "list-nodes", kind="Node"):
            resp = await self.client.get("/api/v1/nodes")
            if not resp.ok or not isinstance(resp.body, Mapping):
                log.warning("cannot list nodes: taints are checked only for nodes watched later",
                            kind="Node", status=resp.status)
                return
            for item in resp.body.get("items") or []:
                if not isinstance(item, Mapping):
                    continue
                node = parse_node(item)
                if node.name and node.name not in self.nodes and node.name not in self._nodes_deleted:
                    self.nodes[node.name] = node
                    self.node_labels[node.name] = node.labels

    # -- main loop

    async def step(self) -> float:
        """One pass over the pods that changed or are due; returns the sleep until the next."""
        self.passes += 1
        now = self.clock()
        if self._rescan:
            self._rescan = False
            keys = {p.key for p in self.tracker.pods()}
            self.gang_members.rescan(self.tracker)
        else:
            keys = set()
        keys |= self.pending
        self.pending = set()
        due = self._due_at is not None and self._due_at <= now
        if due:
            keys |= {k for k, (_, when) in self.deadlines.items() if when <= now}
            keys |= {k for k, when in self.retry_at.items() if when <= now}
        for key in sorted(keys):
            self._consider(key, now)
        if due:
            soonest = [when for _, when in self.deadlines.values()] + list(self.retry_at.values())
            self._due_at = min(soonest) if soonest else None
        if self._due_at is None:
            return IDLE
        return min(IDLE, max((self._due_at - now).total_seconds(), 0.05))

    def _due(self, when: datetime) -> None:
        self._due_at = when if self._due_at is None else min(self._due_at, when)

    def _consider(self, key: NamespacedName, now: datetime) -> None:
        self.considered += 1
        with guarded(self.name, "decide", kind="Pod", namespace=key.namespace, name=key.name):
            state = readiness(self.tracker, key, self.settings.gate, self.settings.act_beside)
            if isinstance(state, NotOurs):
                self._forget(key)
                if state.why.startswith("waiting for gate"):
                    self.behind_gates.add(key)  # another controller's gate: not ours yet
                return
            if key in self.behind_gates:  # the other gates just left: the timeout starts now
                self.behind_gates.discard(key)
                self.free_since[key] = now
            if self._deferred(key, now):
                return
            if isinstance(state, Waiting):
                if state.binding and self.binding_told.get(key) != state.uid:
                    self.binding_told[key] = state.uid  # once per pod, as kube-scheduler's Event
                    self._background(self.reports.event(
                        key, state.uid, "BindingConditionsPending",
                        "waiting for the devices' binding conditions before ungating: "
                        + "; ".join(state.binding)))
                self._waiting(key, state, now)
                return
            incomplete = self._gang_incomplete(key)
            if incomplete is not None:
                self._waiting(key, Waiting(state.uid, (incomplete,)), now)
                return
            self.deadlines.pop(key, None)
            self._spawn(key, self._narrow(key, state))

    def _gang_incomplete(self, key: NamespacedName) -> str | None:
        """Why a gang member's claims, ready as they are, must wait: its gang has fewer
        than minCount members with their devices (None: not a member, or complete)."""
        pod = self.tracker.pod(key)
        gkey = gang_key(pod) if pod is not None else None
        if gkey is None:
            return None
        gangs = gang_overlay(self.tracker)
        if gangs is not None and gangs.is_basic(*gkey):
            return None  # a PodGroup without a gang policy: its pods go one by one
        if gangs is None or gangs.gang(*gkey) is None:
            return f"{gkey[0]} {gkey[1]}/{gkey[2]} does not exist or cannot be read"
        gang = gangs.gang(*gkey)
        assert gang is not None
        done = placed_count(self.tracker, self.gang_members, gkey, self.settings.gate)
        if done >= gang.min_count:
            return None
        return (f"{gkey[0]} {gang.label}: {done} of {gang.min_count} members have their "
                "devices; members are ungated together")

    def _forget(self, key: NamespacedName) -> None:
        self.behind_gates.discard(key)
        self.free_since.pop(key, None)
        self.deadlines.pop(key, None)
        self.retry_at.pop(key, None)
        self.reported.pop(key, None)
        self.binding_told.pop(key, None)


    def _waiting(self, key: NamespacedName, state: Waiting, now: datetime) -> None:
        known = self.deadlines.get(key)
        if known is None or known[0] != state.uid:
            pod = self.tracker.pod(key)
            created = pod.meta.creation_timestamp if pod is not None else None
            start = self.free_since.get(key) or created or now
            known = (state.uid, start + timedelta(seconds=self.settings.timeout))
            self.deadlines[key] = known
            self._due(known[1])
        if known[1] > now:
            return
        del self.deadlines[key]  # reported once; a later change of the pod or claims re-arms it
        after = "its other scheduling gates were removed" if key in self.free_since else \
            "the pod was created"
        message = (f"claims not ready {self.settings.timeout:g}s after {after}: "
                   f"{state.message}; the scheduling gate {self.settings.gate} stays until they "
                   "are allocated and reserved for the pod")
        self._spawn(key, self._report(key, state.uid, NOT_ALLOCATED, message))

    # -- the update

    async def _narrow(self, key: NamespacedName, ready: Ready) -> None:
        ns, name = key.namespace, key.name
        with guarded(self.name, "narrow", kind="Pod", namespace=ns, name=name) as g:
            async with self.sem:
                # The node the devices pin, when its labels are known, vouches for the
                # narrowing: a pod whose own nodeSelector or affinity (another controller's
                # choice: Kueue's topology ungater, a user) excludes that node is refused
                # rather than narrowed into an affinity no node satisfies.
                # (from the watch-fed node cache only: the fast path stays one request)
                pinned = self.node_labels.get(ready.pinned_node) if ready.pinned_node is not None else None
                fast = await self._patch_from_cache(key, ready, pinned)
                if fast is not None:
                    result, resp, previous = fast
                else:
                    result, resp, previous = await self._update(key, ready, labels=pinned)
                    if (isinstance(result, CannotNarrow) and result.reason == "ChosenNodeRequired"
                            and ready.pinned_node is not None):
                        labels = await self._labels(ready.pinned_node)
                        if labels is not None:
                            result, resp, previous = await self._update(key, ready, labels=labels)
            await self._settle(key, ready, result, resp, previous)
        if g.failed:
            self._retry(key)

    async def _patch_from_cache(self, key: NamespacedName, ready: Ready,
                                labels: Mapping[str, str] | None = None,
                                ) -> tuple[NarrowingResult | None, Response, Mapping[str, Any] | None] | None:
        """The one-request path; None sends the caller to the read-modify-write. LABELS:
        those of the node the allocations pin, when known."""
        pod = self.tracker.pod(key)
        if pod is None or pod.meta.uid != ready.uid or not pod.meta.resource_version:
            return None
        cached = _cached_pod(pod)
        result = self._decide(cached, ready, labels)
        if not isinstance(result, Narrowed):
            return None
        # Without tolerations a pod is refused by at least as many nodes as with them: when
        # some node takes it anyway, its tolerations cannot change the verdict.
        if self.nodes and refusal(result.apply(cached), self.nodes) is not None:
            return None
        spec: dict[str, Any] = result.spec_fields()
        spec["schedulingGates"] = spec["schedulingGates"] or None  # merge patch: null deletes
        patch = {"metadata": {"uid": ready.uid, "resourceVersion": pod.meta.resource_version},
                 "spec": spec}
        resp = await self.client.merge_patch(f"/api/v1/namespaces/{key.namespace}/pods/{key.name}", patch)
        if resp.status == 404:
            return result, resp, None
        if not resp.ok or not isinstance(resp.body, Mapping):
            return None  # a stale copy (409) or anything else: the careful path decides
        previous = next((c for c in (resp.body.get("status") or {}).get("conditions") or []
                         if isinstance(c, Mapping) and c.get("type") == CONDITION), None)
        return result, resp, previous

    def _decide(self, pod: Mapping[str, Any], ready: Ready,
                labels: Mapping[str, str] | None) -> NarrowingResult:
        """`narrow`, vouched for by the node the allocations pin when its LABELS are known:
        that node decides what the exact rules cannot (ChosenNodeRequired), and a pod
        whose own node choice excludes it is refused (`pod_rejects`)."""
        result = narrow(pod, ready.selectors, None, None, gate=self.settings.gate)
        if labels is None or ready.pinned_node is None:
            return result
        if isinstance(result, CannotNarrow) and result.reason == "ChosenNodeRequired":
            return narrow(pod, ready.selectors, ready.pinned_node, labels, gate=self.settings.gate)
        if isinstance(result, Narrowed):
            return pod_rejects(pod, ready.pinned_node, labels) or result
        return result

    async def _update(self, key: NamespacedName, ready: Ready, labels: Mapping[str, str] | None,
                      ) -> tuple[NarrowingResult | None, Response, Mapping[str, Any] | None]:
        """One read-modify-write; returns the last decision, the answer and our old condition."""
        seen: dict[str, Any] = {"result": None, "condition": None}

        def mutate(pod: dict[str, Any]) -> Mapping[str, Any] | None:
            meta = pod.get("metadata") or {}
            seen["result"] = None
            if meta.get("uid") != ready.uid or meta.get("deletionTimestamp"):
                return None  # replaced under the same name, or going away
            result: NarrowingResult = self._decide(pod, ready, labels)
            seen["condition"] = next((c for c in (pod.get("status") or {}).get("conditions") or []
                                      if c.get("type") == CONDITION), None)
            if not isinstance(result, Narrowed):
                seen["result"] = result
                return None
            updated = result.apply(pod)
            refused = refusal(updated, self.nodes) if self.nodes else None
            if refused is not None:
                seen["result"] = CannotNarrow("NodeUnschedulable" if refused.reason == "NodeUnschedulable"
                                              else "UntoleratedNodeTaint", refused.message)
                return None
            seen["result"] = result
            return updated

        path = f"/api/v1/namespaces/{key.namespace}/pods/{key.name}"
        resp = await read_modify_write(self.client, path, mutate)
        return seen["result"], resp, seen["condition"]

    async def _settle(self, key: NamespacedName, ready: Ready, result: NarrowingResult | None,
                      resp: Response, previous: Mapping[str, Any] | None) -> None:
        ns, name = key.namespace, key.name
        if resp.status == 404 or result is None:
            return  # deleted, replaced or being deleted meanwhile
        if isinstance(result, CannotNarrow):
            if result.reason in SILENT:
                return
            OUTCOMES.labels(outcome=result.reason).inc()
            await self._report(key, ready.uid, result.reason,
                               f"{result.message}; the scheduling gate {self.settings.gate} stays")
            return
        if resp.status == 422:
            OUTCOMES.labels(outcome=REJECTED).inc()
            message = resp.body.get("message") if isinstance(resp.body, Mapping) else resp.body
            await self._report(key, ready.uid, REJECTED,
                               f"the API server refused the narrowing update: {message}; the "
                               f"scheduling gate {self.settings.gate} stays")
            return
        if not resp.ok:
            log.warning("cannot narrow pod", kind="Pod", namespace=ns, name=name, status=resp.status,
                        retry_after=self.settings.retry_after)
            self._retry(key)
            return
        self.narrowed_total += 1
        OUTCOMES.labels(outcome="Narrowed").inc()
        pod = self.tracker.pod(key)
        # counted from when the other controllers' gates left, for a pod that waited for them
        gated_pod_done(self.name, self.free_since.get(key)
                       or (pod.meta.creation_timestamp if pod is not None else None), self.clock())
        log.info("narrowed and ungated pod", kind="Pod", namespace=ns, name=name,
                 claims=list(ready.claims), exact=result.exact)
        claims = (f"claim{'s' if len(ready.claims) > 1 else ''} {', '.join(ready.claims)}"
                  if ready.claims else "no claims")
        what = (f"required node affinity narrowed to the nodes that can reach the devices of {claims}"
                if result.affinity_changed else f"node affinity unchanged ({claims}: reachable from every node)")
        # Reports posted beside the worker: the pod is ungated already, nothing waits on them.
        self._background(self.reports.event(
            key, ready.uid, "Narrowed", f"{what}; scheduling gate {self.settings.gate} removed"))
        reported = self.reported.pop(key, None)
        if (previous is not None and previous.get("status") == "False") or reported is not None:
            self._background(self.reports.condition(key, ready.uid, "True", "Narrowed",
                                                    "narrowed to the nodes of its devices and ungated"))

    async def _labels(self, node: str) -> Mapping[str, str] | None:
        """The chosen node's labels (cached; None when the node cannot be read)."""
        if node in self.node_labels:
            return self.node_labels[node]
        resp = await self.client.get(f"/api/v1/nodes/{node}")
        labels: Mapping[str, str] | None = None
        if resp.ok and isinstance(resp.body, Mapping):
            labels = dict((resp.body.get("metadata") or {}).get("labels") or {})
            self.node_labels[node] = labels
        return labels

    def _retry(self, key: NamespacedName) -> None:
        self.retry_at[key] = self.clock() + timedelta(seconds=self.settings.retry_after)
        self._due(self.retry_at[key])
        self.wake.set()

    # -- reports

    async def _report(self, key: NamespacedName, uid: str, reason: str, message: str) -> None:
        """Warning Event and condition False, once per (pod, reason, message)."""
        old = self.reported.get(key)
        if old is not None and old.uid == uid and (old.reason, old.message) == (reason, message):
            return
        since = old.since if old is not None and old.uid == uid else None
        now = rfc3339(self.clock())
        self.reported[key] = Reported(uid, reason, message, since or now)
        log.warning("pod stays gated", kind="Pod", namespace=key.namespace, name=key.name,
                    reason=reason, message=message)
        await self.reports.held(key, uid, reason, message, since or now)


def _cached_pod(pod: Pod) -> dict[str, Any]:
    """The parts of a pod that narrowing reads, in API form, from the tracker's copy."""
    spec: dict[str, Any] = {"schedulingGates": [{"name": g} for g in pod.scheduling_gates]}
    if pod.node_name:
        spec["nodeName"] = pod.node_name
    if pod.node_selector:
        spec["nodeSelector"] = dict(pod.node_selector)
    if pod.affinity is not None:
        spec["affinity"] = thaw(pod.affinity)
    return {"metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.meta.uid,
                         "resourceVersion": pod.meta.resource_version}, "spec": spec}
