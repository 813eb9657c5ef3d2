"""When a Ready Workload's pods arrive, their claims get exactly the reserved devices.

The devices are kept in the allocator's `Holds` (the allocator controller's, attached
when both run in one draco; an own one otherwise), which every allocation of that
draco counts as in use:
- each reservation is held under the key `NS/workload:NAME` (no claim can be named so),
  so no single pod and no gang takes its devices;
- a gated pod of the Workload (the annotation `resource.draco.dev/workload` from the
  check's podSetUpdates, Kueue's PodSet label, every claim existing) takes one reserved
  pod index (`admission.arrival`). Its claims' devices move from the Workload's hold to
  holds on the claims themselves at once, in the tracker notification that showed the
  pod or its last claim, before any controller's next pass: the allocator skips a pod
  whose claims are held (a write of its own not seen back yet), so it never allocates
  such a pod another way. The claims are then written as the allocator writes them
  (`claim_writer.write_claim`); the tracker's view of them settles the holds, and the
  narrowing controller ungates the pod as for any pod draco allocated.
A pod the reservation has no room for (more pods than reserved, no index on its TAS
node) is left to the allocator, which decides it as any gated pod.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import structlog

from operators.admission.arrival import arrival, workload_of
from operators.admission.reservation import Reservations
from operators.allocator.pod_claims import GATE, Work, pod_work
from operators.allocator_controller.claim_writer import pod_reference, write_claim
from operators.allocator_controller.holds import Holds
from operators.model import DeviceID, NamespacedName
from operators.tracker import Change, Tracker

log = structlog.get_logger("draco.admission")

HOLD_PREFIX = "workload:"


def hold_key(workload: NamespacedName) -> NamespacedName:
    return NamespacedName(workload.namespace, f"{HOLD_PREFIX}{workload.name}")


def _devices(allocation: Mapping[str, Any]) -> list[DeviceID]:
    results = (allocation.get("devices") or {}).get("results") or []
    return [DeviceID(str(r["driver"]), str(r["pool"]), str(r["device"])) for r in results
            if isinstance(r, Mapping) and not r.get("adminAccess") and not r.get("shareID")]


@dataclass(frozen=True, slots=True)
class Arrival:
    workload: NamespacedName
    work: Work
    allocations: Mapping[str, Mapping[str, Any]]  # claim name -> status.allocation


class Arrivals:
    """The devices check's collaborator for pods that come: holds and claim writes."""

    def __init__(self, tracker: Tracker, reservations: Reservations, clock: Callable[[], datetime],
                 monotonic: Callable[[], float], gate: str = GATE,
                 act_beside: frozenset[str] = frozenset()) -> None:
        self.tracker = tracker
        self.reservations = reservations
        self.clock = clock
        self.monotonic = monotonic
        self.gate = gate
        self.act_beside = act_beside
        self.holds = Holds()
        self.moved: dict[NamespacedName, set[DeviceID]] = {}  # per Workload: given to its pods
        self.queue: dict[NamespacedName, Arrival] = {}  # pod -> its claims to write
        self.written = 0

    def attach(self, holds: Holds) -> None:
        """Share the allocator controller's holds (what its decisions count as in use)."""
        for key, _ in self.reservations.items():
            self.holds.release(hold_key(key))
        self.holds = holds
        for key, _ in self.reservations.items():
            self.mirror(key)

    def mirror(self, key: NamespacedName) -> None:
        """Hold what the Workload's reservation keeps and no pod of it was given yet."""
        r = self.reservations.get(key)
        if r is None:
            self.forget(key)
            return
        moved = self.moved.get(key, set())
        keep = [d for d in r.devices if d not in moved and not self._allocated(d)]
        if keep:
            self.holds.hold(hold_key(key), "", keep)
        else:
            self.holds.release(hold_key(key))

    def forget(self, key: NamespacedName) -> None:
        self.holds.release(hold_key(key))
        self.moved.pop(key, None)

    def _allocated(self, device: DeviceID) -> bool:
        return any(not a.admin_access and not a.share_id for a in self.tracker.allocations(device))

    def _held_by_other(self, device: DeviceID, own: NamespacedName) -> bool:
        return self._allocated(device) or (self.holds.holds_device(device)
                                           and device not in self._hold_devices(own))

    def _hold_devices(self, key: NamespacedName) -> frozenset[DeviceID]:
        r = self.reservations.get(key)
        return r.devices - frozenset(self.moved.get(key, ())) if r is not None else frozenset()

    # -- what the tracker tells

    def on_change(self, change: Change) -> bool:
        """Pods that came (or whose claims did): their claims are held at once. True when
        there are claims to write."""
        for ckey in change.claims:
            self.holds.settle(ckey, self.tracker.claim(ckey))
        if not len(self.reservations):
            return False
        pods: set[NamespacedName] = set(change.pods)
        for ckey in change.claims:
            pods.update(self.tracker.pods_of_claim(ckey))
        found = False
        for pkey in sorted(pods):
            found = self.arrive(pkey) or found
        return found

    def arrive(self, pkey: NamespacedName) -> bool:
        pod = self.tracker.pod(pkey)
        wkey = workload_of(pod) if pod is not None else None
        r = self.reservations.get(wkey) if wkey is not None else None
        if r is None or wkey is None or pod is None or pkey in self.queue:
            return False
        work = pod_work(self.tracker, pkey, self.gate, self.clock(), beside=self.act_beside)
        if not isinstance(work, Work) or not work.pending:
            return False
        if any(c.meta.key in self.holds for c in work.pending):
            return False  # decided already, not seen back yet
        own: NamespacedName = wkey
        answer = arrival(r, pod, lambda d: self._held_by_other(d, own))
        if isinstance(answer, str):
            log.info("a pod of the Workload finds no reservation left; the allocator decides it",
                     kind="Pod", namespace=pkey.namespace, name=pkey.name, workload=wkey.name, why=answer)
            return False
        allocations = {c.name: answer[c.name] for c in work.pending if c.name in answer}
        if len(allocations) != len(work.pending):
            return False
        given = {d for a in allocations.values() for d in _devices(a)}
        self.moved.setdefault(wkey, set()).update(given)
        self.mirror(wkey)
        for claim in work.pending:
            self.holds.hold(claim.meta.key, claim.meta.uid, _devices(allocations[claim.name]))
        self.queue[pkey] = Arrival(wkey, work, allocations)
        return True

    # -- the writes

    def take(self) -> list[tuple[NamespacedName, Arrival]]:
        out = sorted(self.queue.items())
        self.queue.clear()
        return out

    async def write(self, client: Any, pkey: NamespacedName, a: Arrival) -> bool:
        """Each claim allocated with its reserved devices and reserved for the pod; on a
        refusal the pod's holds go and its devices return to the Workload's hold (the
        pod is then the allocator's, or comes again with its next event)."""
        work = a.work
        ref = pod_reference(work.pod.meta.name, work.uid)
        for claim in work.pending:
            ckey = claim.meta.key
            allocation = dict(a.allocations[claim.name])
            devices = _devices(allocation)
            result = await write_claim(
                client, ckey, claim.meta.uid, ref, allocation,
                owner=work.uid if claim.name in work.generated else None,
                still_free=lambda ckey=ckey, devices=devices: self._still_free(ckey, devices),  # type: ignore[misc]
                resource_version=claim.meta.resource_version)
            if not result.ok:
                log.warning("cannot write the reserved devices to the claim", kind="ResourceClaim",
                            namespace=ckey.namespace, name=ckey.name, outcome=result.outcome,
                            why=result.message)
                self.undo(a)
                return False
            self.holds.written(ckey, self.monotonic())
        for claim in work.reserve:
            await write_claim(client, claim.meta.key, claim.meta.uid, ref, None)
        self.written += 1
        log.info("a pod of the Workload got its reserved devices", kind="Pod", namespace=pkey.namespace,
                 name=pkey.name, workload=a.workload.name, claims=sorted(a.allocations))
        return True

    def _still_free(self, ckey: NamespacedName, devices: Iterable[DeviceID]) -> bool:
        return not any(x.claim != ckey and not x.admin_access and not x.share_id
                       for d in devices for x in self.tracker.allocations(d))

    def undo(self, a: Arrival) -> None:
        for claim in a.work.pending:
            if self.holds.written_at(claim.meta.key) is None:
                self.holds.release(claim.meta.key)
        given = {d for al in a.allocations.values() for d in _devices(al)}
        self.moved.get(a.workload, set()).difference_update(given)
        self.mirror(a.workload)


__all__ = ["HOLD_PREFIX", "Arrival", "Arrivals", "hold_key"]
