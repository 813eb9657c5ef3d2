"""One API rate limit for the whole operator process, however many controllers write.

Every controller builds its own `KubeClient` (its own connection pool, closed on its
own cleanup), but they all draw tokens from one bucket per QPS/burst setting, so
`draco run --qps 200` means 200 requests a second for the process, as with one
client-go rest.Config, not 200 for each controller.

Buckets are kept per running event loop: an asyncio lock belongs to one loop, and
tests and benchmarks start operators in threads with loops of their own. `draco run`
has one loop, hence one bucket.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from typing import Any

from operators.kube.client import DEFAULT_BURST, DEFAULT_QPS, Credentials, KubeClient, RateLimiter


class SharedRateLimiter(RateLimiter):
    """A `RateLimiter` whose tokens are shared by every client that holds it."""

    def __init__(self, qps: float, burst: int) -> None:
        super().__init__(qps, burst)
        self._buckets: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, RateLimiter] = (
            weakref.WeakKeyDictionary())
        self._guard = threading.Lock()

    def bucket(self) -> RateLimiter:
        """The running loop's bucket (created on first use)."""
        loop = asyncio.get_running_loop()
        with self._guard:
            found = self._buckets.get(loop)
            if found is None:
                found = self._buckets[loop] = RateLimiter(self.qps, self.burst)
            return found

    async def take(self) -> None:
        if self.qps <= 0:
            return
        await self.bucket().take()


_limiters: dict[tuple[float, int, str], SharedRateLimiter] = {}
_limiters_guard = threading.Lock()


def process_limiter(qps: float = DEFAULT_QPS, burst: int = DEFAULT_BURST,
                    purpose: str = "writes") -> SharedRateLimiter:
    """The process's limiter for these settings and PURPOSE (the same object on every
    call): "writes" for the controllers' requests, "events" for their Events."""
    key = (float(qps), int(burst), purpose)
    with _limiters_guard:
        found = _limiters.get(key)
        if found is None:
            found = _limiters[key] = SharedRateLimiter(key[0], key[1])
        return found


def events_limiter(limiter: RateLimiter) -> RateLimiter:
    """The bucket for the Events of a client drawing from LIMITER: as large, but apart,
    as kube-scheduler's event client is apart from its main client; process-wide when
    LIMITER is."""
    if isinstance(limiter, SharedRateLimiter):
        return process_limiter(limiter.qps, limiter.burst, "events")
    return RateLimiter(limiter.qps, limiter.burst)


def shared_client(
    qps: float = DEFAULT_QPS,
    burst: int = DEFAULT_BURST,
    credentials: Credentials | None = None,
    **options: Any,
) -> KubeClient:
    """A client of its own whose requests count against the process-wide rate limit.

    `options` are `KubeClient`'s other keywords (`retries`, `timeout`).
    """
    client = KubeClient(credentials, qps=qps, burst=burst, **options)
    client.limiter = process_limiter(qps, burst)
    return client


__all__ = ["SharedRateLimiter", "events_limiter", "process_limiter", "shared_client"]
