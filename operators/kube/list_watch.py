"""draco's own list+watch feeds: the kinds whose objects are many (Pods, ResourceClaims,
ResourceSlices) reach the tracker without kopf.

Through kopf, every object of a watched kind gets a full JSON decode into dicts, a
worker task of its own and a memory kept until the object is deleted: at 10,000 claims
that was half of draco's start-up CPU. Here each event is decoded with msgspec, first
into a probe of a few fields (its identity, and for pods whether draco needs it at all;
the rest is skipped without building Python objects), then, only when the tracker
takes it, whole. A list page reaches the tracker as one batch, so the controllers hear
of it once.

Informer semantics: the first list is paginated and read from the API server's watch
cache (resourceVersion=0), then a watch from the list's resourceVersion with bookmarks;
the watch resumes from the last resourceVersion seen, and an expired one (410) means a
consistent list, after which objects the tracker holds but the list no longer has are
removed. Failures back off (1, 2, 4 … 30 s) and show in the initial-sync gate while the
first list has not succeeded. One bad event is one logged, counted error.

Not a watch-list (`sendInitialEvents=true`, client-go's WatchListClient): tried against
kube-apiserver 1.34 with 20,000 pods, streaming the state took 2.2-3.7 s against
1.1-1.9 s for one list from the watch cache (which ignores `limit`), and start-up time
is what a big cluster waits for. The list's one response (57 MB for those pods) is held
only while its items are probed.
"""

from __future__ import annotations

import asyncio
import contextlib
import urllib.parse
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import aiohttp
import msgspec
import structlog

from operators.kube import prefetch
from operators.kube.client import Credentials
from operators.kube.feed import retry_delay
from operators.kube.metrics import count_answer
from operators.kube.supervision import guarded, report_error
from operators.model import NamespacedName
from operators.tracker import Tracker

log = structlog.get_logger("draco.feed")


class Meta(msgspec.Struct):
    name: str = ""
    namespace: str = ""
    resourceVersion: str = ""  # noqa: N815 - the API's field name


class Probe(msgspec.Struct):
    """An object's identity, read without decoding the rest."""

    metadata: Meta = msgspec.field(default_factory=Meta)


class _Event(msgspec.Struct):
    type: str = ""
    object: msgspec.Raw = msgspec.Raw(b"null")


P = TypeVar("P")


class _ProbedEvent(msgspec.Struct, Generic[P]):
    """A watch event whose object is read as its kind's probe, in the same pass."""

    type: str = ""
    object: P | None = None


class _WholeEvent(msgspec.Struct):
    type: str = ""
    object: Any = None


class _ListMeta(msgspec.Struct):
    resourceVersion: str = ""  # noqa: N815
    # `continue` is a Python keyword: renamed
    next: str = msgspec.field(default="", name="continue")


class _List(msgspec.Struct):
    metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)
    items: list[msgspec.Raw] = msgspec.field(default_factory=list)


class _Status410(msgspec.Struct):
    code: int = 0
    message: str = ""


_event = msgspec.json.Decoder(_Event)
_page = msgspec.json.Decoder(_List)
_status = msgspec.json.Decoder(_Status410)
_identity = msgspec.json.Decoder(Probe)
_whole = msgspec.json.Decoder()
_whole_event = msgspec.json.Decoder(_WholeEvent)


# A read that arrives within this many seconds of being asked for was already waiting:
# the stream is busy, and the feed pauses before the next read (ListWatch._gather).
BURST_GAP = 0.01


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
class FeedStats:
    """What a feed did, for tests and metrics: probes are cheap, decodes are not."""

    events: int = 0  # watch events and listed items probed
    decoded: int = 0  # of those, decoded whole and given to the tracker
    bad: int = 0  # undecodable events or objects the tracker refused
    lists: int = 0  # full lists (1 + relists after 410)
    reads: int = 0  # reads of watch streams that brought events
    gathers: int = 0  # of those, reads in a burst, followed by a pause


@dataclass(frozen=True)
class Kind:
    """One kind a feed keeps in the tracker: where it is listed, how its objects are
    probed, which of them the tracker keeps, and how to find those the tracker holds."""

    name: str
    path: str  # the cluster-wide collection, e.g. /api/v1/pods
    held: Callable[[Tracker], Iterable[Any]]  # the tracker's objects of this kind
    holds: Callable[[Tracker, NamespacedName], bool]
    probe: type = Probe  # a msgspec Struct with `metadata: Meta` and what `needed` reads
    needed: Callable[[Any], bool] = lambda probe: True
    probes: msgspec.json.Decoder[Any] = field(init=False, repr=False, compare=False)
    events: msgspec.json.Decoder[Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "probes", msgspec.json.Decoder(self.probe))
        object.__setattr__(self, "events", msgspec.json.Decoder(_ProbedEvent[self.probe]))  # type: ignore[name-defined]


def _key(obj: Any) -> NamespacedName:
    """The key of a tracker model (every model has `meta`)."""
    return NamespacedName(obj.meta.namespace, obj.meta.name)


CLAIMS = Kind("ResourceClaim", prefetch.PATHS["ResourceClaim"],
              held=lambda t: t.claims(), holds=lambda t, k: t.claim(k) is not None)
SLICES = Kind("ResourceSlice", prefetch.PATHS["ResourceSlice"],
              held=lambda t: t.resource_slices(), holds=lambda t, k: t.resource_slice(k.name) is not None)


class ListWatch:
    """Keeps the tracker's objects of one kind equal to the cluster's (those it needs)."""

    def __init__(self, kind: Kind, tracker: Tracker, gate: Gate | None = None, *,
                 credentials: Callable[[], Credentials] = Credentials.load,
                 page_size: int = prefetch.PAGE_SIZE, watch_seconds: int = 300,
                 delay: Callable[[int], float] = retry_delay, gather: float = 0.02,
                 plain_pauses: bool = False) -> None:
        self.kind = kind
        self.gather = gather  # seconds between two reads of a watch stream in a burst
        self.plain_pauses = plain_pauses  # pause only after reads the tracker took nothing of
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
        self.stats = FeedStats()
        self.synced = asyncio.Event()
        self._batching = False  # a read of many events: the first applied opens a batch
        self._open: contextlib.ExitStack | None = None
        if gate is not None:
            gate.hold(kind.name)

    # ------------------------------------------------------------------ the loop

    async def run(self) -> None:
        creds = await asyncio.to_thread(self.credentials)
        # one deadline per watch (the server ends it after watch_seconds), not a read
        # timeout: aiohttp re-arms that timer on every chunk, a tenth of an event's cost
        timeout = aiohttp.ClientTimeout(total=self.watch_seconds + 30, connect=30)
        kind = self.kind.name
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
                    log.info("watch expired; listing again", kind=kind)
                    self.resource_version = ""
                    self.consistent = True
                    continue
                except ListFailed as err:
                    if self.gate is not None and not self.synced.is_set():
                        self.gate.failing_list(kind, str(err))
                    log.warning("cannot list; retrying", kind=kind, error=str(err))
                except (Interrupted, aiohttp.ClientError, TimeoutError, OSError) as err:
                    if not isinstance(err, Interrupted):
                        count_answer("WATCH" if self.resource_version else "LIST", 0)
                    log.warning("watch interrupted; resuming", kind=kind,
                                error=f"{type(err).__name__}: {err}")
                except Exception as err:  # a bug here must not end the feed: counted, retried
                    report_error("feed", kind, err, kind=kind)
                await asyncio.sleep(self.delay(attempt))
                attempt += 1

    async def _list(self, session: aiohttp.ClientSession, host: str) -> None:
        kind = self.kind.name
        log.info("listing", kind=kind, first=not self.synced.is_set())
        listed: set[NamespacedName] = set()
        token = ""
        rv = ""
        pages = 0
        # the first page of the first list may have been asked for while draco started
        early = await prefetch.take(self.kind.path, host) \
            if not self.synced.is_set() and self.page_size == prefetch.PAGE_SIZE else None
        if early is not None:
            log.info("first page asked for at start", kind=kind, bytes=len(early))
        while True:
            pages += 1
            raw = early if early is not None else await self._page(session, host, token)
            early = None
            if raw is None:  # the continue token expired: start over
                listed.clear()
                token = ""
                continue
            try:
                page = _page.decode(raw)
            except msgspec.DecodeError as err:
                raise ListFailed(f"the answer is not a {kind} list: {err}") from None
            with self.tracker.batch():  # the controllers hear of a page once
                for item in page.items:
                    key = self.offer("ADDED", item)
                    if key is not None:
                        listed.add(key)
            rv = page.metadata.resourceVersion or rv
            token = page.metadata.next
            if not token:
                break
        with self.tracker.batch():
            for stale in [o for o in self.kind.held(self.tracker) if _key(o) not in listed]:
                self._apply("DELETED", stale)  # deleted while draco did not watch
        self.stats.lists += 1
        self.resource_version = rv
        log.info("listed", kind=kind, kept=len(listed), probed=self.stats.events, pages=pages)
        if not self.synced.is_set():
            self.synced.set()
            if self.gate is not None:
                self.gate.failing_list(kind, None)
                self.gate.release(kind)

    async def _page(self, session: aiohttp.ClientSession, host: str, token: str) -> bytes | None:
        """One page of the list; None when the continue token expired."""
        query = {"limit": str(self.page_size)}
        if token:
            query["continue"] = token
        elif not self.consistent:
            query["resourceVersion"] = "0"
        # a page must come within a minute (the session's read timeout is the watch's,
        # minutes): a list stalled on a server that is still starting is retried
        async with session.get(f"{host}{self.kind.path}?{urllib.parse.urlencode(query)}",
                               timeout=aiohttp.ClientTimeout(total=60)) as resp:
            raw = await resp.read()
            if resp.status == 410 and token:
                return None
            if resp.status != 200:
                count_answer("LIST", resp.status)
                raise ListFailed(f"HTTP {resp.status}")
        return raw

    async def _watch(self, session: aiohttp.ClientSession, host: str) -> None:
        query = {"watch": "1", "allowWatchBookmarks": "true", "resourceVersion": self.resource_version,
                 "timeoutSeconds": str(self.watch_seconds)}
        async with session.get(f"{host}{self.kind.path}?{urllib.parse.urlencode(query)}") as resp:
            if resp.status == 410:
                raise Expired()
            if resp.status != 200:
                count_answer("WATCH", resp.status)
                raise ListFailed(f"watch answered HTTP {resp.status}")
            transport = resp.connection.transport if resp.connection is not None else None
            clock = asyncio.get_running_loop().time
            asked = clock()
            async for batch in line_batches(resp.content.iter_any()):
                self.stats.reads += 1
                # a read that was already waiting (or brought several events) is a burst
                burst = len(batch) > 1 or clock() - asked < BURST_GAP
                decoded = self.stats.decoded
                # the controllers hear of a read's events once; a read of plain pods
                # only opens no tracker batch (see _apply)
                self._batching = len(batch) > 1
                try:
                    for line in batch:
                        self.line(line)
                finally:
                    self._batching = False
                    if self._open is not None:
                        opened, self._open = self._open, None
                        opened.close()
                # with plain_pauses, only a burst of events the tracker did not take
                # pauses: a DRA pod's event is never held up behind its own burst
                if self.gather and burst and (not self.plain_pauses or self.stats.decoded == decoded):
                    self.stats.gathers += 1
                    await self._gather(transport)
                asked = clock()

    async def _gather(self, transport: asyncio.Transport | None) -> None:
        """Let a burst of events gather into one read.

        Under churn events come one per network segment, and every segment the event
        loop is woken for (socket read, TLS record, HTTP chunk parser, stream buffer)
        costs far more than the event itself: measured on a real cluster, 0.17 ms of
        draco's CPU per plain-pod event with 20 ms pauses that left the transport
        reading, 0.03 ms of it decoding. So the transport stops reading for the pause:
        the kernel buffers the segments, and the next read takes them all at once.
        Only bursts pause (see BURST_GAP): an event after a quiet spell is read at once,
        and one inside a burst waits at most `gather` seconds."""
        # the asyncio transport's own flow control; a transport aiohttp has paused itself
        # (its buffer is full) is left to aiohttp
        if transport is None or not transport.is_reading():
            await asyncio.sleep(self.gather)
            return
        transport.pause_reading()
        try:
            await asyncio.sleep(self.gather)
        finally:
            if not transport.is_closing():
                transport.resume_reading()

    # ------------------------------------------------------------------ one event

    def line(self, line: bytes) -> None:
        """One line of the watch stream (a JSON watch event), decoded in one pass with its
        object read as the kind's probe; what that pass cannot read (an ERROR's Status, a
        malformed object) takes the slow path, which says exactly what is wrong."""
        try:
            event = self.kind.events.decode(line)
        except msgspec.DecodeError:
            self._line_slow(line)
            return
        if event.type == "ERROR" or event.object is None:
            self._line_slow(line)
            return
        if event.type == "BOOKMARK":
            self.resource_version = event.object.metadata.resourceVersion or self.resource_version
            return
        self._take(event.type, event.object, lambda: self._decode_event(line))

    def _line_slow(self, line: bytes) -> None:
        try:
            event = _event.decode(line)
        except msgspec.DecodeError as err:
            self.stats.bad += 1
            log.error("undecodable watch event skipped", kind=self.kind.name, error=str(err))
            return
        if event.type == "ERROR":
            status = _status.decode(event.object) if bytes(event.object) != b"null" else _Status410()
            if status.code == 410:
                raise Expired()
            raise Interrupted(f"watch error {status.code}: {status.message}")
        if event.type == "BOOKMARK":
            with contextlib.suppress(msgspec.DecodeError):
                self.resource_version = _identity.decode(event.object).metadata.resourceVersion \
                    or self.resource_version
            return
        self.offer(event.type, event.object)

    def offer(self, etype: str, raw: msgspec.Raw | bytes) -> NamespacedName | None:
        """Probe one object; give it to the tracker when draco needs it (or held it
        before and no longer does). Returns the key of an object the tracker now holds."""
        try:
            probe = self.kind.probes.decode(raw)
        except msgspec.DecodeError as err:  # e.g. a name that is not a string
            self.stats.events += 1
            self.stats.bad += 1
            log.error("bad object", kind=self.kind.name, error=f"not a readable {self.kind.name}: {err}")
            return None
        return self._take(etype, probe, lambda: self._decode(raw))

    def _take(self, etype: str, probe: Any, whole: Callable[[], Any]) -> NamespacedName | None:
        self.stats.events += 1
        meta = probe.metadata
        if meta.resourceVersion:
            self.resource_version = meta.resourceVersion
        key = NamespacedName(meta.namespace, meta.name)
        if etype != "DELETED" and self.kind.needed(probe):
            self._apply(etype, whole())
            return key if self.kind.holds(self.tracker, key) else None
        if self.kind.holds(self.tracker, key):  # deleted, or no longer draco's business
            self._apply("DELETED", whole())
        return None

    def _decode_event(self, line: bytes) -> Any:
        self.stats.decoded += 1
        return _whole_event.decode(line).object

    def _decode(self, raw: msgspec.Raw | bytes) -> Any:
        self.stats.decoded += 1
        return _whole.decode(raw)

    def _apply(self, etype: str, body: Any) -> None:
        if self._batching and self._open is None:
            self._open = contextlib.ExitStack()
            self._open.enter_context(self.tracker.batch())
        kind = self.kind.name
        if isinstance(body, dict):
            found = body.get("metadata")
            meta: dict[str, Any] = found if isinstance(found, dict) else {}
            obj: Any = {**body, "kind": kind}
            namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        else:  # the tracker's own model of an object it holds
            obj, namespace, name = body, body.meta.namespace, body.meta.name
        with guarded("feed", kind, kind=kind, namespace=namespace, name=name):
            change = self.tracker.apply({"type": etype, "object": obj})
            for err in change.errors:
                self.stats.bad += 1
                log.error("bad object", kind=err.ref.kind, namespace=err.ref.namespace,
                          name=err.ref.name, error=str(err))


async def line_batches(chunks: AsyncIterator[bytes]) -> AsyncIterator[list[bytes]]:
    """The newline-separated lines, of any length (aiohttp's readline caps a line's
    size), completed by each chunk read from the network."""
    rest = bytearray()
    async for chunk in chunks:
        batch: list[bytes] = []
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
                batch.append(line)
            start = cut + 1
            cut = chunk.find(b"\n", start)
        rest += chunk[start:]
        if batch:
            yield batch
    if bytes(rest).strip():
        yield [bytes(rest)]


async def lines(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The lines of `line_batches`, one by one."""
    async for batch in line_batches(chunks):
        for line in batch:
            yield line


__all__ = ["CLAIMS", "SLICES", "Expired", "FeedStats", "Kind", "ListWatch", "line_batches", "lines"]
