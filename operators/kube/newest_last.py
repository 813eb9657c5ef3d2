"""Writes of one object's state from concurrent tasks: one at a time per object, the
newest last, a superseded one never.

A controller decides from many tasks at once, and each decision writes what it decided
(a pod's condition, a Gang's status). Sent as they come, an older write can land after a
newer one and leave the object a decision behind (found by the hostile-object run). Here
a write that arrives while another for the same key is in flight only replaces what is
queued; the writer in flight sends the newest once its own is done.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class NewestLast(Generic[K, V]):
    """WRITE(key, value) per key in order; MERGE(queued, newer) folds a superseded value
    into the newer one (default: the newer alone). Nothing is kept once written."""

    def __init__(self, write: Callable[[K, V], Awaitable[None]],
                 merge: Callable[[V, V], V] | None = None) -> None:
        self.write = write
        self.merge = merge
        self.latest: dict[K, V] = {}  # queued, not yet written
        self.writing: set[K] = set()  # keys with a write in flight

    async def submit(self, key: K, value: V) -> None:
        queued = self.latest.get(key)
        self.latest[key] = value if queued is None or self.merge is None else self.merge(queued, value)
        if key in self.writing:
            return  # the write in flight for this key writes this one after its own
        self.writing.add(key)
        try:
            while key in self.latest:
                await self.write(key, self.latest.pop(key))
        except BaseException:  # cancelled (shutting down): nothing is left waiting
            self.latest.pop(key, None)
            raise
        finally:
            self.writing.discard(key)


def compose_merge_patches(first: dict[str, Any], then: dict[str, Any]) -> dict[str, Any]:
    """One JSON merge patch (RFC 7386) doing what FIRST and then THEN do: a superseded
    merge patch may set keys the newer one leaves out (a Gang's domain, set when it was
    placed and not repeated after), so skipping it must keep them."""
    out = dict(first)
    for key, value in then.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = compose_merge_patches(out[key], value)
        else:
            out[key] = value
    return out


__all__ = ["NewestLast", "compose_merge_patches"]
