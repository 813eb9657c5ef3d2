"""Which pods belong to which gang, and where each gang stands. Tracker reads, no I/O.

`tracker.gangs.GangMembers` indexes which pods belong to which gang; `gang_view`
reads one gang's members through `pod_claims.pod_work`:
- placed: every claim allocated (gated and waiting for the narrowing, or running);
- pending: gated, claims to allocate (`Member.pending`);
- not ready: a claim not generated yet, being deleted, or a failed binding (the
  pod-by-pod path releases those first).
A gang is complete when at least `minCount` members are placed or already let go
(`tracker.gangs.released`: bound without draco's gate, running or finished); the
narrowing controller ungates members of complete gangs only, so no member runs
before the whole gang has its devices, and a gang whose first members finished while
the rest were being ungated stays complete (it is never rolled back under them).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from operators.allocator.pod_claims import GATE, Blocked, Done, NotOurs, Release, Waiting, pod_work
from operators.gangs.gang import Member
from operators.model import NamespacedName, Pod, ResourceClaim
from operators.model.gangs import Gang
from operators.tracker import Tracker
from operators.tracker.gangs import GangKey, GangMembers, GangOverlay, gang_key, released


@dataclass(frozen=True, slots=True)
class GangView:
    key: GangKey
    gang: Gang | None
    members: tuple[Member, ...]  # ready members, placed or pending, by name
    not_ready: tuple[tuple[str, str], ...] = ()  # (NS/NAME, why)
    gated_placed: tuple[NamespacedName, ...] = ()  # placed, still held by draco's gate
    released: int = 0  # let go (bound, no draco gate) and not among MEMBERS: finished, or claims gone

    @property
    def placed(self) -> int:
        return sum(1 for m in self.members if m.placed)

    @property
    def pending(self) -> tuple[Member, ...]:
        return tuple(m for m in self.members if not m.placed)

    @property
    def complete(self) -> bool:
        return self.gang is not None and self.placed + self.released >= self.gang.min_count

    @property
    def partial(self) -> bool:
        """Placed members still held by draco's gate while fewer than minCount members
        are placed or let go: what a killed writer left, or the rest after a member
        went before the gang was released. Theirs are the devices a roll-back frees."""
        return bool(self.gated_placed) and not self.complete

    @property
    def label(self) -> str:
        return f"{self.key[1]}/{self.key[2]}"


def _claims(tracker: Tracker, pod: Pod) -> tuple[ResourceClaim, ...] | None:
    """The pod's claims if every one exists and is allocated, else None."""
    out = []
    for key in pod.claim_keys():
        claim = tracker.claim(key)
        if claim is None or claim.allocation is None:
            return None
        out.append(claim)
    return tuple(out)


def gang_view(tracker: Tracker, gangs: GangOverlay, members: GangMembers, key: GangKey,
              gate: str = GATE, beside: Collection[str] = ()) -> GangView:
    gang = gangs.gang(*key)
    ready: list[Member] = []
    not_ready: list[tuple[str, str]] = []
    gated_placed: list[NamespacedName] = []
    let_go = 0
    for pkey in sorted(members.members(key)):
        pod = tracker.pod(pkey)
        if pod is None:
            continue
        if pod.terminal:
            let_go += released(pod, gate)
            continue
        label = f"{pkey.namespace}/{pkey.name}"
        work = pod_work(tracker, pkey, gate, beside=beside)
        if isinstance(work, NotOurs):
            if pod.meta.deleting:
                continue
            claims = _claims(tracker, pod)
            if claims is None and released(pod, gate):
                let_go += 1  # bound, its claims already gone (it finished; the pod's update lags)
            elif claims is None:
                not_ready.append((label, f"not held by draco's gate ({work.why}) and not allocated"))
            else:
                ready.append(Member(label, pod, (), claims))
        elif isinstance(work, Done):
            ready.append(Member(label, pod, (), _claims(tracker, pod) or ()))
            gated_placed.append(pkey)
        elif isinstance(work, Waiting | Blocked):
            not_ready.append((label, work.why if isinstance(work, Waiting) else work.message))
        elif isinstance(work, Release):
            not_ready.append((label, "a device failed to bind; its claim is released first"))
        else:
            if not work.pending:  # allocated, only to be reserved: placed
                ready.append(Member(label, pod, (), work.allocated))
                gated_placed.append(pkey)
            else:
                ready.append(Member(label, pod, work.pending, work.allocated))
    return GangView(key, gang, tuple(ready), tuple(not_ready), tuple(gated_placed), let_go)


__all__ = ["GangMembers", "GangView", "gang_key", "gang_view"]  # the first two re-exported
