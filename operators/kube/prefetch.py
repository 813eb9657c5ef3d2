"""The first lists of `draco run`, asked for while the process is still starting.

At a big cluster's scale the first pod list is the longest step of a start: measured on
a real 1.34 cluster with 20,000 pods, the API server took about 3 s to answer it, while
draco spent about 5 s importing its modules and starting kopf before it even asked.
Asked for at once, in threads of their own (the wait is the API server's work, not
ours), the answers are ready by the time the feeds want them, and a start with 20,000
pods takes about as long as one with none.

Only a first page, from the watch cache (resourceVersion=0), exactly as the feed itself
would ask; the feed takes it once, and anything wrong with it (an error status, a
failure to connect or to load the credentials) makes the feed list as it always does,
reporting the error then. Nothing here decides anything.
"""

from __future__ import annotations

import asyncio
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass, field

PAGE_SIZE = 500
WAIT = 60.0  # seconds a feed waits for an answer asked for earlier, then asks itself


def first_page_query(page_size: int = PAGE_SIZE) -> str:
    return f"limit={page_size}&resourceVersion=0"


# the collections draco lists itself (kube/list_watch.py); here so that starting the
# prefetch imports nothing heavy
PATHS = {
    "Pod": "/api/v1/pods",
    "ResourceClaim": "/apis/resource.k8s.io/v1/resourceclaims",
    "ResourceSlice": "/apis/resource.k8s.io/v1/resourceslices",
}


@dataclass
class _Pending:
    done: threading.Event = field(default_factory=threading.Event)
    host: str = ""
    body: bytes | None = None


_pending: dict[str, _Pending] = {}
_guard = threading.Lock()


def start(paths: list[str]) -> None:
    """Ask for the first page of each collection in `paths`, each in a daemon thread."""
    with _guard:
        fresh = {p: _Pending() for p in paths if p not in _pending}
        _pending.update(fresh)
    for path, pending in fresh.items():
        threading.Thread(target=_fetch, args=(path, pending), name=f"draco-prefetch{path}",
                         daemon=True).start()


def _fetch(path: str, pending: _Pending) -> None:
    try:
        from operators.kube.client import Credentials

        creds = Credentials.load()
        pending.host = creds.host
        request = urllib.request.Request(f"{creds.host}{path}?{first_page_query()}",
                                         headers={**creds.headers, "Accept": "application/json"})
        context = creds.ssl if not isinstance(creds.ssl, bool) else None
        with urllib.request.urlopen(request, timeout=WAIT, context=context) as resp:
            pending.body = resp.read()  # a status other than 200 raises: the feed asks again
    except Exception:  # noqa: BLE001 - the feed's own list reports what is wrong
        pending.body = None
    finally:
        pending.done.set()


async def take(path: str, host: str) -> bytes | None:
    """The first page asked for earlier of `host`'s `path`, once; None when none was
    asked for, it failed, or it came from another server."""
    with _guard:
        pending = _pending.pop(path, None)
    if pending is None:
        return None
    if not pending.done.is_set():
        await asyncio.to_thread(pending.done.wait, WAIT)
    return pending.body if pending.host == host else None


def forget() -> None:
    """Drop every answer not taken (tests; a process that will not use them)."""
    with _guard:
        _pending.clear()


__all__ = ["PATHS", "first_page_query", "forget", "start", "take"]
