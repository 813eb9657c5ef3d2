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

Mixed into AllocatorController, like the gang and preemption parts.
"""

from __future__ import annotations

import structlog

from operators.allocator.gang_loop import GangWork
from operators.allocator.gang_members import GangView
from operators.kube.conditions import rfc3339
from operators.kube.pod_reports import Reported
from operators.model import NamespacedName, Pod
from operators.model.gates import other_gates, waiting_for

log = structlog.get_logger("draco.allocator")

GATE_WAIT = "WaitingForGate"


class GateWork(GangWork):
    """Mixed into AllocatorController before the gang part, whose hook it answers (which
    provides the rest, as for GangWork)."""

    reported: dict[NamespacedName, Reported]

    async def _gate_wait(self, key: NamespacedName, uid: str, why: str) -> None:
        """The pod waits for another controller's gate: the condition False and a Normal
        Event (waiting is no fault), once per message; the condition turns True when the
        pod is allocated later."""
        old = self.reported.get(key)
        message = (f"{why}: another controller decides first; draco allocates once only "
                   f"its gate {self.settings.gate} remains")
        if old is not None and old.uid == uid and old.reason == GATE_WAIT and old.message == message:
            return
        since = old.since if old is not None and old.uid == uid else rfc3339(self.clock())
        self.reported[key] = Reported(uid, GATE_WAIT, message, since, self.monotonic())
        log.info("waiting for another controller's gate", kind="Pod", namespace=key.namespace,
                 name=key.name, message=message)
        await self.reports.event(key, uid, GATE_WAIT, message)
        await self.reports.condition(key, uid, "False", GATE_WAIT, message, since)

    def _gang_waits_for_gates(self, view: GangView) -> bool:
        """Whether a member of the gang still carries another controller's gate; then the
        whole gang waits (nothing placed, nothing reserved) and each member draco gates is
        told which member waits for which gate. A gang is placed jointly, so a member whose
        admission or node assignment is still to come would be placed blind."""
        waiting: list[tuple[str, tuple[str, ...]]] = []
        gated: list[Pod] = []
        for pkey in sorted(self.gang_members.pods.get(view.key, ())):
            pod = self.tracker.pod(pkey)
            if pod is None or pod.terminal or pod.meta.deleting or pod.node_name:
                continue
            others = other_gates(pod.scheduling_gates, self.settings.gate, self.settings.act_beside)
            if others:
                waiting.append((f"{pkey.namespace}/{pkey.name}", others))
            if pod.has_gate(self.settings.gate):
                gated.append(pod)
        if not waiting:
            return False
        self._unreserve(view.key)
        self.gang_waiting.discard(view.key)  # the members' gate removals wake it
        shown = "; ".join(f"member {label} is {waiting_for(gates)}" for label, gates in waiting[:3])
        more = f"; and {len(waiting) - 3} more members" if len(waiting) > 3 else ""
        kind = view.gang.kind if view.gang is not None else view.key[0]
        why = f"{kind} {view.label} waits: {shown}{more}"
        for pod in gated:
            self.unsatisfied.pop(pod.meta.key, None)
            self._spawn(pod.meta.key, self._gate_wait(pod.meta.key, pod.meta.uid, why))
        self._gang_write_status(view, None, GATE_WAIT)
        return True


__all__ = ["GATE_WAIT", "GateWork"]
