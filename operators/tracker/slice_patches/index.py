"""The incremental index: which patch matches which device, and where selectors failed.

Kept both ways (patch -> devices, device -> patches) so that a patch event touches only
that patch's entries and a device event only that device's: a slice update re-checks
its devices against every patch, a patch update only that patch's candidates.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from operators.model import Device, DeviceID
from operators.tracker.slice_patches.match import Failure

P = TypeVar("P")
Checked = tuple[bool, Failure | None]  # (matches, the patch's selector failure)


class MatchIndex:
    """The dicts are read directly by the overlay; update them only through the methods."""

    __slots__ = ("matched", "failures", "by_device")

    def __init__(self) -> None:
        self.matched: dict[str, set[DeviceID]] = {}
        self.failures: dict[str, dict[DeviceID, Failure]] = {}
        self.by_device: dict[DeviceID, set[str]] = {}

    def set_patch(
        self, name: str, new: set[DeviceID], failures: dict[DeviceID, Failure]
    ) -> set[DeviceID]:
        """Record a whole patch's evaluation; returns the devices it matched before."""
        old = self.matched.get(name, set())
        for did in old - new:
            self._unlink(did, name)
        by_device = self.by_device
        for did in new - old:
            by_device.setdefault(did, set()).add(name)
        self.matched[name] = new
        if failures:
            self.failures[name] = failures
        else:
            self.failures.pop(name, None)
        return old

    def remove_patch(self, name: str) -> set[DeviceID]:
        """Forget a patch; returns the devices it matched."""
        matched = self.matched.pop(name, set())
        self.failures.pop(name, None)
        for did in matched:
            self._unlink(did, name)
        return matched

    def set_device(
        self, dev: Device, patches: Iterable[tuple[str, P]], check: Callable[[P, Device], Checked]
    ) -> bool:
        """Re-check one device against every patch (`check(patch, dev)`) and record the
        verdicts; True if it matched any patch before or after (a modified device may
        change its published attributes even when the set of matching patches is the
        same, so its view needs recomposing)."""
        did = dev.id
        before = self.by_device.get(did, set())
        after: set[str] = set()
        matched_by, failures = self.matched, self.failures
        for name, patch in patches:
            ok, failure = check(patch, dev)
            if ok:
                after.add(name)
                matched_by.setdefault(name, set()).add(did)
            else:
                matched = matched_by.get(name)
                if matched is not None:
                    matched.discard(did)
            failed = failures.get(name)
            if failure is not None:
                if failed is None:
                    failed = failures[name] = {}
                failed[did] = failure
            elif failed is not None and did in failed:
                del failed[did]
                if not failed:
                    del failures[name]
        if after:
            self.by_device[did] = after
        else:
            self.by_device.pop(did, None)
        return bool(before or after)

    def forget_device(self, did: DeviceID) -> bool:
        """A device left the universe; True if any patch matched it."""
        names = self.by_device.pop(did, None)
        for name in names or ():
            matched = self.matched.get(name)
            if matched is not None:
                matched.discard(did)
        for name in list(self.failures):
            failed = self.failures[name]
            if failed.pop(did, None) is not None and not failed:
                del self.failures[name]
        return bool(names)

    def _unlink(self, did: DeviceID, name: str) -> None:
        names = self.by_device.get(did)
        if names is not None:
            names.discard(name)
            if not names:
                del self.by_device[did]


__all__ = ["Checked", "MatchIndex"]
