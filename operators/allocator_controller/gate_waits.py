"""Gate etiquette in the allocator controller: what a pod (or gang) that waits for another
controller's scheduling gate is told, and when a gang waits whole.

`pod_claims.pod_work` answers `GateWait` for a pod that carries a gate other than draco's
and those draco may act beside (`model.gates`); nothing is allocated, preempted or placed
for it. The pod is told once: the condition `DracoAllocation` False with reason
`WaitingForGate` and a Normal Event (waiting is no fault), both saying "waiting for gate
X"; the condition turns True when the pod is allocated later. A gang waits whole while any
member still carries such a gate (it is placed jointly, and a member whose admission or
node assignment is still to come would be placed blind): each member draco gates is told
which member waits for which gate, nothing is reserved for the gang, and the Gang's
`Allocated` condition says `WaitingForGate`. The members' gate removals wake it.

A collaborator the controller owns (`GateWaits`): it decides and tells; what a waiting
gang gives up (its reservation, its place in the queue) stays with the gang loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

import structlog

from operators.kube.conditions import rfc3339
from operators.kube.pod_reports import Reported
from operators.model import NamespacedName, Pod
from operators.model.gates import other_gates, waiting_for

log = structlog.get_logger("draco.allocator")

GATE_WAIT = "WaitingForGate"


class PodTeller(Protocol):
    """What GateWaits needs of `PodReporter`: an Event and the condition on a pod."""

    async def event(self, key: NamespacedName, uid: str, reason: str, message: str,
                    type_: str = "Normal") -> None: ...

    async def condition(self, key: NamespacedName, uid: str, status: str, reason: str, message: str,
                        since: str | None = None) -> None: ...


@dataclass(frozen=True)
class GangWait:
    """A gang that waits for other controllers' gates: why (one line naming the members
    and their gates), and the members draco gates, each to be told."""

    why: str
    told: tuple[Pod, ...]


class GateWaits:
    """Tells pods that wait for another controller's gate, once per message.

    `reported` is the controller's map of the last False condition per pod, shared on
    purpose: a pod has one `DracoAllocation` condition whoever wrote it, so a later
    allocation turns it True and a repeated wait is not told twice."""

    def __init__(self, reports: PodTeller, reported: dict[NamespacedName, Reported], gate: str,
                 act_beside: frozenset[str], clock: Callable[[], datetime],
                 monotonic: Callable[[], float]) -> None:
        self.reports = reports
        self.reported = reported
        self.gate = gate
        self.act_beside = act_beside
        self.clock = clock
        self.monotonic = monotonic
        # Pods told to wait: None while another gate is on, then when the last one left.
        # The allocation's duration (`draco_allocation_duration_seconds`) counts from there,
        # so a plain pod queued in Kueue for an hour is not an hour of draco's time.
        self.waited: dict[NamespacedName, datetime | None] = {}

    async def tell(self, key: NamespacedName, uid: str, why: str) -> None:
        """The pod waits for another controller's gate: the condition False and a Normal
        Event (waiting is no fault), once per message; the condition turns True when the
        pod is allocated later."""
        self.waited[key] = None
        old = self.reported.get(key)
        message = (f"{why}: another controller decides first; draco allocates once only "
                   f"its gate {self.gate} remains")
        if old is not None and old.uid == uid and old.reason == GATE_WAIT and old.message == message:
            return
        since = old.since if old is not None and old.uid == uid else rfc3339(self.clock())
        self.reported[key] = Reported(uid, GATE_WAIT, message, since, self.monotonic())
        log.info("waiting for another controller's gate", kind="Pod", namespace=key.namespace,
                 name=key.name, message=message)
        await self.reports.event(key, uid, GATE_WAIT, message)
        await self.reports.condition(key, uid, "False", GATE_WAIT, message, since)

    def actionable(self, key: NamespacedName) -> None:
        """The pod no longer waits for another gate: the moment draco's part starts."""
        if key in self.waited and self.waited[key] is None:
            self.waited[key] = self.clock()

    def started(self, pod: Pod) -> datetime | None:
        """When draco's part for POD began: when its other gates left, for a pod that
        waited for them, else its creation. Forgets the pod's wait."""
        return self.waited.pop(pod.meta.key, None) or pod.meta.creation_timestamp

    def forget(self, key: NamespacedName) -> None:
        self.waited.pop(key, None)

    def gang_wait(self, kind: str, label: str, members: Iterable[Pod | None]) -> GangWait | None:
        """Whether a member of the gang (KIND LABEL) still carries another controller's
        gate; then the whole gang waits. A gang is placed jointly, so a member whose
        admission or node assignment is still to come would be placed blind. Members
        gone, finished, being deleted or bound count for nothing."""
        waiting: list[tuple[str, tuple[str, ...]]] = []
        told: list[Pod] = []
        for pod in members:
            if pod is None or pod.terminal or pod.meta.deleting or pod.node_name:
                continue
            others = other_gates(pod.scheduling_gates, self.gate, self.act_beside)
            if others:
                waiting.append((f"{pod.meta.namespace}/{pod.meta.name}", others))
            if pod.has_gate(self.gate):
                told.append(pod)
        if not waiting:
            return None
        shown = "; ".join(f"member {who} is {waiting_for(gates)}" for who, gates in waiting[:3])
        more = f"; and {len(waiting) - 3} more members" if len(waiting) > 3 else ""
        return GangWait(f"{kind} {label} waits: {shown}{more}", tuple(told))


__all__ = ["GATE_WAIT", "GangWait", "GateWaits", "PodTeller"]
