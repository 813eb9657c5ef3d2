"""Counter bookkeeping for one allocation attempt (KEP-4815 partitionable devices).

Per pool with counter sets: what is left of each counter once the devices allocated
already (other claims, held decisions) are charged what their ResourceSlice says they
consume, and what the devices picked so far in this attempt consume on top. A device
that consumes counters is taken only while, afterwards, no counter of its pool is
over-committed. As upstream, the check covers every counter of the pool, not only the
device's own: a pool some counter of which is already over-committed (a driver that
shrank a counter under allocated partitions) hands out none of its partitions.

Kept incremental: a count of over-committed counters per pool, updated only for the
counters a device touches, so a pool of a thousand counter sets costs per candidate
what the candidate consumes, not what the pool declares.
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from fractions import Fraction

from operators.allocator.inventory import Candidate, PoolCandidates
from operators.model import CounterConsumption, DeviceID, PoolID

Key = tuple[str, str]  # (counter set, counter)


class Ledger:
    def __init__(self, pools: Iterable[PoolCandidates], charged: Container[DeviceID]) -> None:
        """CHARGED: the devices allocated claims hold, whole or shared."""
        self.left: dict[PoolID, dict[Key, Fraction]] = {}
        self.used: dict[PoolID, dict[Key, Fraction]] = {}
        self.over: dict[PoolID, int] = {}
        for p in pools:
            if not p.counter_sets:
                continue
            left = {(s, c): q.value for s, counters in p.counter_sets.items()
                    for c, q in counters.items()}
            for device, consumes in p.consumers:
                if device in charged:
                    for cc in consumes:
                        for c, q in cc.counters.items():
                            k = (cc.counter_set, c)
                            if k in left:
                                left[k] -= q.value
            self.left[p.id] = left
            self.used[p.id] = {}
            self.over[p.id] = sum(1 for v in left.values() if v < 0)

    def take(self, d: Candidate) -> str | None:
        """Charge D's consumption; None when it fits, else the first over-committed
        counter (`set/counter`), with nothing charged."""
        if not d.consumes:
            return None
        pid = PoolID(d.id.driver, d.id.pool)
        if pid not in self.left:
            return "counter sets (the pool declares none)"
        self._charge(pid, d.consumes, 1)
        if self.over[pid] == 0:
            return None
        self._charge(pid, d.consumes, -1)
        return self.first_over(pid, d.consumes) or "a counter of the pool (over-committed already)"

    def release(self, d: Candidate) -> None:
        if d.consumes:
            self._charge(PoolID(d.id.driver, d.id.pool), d.consumes, -1)

    def first_over(self, pid: PoolID, consumes: tuple[CounterConsumption, ...]) -> str:
        """The first counter CONSUMES would over-commit, "" if none."""
        left, used = self.left.get(pid, {}), self.used.get(pid, {})
        for cc in consumes:
            for c, q in cc.counters.items():
                k = (cc.counter_set, c)
                if k in left and used.get(k, 0) + q.value > left[k]:
                    return f"{cc.counter_set}/{c}"
        return ""

    def _charge(self, pid: PoolID, consumes: tuple[CounterConsumption, ...], sign: int) -> None:
        left, used = self.left[pid], self.used[pid]
        for cc in consumes:
            for c, q in cc.counters.items():
                k = (cc.counter_set, c)
                if k not in left:
                    continue  # the pool is invalid then; never reached for a usable pool
                before = used.get(k, 0) > left[k]
                now_used = used.get(k, 0) + sign * q.value
                used[k] = now_used
                after = now_used > left[k]
                self.over[pid] += int(after) - int(before)


__all__ = ["Ledger"]
