"""The Pod feed: draco's own list+watch of Pods, because most pods are none of its business.

A cluster's pods mostly use no ResourceClaim. Through kopf, each of their watch events
would cost a full JSON decode into dicts, a per-object worker and a per-object memory
kept until the pod is deleted. Here each event is first decoded into a probe that reads
only the few fields deciding whether draco needs the pod (msgspec skips the rest
without building Python objects); only a pod that uses claims, has an extended-resource
claim or carries a scheduling gate is decoded whole and given to the tracker. A plain
pod costs one probe per event and nothing in memory.

Informer semantics: a paginated list, then a watch from the list's resourceVersion with
bookmarks; the watch resumes from the last resourceVersion seen, and an expired one
(410) means a fresh list, after which pods the tracker holds but the list no longer
has are removed. Failures back off (1, 2, 4 … 30 s) and show in the initial-sync gate
while the first list has not succeeded. One bad event is one logged, counted error.
"""

from __future__ import annotations

import asyncio
import contextlib
import urllib.parse
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp
import msgspec
import structlog

from operators.kube.client import Credentials
from operators.kube.supervision import guarded, report_error
from operators.model import NamespacedName
from operators.tracker import Tracker

log = structlog.get_logger("draco.feed")

PODS = "/api/v1/pods"
KIND = "Pod"


class _Meta(msgspec.Struct):
    name: str = ""
    namespace: str = ""
    resourceVersion: str = ""  # noqa: N815 - the API's field name


class _Spec(msgspec.Struct):
    resourceClaims: msgspec.Raw = msgspec.Raw()  # noqa: N815 - empty: absent
    schedulingGates: msgspec.Raw = msgspec.Raw()  # noqa: N815


class _Status(msgspec.Struct):
    extendedResourceClaimStatus: msgspec.Raw = msgspec.Raw()  # noqa: N815


class _Probe(msgspec.Struct):
    """The fields of a Pod that say whether draco needs it, and its identity."""

    metadata: _Meta = msgspec.field(default_factory=_Meta)
    spec: _Spec = msgspec.field(default_factory=_Spec)
    status: _Status = msgspec.field(default_factory=_Status)


class _Event(msgspec.Struct):
    type: str = ""
    object: msgspec.Raw = msgspec.Raw(b"null")


class _ListMeta(msgspec.Struct):
    resourceVersion: str = ""  # noqa: N815
    # `continue` is a Python keyword: renamed
    next: str = msgspec.field(default="", name="continue")


class _PodList(msgspec.Struct):
    metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)
    items: list[msgspec.Raw] = msgspec.field(default_factory=list)


class _Status410(msgspec.Struct):
    code: int = 0
    message: str = ""


_probe = msgspec.json.Decoder(_Probe)
_event = msgspec.json.Decoder(_Event)
_page = msgspec.json.Decoder(_PodList)
_status = msgspec.json.Decoder(_Status410)
_whole = msgspec.json.Decoder()
_EMPTY = (b"", b"null", b"[]", b"{}")


def _present(raw: msgspec.Raw) -> bool:
    return bytes(raw) not in _EMPTY


def needed(probe: _Probe) -> bool:
    """Whether draco keeps this pod: it uses claims (directly or through templates),
    got an extended-resource claim, or is held by a scheduling gate (draco's gate may
    be renamed, and a gated pod is short-lived: any gate counts)."""
    return (_present(probe.spec.resourceClaims) or _present(probe.spec.schedulingGates)
            or _present(probe.status.extendedResourceClaimStatus))


class Expired(Exception):
    """The watch's resourceVersion is too old (410): list again."""


class ListFailed(Exception):
    """The list was refused or failed; the message says how (for readiness)."""


class Interrupted(Exception):
    """The watch stream reported an error other than 410: resume after a pause."""


class Gate(Protocol):
    def hold(self, kind: str) -> None: ...
    def release(self, kind: str) -> None: ...
    def failing_list(self, kind: str, why: str | None) -> None: ...


@dataclass
class PodFeedStats:
    """What the feed did, for tests and metrics: probes are cheap, decodes are not."""

    events: int = 0  # watch events and listed items probed
    decoded: int = 0  # of those, decoded whole and given to the tracker
    bad: int = 0  # undecodable events or objects the tracker refused
    lists: int = 0  # full lists (1 + relists after 410)


def backoff(attempt: int) -> float:
    return float(min(30, 2 ** attempt))


class PodFeed:
    """Keeps the tracker's pods equal to the cluster's pods that draco needs."""

    def __init__(self, tracker: Tracker, gate: Gate | None = None, *,
                 credentials: Callable[[], Credentials] = Credentials.load,
                 page_size: int = 500, watch_seconds: int = 300,
                 delay: Callable[[int], float] = backoff) -> None:
        self.tracker = tracker
        self.gate = gate
        self.credentials = credentials
        self.page_size = page_size
        self.watch_seconds = watch_seconds
        self.delay = delay
        self.resource_version = ""
        # the first list may come from the API server's watch cache (resourceVersion=0, as
        # informers do: no etcd read, and served while etcd is slow); after a 410 the
        # list must be consistent, or the feed could step back in time
        self.consistent = False
        self.stats = PodFeedStats()
        self.synced = asyncio.Event()
        if gate is not None:
            gate.hold(KIND)

    # ------------------------------------------------------------------ the loop

    async def run(self) -> None:
        creds = await asyncio.to_thread(self.credentials)
        timeout = aiohttp.ClientTimeout(total=None, connect=30, sock_read=self.watch_seconds + 30)
        async with aiohttp.ClientSession(
                base_url=None, headers={**creds.headers, "Accept": "application/json"},
                connector=aiohttp.TCPConnector(limit=2, ssl=creds.ssl), timeout=timeout) as session:
            attempt = 0
            while True:
                try:
                    if not self.resource_version:
                        await self._list(session, creds.host)
                    attempt = 0
                    await self._watch(session, creds.host)
                except Expired:
                    log.info("pod watch expired; listing again", kind=KIND)
                    self.resource_version = ""
                    self.consistent = True
                    continue
                except ListFailed as err:
                    if self.gate is not None and not self.synced.is_set():
                        self.gate.failing_list(KIND, str(err))
                    log.warning("cannot list pods; retrying", kind=KIND, error=str(err))
                except (Interrupted, aiohttp.ClientError, TimeoutError, OSError) as err:
                    log.warning("pod watch interrupted; resuming", kind=KIND,
                                error=f"{type(err).__name__}: {err}")
                except Exception as err:  # a bug here must not end the feed: counted, retried
                    report_error("feed", KIND, err, kind=KIND)
                await asyncio.sleep(self.delay(attempt))
                attempt += 1

    async def _list(self, session: aiohttp.ClientSession, host: str) -> None:
        log.info("listing pods", kind=KIND, first=not self.synced.is_set())
        listed: set[NamespacedName] = set()
        token = ""
        rv = ""
        while True:
            query = {"limit": str(self.page_size)}
            if token:
                query["continue"] = token
            elif not self.consistent:
                query["resourceVersion"] = "0"
            # a page must come within a minute (the session's read timeout is the watch's,
            # minutes): a list stalled on a server that is still starting is retried
            async with session.get(f"{host}{PODS}?{urllib.parse.urlencode(query)}",
                                   timeout=aiohttp.ClientTimeout(total=60)) as resp:
                raw = await resp.read()
                if resp.status == 410 and token:  # the continue token expired: start over
                    listed.clear()
                    token = ""
                    continue
                if resp.status != 200:
                    raise ListFailed(f"HTTP {resp.status}")
            try:
                page = _page.decode(raw)
            except msgspec.DecodeError as err:
                raise ListFailed(f"the answer is not a pod list: {err}") from None
            for item in page.items:
                key = self.offer("ADDED", item)
                if key is not None:
                    listed.add(key)
            rv = page.metadata.resourceVersion or rv
            token = page.metadata.next
            if not token:
                break
        for pod in [p for p in self.tracker.pods() if p.meta.key not in listed]:
            self._apply("DELETED", pod)  # deleted while draco did not watch
        self.stats.lists += 1
        self.resource_version = rv
        log.info("listed pods", kind=KIND, kept=len(listed), probed=self.stats.events)
        if not self.synced.is_set():
            self.synced.set()
            if self.gate is not None:
                self.gate.failing_list(KIND, None)
                self.gate.release(KIND)

    async def _watch(self, session: aiohttp.ClientSession, host: str) -> None:
        query = {"watch": "1", "allowWatchBookmarks": "true", "resourceVersion": self.resource_version,
                 "timeoutSeconds": str(self.watch_seconds)}
        async with session.get(f"{host}{PODS}?{urllib.parse.urlencode(query)}") as resp:
            if resp.status == 410:
                raise Expired()
            if resp.status != 200:
                raise ListFailed(f"watch answered HTTP {resp.status}")
            async for line in _lines(resp.content.iter_any()):
                self.line(line)

    # ------------------------------------------------------------------ one event

    def line(self, line: bytes) -> None:
        """One line of the watch stream (a JSON watch event)."""
        try:
            event = _event.decode(line)
        except msgspec.DecodeError as err:
            self.stats.bad += 1
            log.error("undecodable pod watch event skipped", kind=KIND, error=str(err))
            return
        if event.type == "ERROR":
            status = _status.decode(event.object) if bytes(event.object) != b"null" else _Status410()
            if status.code == 410:
                raise Expired()
            raise Interrupted(f"watch error {status.code}: {status.message}")
        if event.type == "BOOKMARK":
            with contextlib.suppress(msgspec.DecodeError):
                self.resource_version = _probe.decode(event.object).metadata.resourceVersion \
                    or self.resource_version
            return
        self.offer(event.type, event.object)

    def offer(self, etype: str, raw: msgspec.Raw | bytes) -> NamespacedName | None:
        """Probe one pod; give it to the tracker when draco needs it (or held it before
        and no longer does). Returns the key of a pod the tracker now holds."""
        self.stats.events += 1
        try:
            probe = _probe.decode(raw)
        except msgspec.DecodeError as err:  # e.g. a name that is not a string
            self.stats.bad += 1
            log.error("bad object", kind=KIND, error=f"not a readable Pod: {err}")
            return None
        meta = probe.metadata
        if meta.resourceVersion:
            self.resource_version = meta.resourceVersion
        key = NamespacedName(meta.namespace, meta.name)
        if etype != "DELETED" and needed(probe):
            self._apply(etype, self._decode(raw))
            return key if self.tracker.pod(key) is not None else None
        if self.tracker.pod(key) is not None:  # deleted, or no longer draco's business
            self._apply("DELETED", self._decode(raw))
        return None

    def _decode(self, raw: msgspec.Raw | bytes) -> Any:
        self.stats.decoded += 1
        return _whole.decode(raw)

    def _apply(self, etype: str, body: Any) -> None:
        if isinstance(body, dict):
            found = body.get("metadata")
            meta: dict[str, Any] = found if isinstance(found, dict) else {}
            obj: Any = {**body, "kind": KIND}
            namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        else:  # the tracker's own model of a pod it holds
            obj, namespace, name = body, body.meta.namespace, body.meta.name
        with guarded("feed", KIND, kind=KIND, namespace=namespace, name=name):
            change = self.tracker.apply({"type": etype, "object": obj})
            for err in change.errors:
                self.stats.bad += 1
                log.error("bad object", kind=err.ref.kind, namespace=err.ref.namespace,
                          name=err.ref.name, error=str(err))


async def _lines(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """Newline-separated lines of any length (aiohttp's readline caps a line's size)."""
    rest = bytearray()
    async for chunk in chunks:
        start = 0
        cut = chunk.find(b"\n")
        while cut >= 0:
            if rest:
                rest += chunk[start:cut]
                line = bytes(rest)
                rest.clear()
            else:
                line = chunk[start:cut]
            if line.strip():
                yield line
            start = cut + 1
            cut = chunk.find(b"\n", start)
        rest += chunk[start:]
    if bytes(rest).strip():
        yield bytes(rest)


__all__ = ["Expired", "PodFeed", "PodFeedStats", "needed"]
