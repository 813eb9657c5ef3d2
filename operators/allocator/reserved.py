"""Devices a decision must not take: those in use, plus those set aside for others
(waiting gangs' reservations, nominated preemptors' promises). A view over both rather
than a union, so it costs nothing per decision. The victim search recognises it:
victims free what claims hold, never what is set aside on top. Pure.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator

from operators.model import DeviceID


class Reserved(Collection[DeviceID]):
    """In use, plus what waiting gangs reserve (or nominations promise) away from the pod
    being decided."""

    def __init__(self, base: Collection[DeviceID], extra: frozenset[DeviceID]) -> None:
        self.base, self.extra = base, extra

    def __contains__(self, device: object) -> bool:
        return device in self.extra or device in self.base

    def __iter__(self) -> Iterator[DeviceID]:
        yield from self.base
        yield from (d for d in self.extra if d not in self.base)

    def __len__(self) -> int:
        return sum(1 for _ in self)


__all__ = ["Reserved"]
