"""What other claims hold, as the allocator's decisions count it: devices allocated whole,
shares of multi-allocatable devices, and this process's holds (`holds`).

Recomputing what the tracker shows taken for every decision would cost a walk over every
allocation of the cluster per pod; instead the set is built once and kept up to date from
the tracker's allocation changes (a device taken or freed), and the shares are rebuilt
only after an allocation changed.
"""

from __future__ import annotations

from collections.abc import Iterable

from operators.allocator.allocate import in_use_from_tracker, shares_from_tracker
from operators.allocator.capacity import Shares
from operators.allocator_controller.holds import Holds, InUse
from operators.model import DeviceID, NamespacedName
from operators.tracker import Tracker


class Taken:
    def __init__(self, tracker: Tracker, holds: Holds) -> None:
        self.tracker = tracker
        self.holds = holds
        self._whole: set[DeviceID] | None = None  # devices the tracker counts as taken
        self._shares: Shares | None = None  # shares of multi-allocatable devices

    def reset(self) -> None:
        """Forget everything (a resync): rebuilt from the tracker when next asked."""
        self._whole = None
        self._shares = None

    def allocations_changed(self, devices: Iterable[DeviceID]) -> bool:
        """The tracker's allocation of DEVICES changed; whether any of them was freed
        (taking a device helps no waiting pod, freeing one may)."""
        freed = False
        self._shares = None
        for d in devices:
            taken = self.tracker.is_allocated(d)
            freed = freed or not taken
            if self._whole is not None:
                if taken:
                    self._whole.add(d)
                else:
                    self._whole.discard(d)
        return freed

    def in_use(self) -> InUse:
        if self._whole is None:
            self._whole = set(in_use_from_tracker(self.tracker))
        return InUse(self._whole, self.holds)

    def shares(self) -> Shares:
        """What other claims' shares of multi-allocatable devices consume: those the
        tracker shows, plus those decided here and not yet seen back (held)."""
        if self._shares is None:
            self._shares = shares_from_tracker(self.tracker)
        held = list(self.holds.shares())
        if not held:
            return self._shares
        out = Shares({d: dict(c) for d, c in self._shares.held.items()})
        for device, consumed in held:
            out.add(device, consumed)
        return out

    def still_free(self, claim: NamespacedName, devices: Iterable[DeviceID]) -> bool:
        """No other claim holds any of the devices whole in the tracker's view right now
        (shares of a multi-allocatable device leave it to others; the decision's hold
        kept other decisions of this process off it until the write is seen back)."""
        return not any(a.claim != claim and not a.admin_access and not a.share_id
                       for d in devices for a in self.tracker.allocations(d))


__all__ = ["Taken"]
