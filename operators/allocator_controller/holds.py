"""Devices promised to claims whose allocation is being written but not yet seen back.

Between the allocator's decision and the watch event that shows the claim allocated,
the tracker still counts the devices as free; a second pod decided in that window
would get the same device. A hold closes the window: it is taken at decision time
(before any write), counted as "in use" by every later decision, and released when

- the tracker shows the claim allocated (by anyone: from then on the tracker itself
  counts what it holds), or the claim gone or replaced (another UID);
- the write failed or was abandoned (the caller releases it);
- a successful write is still not confirmed `ttl` seconds later (a watch event lost
  across a re-list): a backstop, so a missed event cannot leak devices forever.

Kept beside the allocator rather than in the shared tracker: the allocator is the one
reader, and a hold is a promise of this process, not cluster state. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass

from operators.model import DeviceID, NamespacedName, ResourceClaim
from operators.model.quantity import Quantity

DEFAULT_TTL = 60.0


@dataclass
class Hold:
    uid: str
    devices: frozenset[DeviceID]
    written_at: float | None = None  # monotonic seconds once the write succeeded
    # KEP-5075 shares: a share holds capacity, not the device (others may share it too)
    shares: tuple[tuple[DeviceID, tuple[tuple[str, Quantity], ...]], ...] = ()


class Holds:
    def __init__(self, ttl: float = DEFAULT_TTL) -> None:
        self.ttl = ttl
        self._by_claim: dict[NamespacedName, Hold] = {}
        self._devices: dict[DeviceID, NamespacedName] = {}
        # Every decision asks for the next expiry, the expired holds and the shares; with
        # a thousand pods in flight a scan of every hold each time was the allocator's
        # largest cost. The soonest expiry is kept (early, never late: a hold released
        # before it costs one scan when it comes), and the claims holding shares apart.
        self._soonest: float | None = None
        self._shared: set[NamespacedName] = set()

    def __len__(self) -> int:
        return len(self._by_claim)

    def __contains__(self, key: object) -> bool:
        return key in self._by_claim

    def devices(self) -> frozenset[DeviceID]:
        return frozenset(self._devices)

    def holds_device(self, device: DeviceID) -> bool:
        return device in self._devices

    def hold(self, key: NamespacedName, uid: str, devices: Iterable[DeviceID],
             shares: Iterable[tuple[DeviceID, tuple[tuple[str, Quantity], ...]]] = ()) -> None:
        self.release(key)
        held = frozenset(devices)
        hold = self._by_claim[key] = Hold(uid, held, shares=tuple(shares))
        if hold.shares:
            self._shared.add(key)
        for d in held:
            self._devices[d] = key

    def written(self, key: NamespacedName, now: float) -> None:
        """The write succeeded: the hold now waits for the watch event (or the ttl)."""
        found = self._by_claim.get(key)
        if found is not None:
            found.written_at = now
            due = now + self.ttl
            self._soonest = due if self._soonest is None else min(self._soonest, due)

    def written_at(self, key: NamespacedName) -> float | None:
        found = self._by_claim.get(key)
        return None if found is None else found.written_at

    def release(self, key: NamespacedName) -> bool:
        found = self._by_claim.pop(key, None)
        if found is None:
            return False
        self._shared.discard(key)
        for d in found.devices:
            if self._devices.get(d) == key:
                del self._devices[d]
        return True

    def settle(self, key: NamespacedName, claim: ResourceClaim | None) -> bool:
        """Release the claim's hold when the tracker's copy makes it moot; True if released."""
        found = self._by_claim.get(key)
        if found is None:
            return False
        if claim is None or claim.meta.uid != found.uid or claim.allocation is not None:
            return self.release(key)
        return False

    def expire(self, now: float) -> list[NamespacedName]:
        """Release written holds older than the ttl; returns their claims."""
        if self._soonest is None or now <= self._soonest:
            return []
        old = [k for k, h in self._by_claim.items()
               if h.written_at is not None and now - h.written_at > self.ttl]
        for k in old:
            self.release(k)
        times = [h.written_at for h in self._by_claim.values() if h.written_at is not None]
        self._soonest = min(times) + self.ttl if times else None
        return old

    def shares(self) -> Iterator[tuple[DeviceID, tuple[tuple[str, Quantity], ...]]]:
        """The shares decided but not yet seen back."""
        for key in self._shared:
            yield from self._by_claim[key].shares

    def next_expiry(self) -> float | None:
        """When the next written hold may expire (possibly earlier: see _soonest)."""
        return self._soonest


class InUse(Collection[DeviceID]):
    """Devices allocated (a set kept up to date by the caller) or held: what a decision
    must not take. A view, not a copy: building a union per decision would cost as much
    as the decision itself on a large cluster."""

    def __init__(self, allocated: Collection[DeviceID], holds: Holds) -> None:
        self.allocated = allocated
        self.holds = holds

    def __contains__(self, device: object) -> bool:
        return device in self.allocated or (isinstance(device, DeviceID) and self.holds.holds_device(device))

    def __iter__(self) -> Iterator[DeviceID]:
        yield from self.allocated
        yield from (d for d in self.holds.devices() if d not in self.allocated)

    def __len__(self) -> int:
        return sum(1 for _ in self)


__all__ = ["DEFAULT_TTL", "Hold", "Holds", "InUse"]
