"""draco's own Pod feed (kube/pod_watch.py): a plain pod costs a probe and no memory;
the pods draco needs reach the tracker, through a list and a watch like an informer's.

Counters, not timings: `stats.decoded` counts the pods decoded whole (the expensive
path), the tracker's pods are what draco keeps.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from operators.apiserver.testing import EmbeddedCluster
from operators.kube.client import Credentials
from operators.kube.feed import SyncGate
from operators.kube.list_watch import lines
from operators.kube.pod_watch import POD_KIND, Expired, PodFeed, needed
from operators.model import NamespacedName
from operators.tracker import Tracker

NS = "default"


def pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
            "spec": {"containers": [{"name": "c", "image": "i"}], **spec}}


CLAIMS = {"resourceClaims": [{"name": "gpu", "resourceClaimName": "c"}]}
TEMPLATE = {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]}
GATED = {"schedulingGates": [{"name": "resource.draco.dev/allocation"}]}


@pytest.mark.parametrize(("body", "wanted"), [
    (pod("plain"), False),
    (pod("empty-lists", resourceClaims=[], schedulingGates=[]), False),
    (pod("nulls", resourceClaims=None, schedulingGates=None), False),
    (pod("claim", **CLAIMS), True),
    (pod("template", **TEMPLATE), True),
    (pod("gated", **GATED), True),
    (pod("another-gate", schedulingGates=[{"name": "example.com/other"}]), True),
    ({**pod("extended"), "status": {"extendedResourceClaimStatus": {
        "resourceClaimName": "x", "requestMappings": []}}}, True),
    ({"metadata": {"name": "bare"}}, False),
    # a gang's launcher holds no claim and no gate, and still counts towards minCount
    ({**pod("launcher"), "metadata": {"name": "launcher", "namespace": NS,
                                      "labels": {"resource.draco.dev/gang": "team"}}}, True),
    ({**pod("labelled"), "metadata": {"name": "labelled", "namespace": NS,
                                      "labels": {"app": "web"}}}, False),
    (pod("pod-group", schedulingGroup={"podGroupName": "team"}), True),
])
def test_which_pods_draco_keeps(body: dict[str, Any], wanted: bool) -> None:
    assert needed(POD_KIND.probes.decode(json.dumps(body).encode())) is wanted


class Server:
    """The embedded server, written to over plain HTTP from a thread."""

    def __init__(self, cluster: EmbeddedCluster) -> None:
        self.url = cluster.url

    def call(self, method: str, path: str, body: Any = None,
             content_type: str = "application/json") -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": content_type})
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read() or b"null")

    async def create(self, body: dict[str, Any]) -> None:
        await asyncio.to_thread(self.call, "POST", f"/api/v1/namespaces/{NS}/pods", body)

    async def patch(self, name: str, patch: dict[str, Any], sub: str = "") -> None:
        await asyncio.to_thread(self.call, "PATCH", f"/api/v1/namespaces/{NS}/pods/{name}{sub}", patch,
                                "application/merge-patch+json")

    async def delete(self, name: str) -> None:
        await asyncio.to_thread(self.call, "DELETE", f"/api/v1/namespaces/{NS}/pods/{name}")


@pytest.fixture
def server(tmp_path: Path) -> Any:
    cluster = EmbeddedCluster(tmp_path)
    try:
        yield Server(cluster)
    finally:
        cluster.stop()


Running = Callable[..., Awaitable[PodFeed]]


@pytest.fixture
async def running(server: Server) -> AsyncIterator[Running]:
    tasks: list[asyncio.Task[None]] = []

    async def start(tracker: Tracker, gate: SyncGate | None = None, path: str = "", **kw: Any) -> PodFeed:
        creds = Credentials(server.url + path, {}, False)
        feed = PodFeed(tracker, gate, credentials=lambda: creds, delay=lambda attempt: 0.05, **kw)
        tasks.append(asyncio.create_task(feed.run()))
        return feed

    yield start
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def until(check: Callable[[], bool], what: str) -> None:
    for _ in range(3000):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def held(tracker: Tracker) -> set[str]:
    return {p.meta.name for p in tracker.pods()}


async def test_plain_pods_are_probed_never_kept(server: Server, running: Running) -> None:
    for i in range(30):
        await server.create(pod(f"plain-{i}"))
    await server.create(pod("claim", **CLAIMS))
    await server.create(pod("gated", **GATED))
    tracker = Tracker()
    feed = await running(tracker, page_size=7)  # the list is paginated
    await until(feed.synced.is_set, "the first list")
    assert held(tracker) == {"claim", "gated"}
    assert (feed.stats.events, feed.stats.decoded) == (32, 2)

    # watch events of plain pods: probed, not decoded, not kept
    for i in range(10):
        await server.patch(f"plain-{i}", {"metadata": {"labels": {"touched": "yes"}}})
    await server.create(pod("late", **TEMPLATE))
    await until(lambda: "late" in held(tracker), "the pod created while watching")
    assert feed.stats.events == 32 + 11 and feed.stats.decoded == 3
    for i in range(10):
        await server.delete(f"plain-{i}")
    await server.delete("claim")
    await until(lambda: "claim" not in held(tracker), "the deleted pod to go")
    assert held(tracker) == {"gated", "late"} and feed.stats.decoded == 4
    assert feed.stats.bad == 0


async def test_a_pod_that_gains_or_loses_what_draco_needs(server: Server, running: Running) -> None:
    await server.create(pod("plain"))
    await server.create(pod("gated", **GATED))
    tracker = Tracker()
    feed = await running(tracker)
    await until(feed.synced.is_set, "the first list")
    assert held(tracker) == {"gated"}
    # the scheduler gives a plain pod an extended-resource claim (KEP-5004)
    await server.patch("plain", {"status": {"extendedResourceClaimStatus": {
        "resourceClaimName": "plain-extended", "requestMappings": [
            {"containerName": "c", "resourceName": "example.com/gpu", "requestName": "container-0"}]}}},
        "/status")
    await until(lambda: "plain" in held(tracker), "the pod with an extended-resource claim")
    assert tracker.claims_of_pod(NamespacedName(NS, "plain")) == (NamespacedName(NS, "plain-extended"),)
    # a gated pod without claims whose gate goes is none of draco's business any more
    await server.patch("gated", {"spec": {"schedulingGates": None}})
    await until(lambda: "gated" not in held(tracker), "the ungated pod to be dropped")


async def test_the_gate_waits_for_the_first_list_and_says_why(server: Server, running: Running) -> None:
    gate = SyncGate()
    priming = asyncio.create_task(gate.prime([], None, {}))  # every other kind listed
    try:
        feed = await running(Tracker(), gate, path="/refused")  # every request answers 404
        await until(lambda: "Pod" in gate.failing, "the failing list to show")
        assert gate.primed.is_set() and not gate.done.is_set()
        assert gate.missing() == "cannot list Pod (HTTP 404; retrying)"
        assert feed.stats.lists == 0 and not feed.synced.is_set()
    finally:
        priming.cancel()


async def test_the_gate_opens_after_the_first_list(server: Server, running: Running) -> None:
    await server.create(pod("claim", **CLAIMS))
    gate = SyncGate()
    tracker = Tracker()
    feed = await running(tracker, gate)
    if not feed.synced.is_set():
        assert gate.missing() == "waiting for the first list of Pod"
    priming = asyncio.create_task(gate.prime([], None, {}))
    assert await gate.wait(timeout=30)
    await priming
    assert held(tracker) == {"claim"} and feed.stats.lists == 1


def test_a_relist_drops_pods_deleted_while_draco_was_not_watching() -> None:
    tracker = Tracker()
    feed = PodFeed(tracker)
    for name in ("kept", "gone"):
        feed.offer("ADDED", json.dumps(pod(name, **CLAIMS)).encode())
    assert held(tracker) == {"kept", "gone"}
    # what _list does with a page that has "kept" only
    listed = {feed.offer("ADDED", json.dumps(pod("kept", **CLAIMS)).encode())}
    for stale in [p for p in tracker.pods() if p.meta.key not in listed]:
        feed._apply("DELETED", stale)
    assert held(tracker) == {"kept"}


def test_watch_lines_expired_bookmark_and_bad_input() -> None:
    tracker = Tracker()
    feed = PodFeed(tracker)
    feed.line(b'{"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"42"}}}')
    assert feed.resource_version == "42"
    feed.line(b"{not json")
    feed.line(json.dumps({"type": "ADDED", "object": {"metadata": {"name": 7}}}).encode())
    assert feed.stats.bad == 2
    feed.line(json.dumps({"type": "ADDED", "object": {
        **pod("ok", **CLAIMS), "metadata": {"name": "ok", "namespace": NS, "resourceVersion": "43"}}}).encode())
    assert held(tracker) == {"ok"} and feed.resource_version == "43"
    with pytest.raises(Expired):
        feed.line(b'{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired"}}')
    # a pod the tracker refuses (a claim entry without a name) is one logged, counted error
    feed.line(json.dumps({"type": "MODIFIED", "object": pod("ok", resourceClaims=[{"x": 1}])}).encode())
    assert feed.stats.bad == 3 and held(tracker) == set()


async def test_lines_of_any_length_across_chunks() -> None:
    big = b"x" * 300_000

    async def chunks() -> AsyncIterator[bytes]:
        for piece in (b'{"a":1}\n{"b":', b"2}\n", big[:100_000], big[100_000:], b"\n\n", b'{"c":3}'):
            yield piece

    assert [line async for line in lines(chunks())] == [b'{"a":1}', b'{"b":2}', big, b'{"c":3}']


async def test_the_kopf_feeds_keep_no_keys_once_the_initial_sync_is_done() -> None:
    """The keys of objects seen before the initial list are the gate's only need: a
    deleted object's key goes at once, and all of them once the sync is done (they
    grew with every object ever seen before)."""
    from operators.kube.feed import feed_handler

    gate = SyncGate()
    seen: dict[str, set[tuple[str, str]]] = {}
    feed = feed_handler(Tracker(), "ResourceClaim", seen, gate)

    def claim(name: str) -> dict[str, Any]:
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": name, "namespace": NS, "uid": name},
                "spec": {"devices": {"requests": []}}}

    await feed(event={"type": "ADDED", "object": claim("a")})
    await feed(event={"type": "ADDED", "object": claim("b")})
    await feed(event={"type": "DELETED", "object": claim("a")})
    assert seen == {"ResourceClaim": {(NS, "b")}}
    await gate.prime([], None, {})
    assert gate.done.is_set()
    await feed(event={"type": "ADDED", "object": claim("c")})
    assert seen == {}


async def test_the_first_list_reads_the_cache_and_a_list_after_410_is_consistent() -> None:
    """Like an informer: the first list asks for resourceVersion=0 (the API server's watch
    cache, no etcd read, answered while etcd is slow); after the watch's resourceVersion
    expired, the list must not step back in time, so it asks for the latest state."""
    from aiohttp import web
    from aiohttp.test_utils import TestServer

    lists: list[dict[str, str]] = []
    watches = 0

    async def pods(request: web.Request) -> web.StreamResponse:
        nonlocal watches
        if request.query.get("watch"):
            watches += 1
            resp = web.StreamResponse()
            await resp.prepare(request)
            if watches == 1:
                await resp.write(b'{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired"}}\n')
            else:
                await asyncio.sleep(30)
            return resp
        lists.append(dict(request.query))
        return web.json_response({"kind": "PodList", "metadata": {"resourceVersion": str(len(lists))},
                                  "items": [pod("claim", **CLAIMS)]})

    app = web.Application()
    app.router.add_get("/api/v1/pods", pods)
    async with TestServer(app) as srv:
        creds = Credentials(str(srv.make_url("")).rstrip("/"), {}, False)
        tracker = Tracker()
        feed = PodFeed(tracker, credentials=lambda: creds, delay=lambda attempt: 0.05)
        task = asyncio.create_task(feed.run())
        try:
            await until(lambda: watches >= 2, "the watch after the relist")
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    assert [q.get("resourceVersion") for q in lists] == ["0", None]
    assert feed.resource_version == "2" and held(tracker) == {"claim"}


def stream(events: list[tuple[float, dict[str, Any]]]) -> Any:
    """A pods collection whose watch sends each pod after its pause, then stays open."""
    from aiohttp import web

    async def pods(request: web.Request) -> web.StreamResponse:
        if not request.query.get("watch"):
            return web.json_response({"kind": "PodList", "metadata": {"resourceVersion": "1"}, "items": []})
        resp = web.StreamResponse()
        await resp.prepare(request)
        for i, (pause, body) in enumerate(events):
            await asyncio.sleep(pause)
            body["metadata"]["resourceVersion"] = str(i + 2)
            await resp.write(json.dumps({"type": "ADDED", "object": body}).encode() + b"\n")
        await asyncio.sleep(30)
        return resp

    app = web.Application()
    app.router.add_get("/api/v1/pods", pods)
    return app


async def watched(events: list[tuple[float, dict[str, Any]]], gather: float,
                  done: Callable[[PodFeed, Tracker], bool]) -> PodFeed:
    from aiohttp.test_utils import TestServer

    async with TestServer(stream(events)) as srv:
        creds = Credentials(str(srv.make_url("")).rstrip("/"), {}, False)
        tracker = Tracker()
        feed = PodFeed(tracker, credentials=lambda: creds, delay=lambda attempt: 0.05, gather=gather)
        task = asyncio.create_task(feed.run())
        try:
            await until(lambda: done(feed, tracker), "every event")  # 30 s
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    assert feed.stats.lists == 1 and feed.stats.bad == 0  # read through, never restarted
    return feed


async def test_a_burst_of_plain_pods_is_read_in_a_few_reads() -> None:
    """Under churn each event would be one read, and a read costs far more than the
    event: the feed pauses between reads so that a burst gathers."""
    feed = await watched([(0.001, pod(f"p-{i}")) for i in range(100)], 0.2,
                         lambda feed, _: feed.stats.events == 100)
    assert feed.resource_version == "101" and feed.stats.decoded == 0
    assert feed.stats.reads < 50  # one read per event without the pause


async def test_a_burst_of_dra_pods_waits_for_no_pause() -> None:
    """A DRA pod's events are draco's business: however long the pause for plain pods,
    a burst of pods with claims is read as it comes."""
    feed = await watched([(0.005, pod(f"p-{i}", **CLAIMS)) for i in range(20)], 60,
                         lambda _, tracker: len(held(tracker)) == 20)
    assert feed.stats.gathers == 0 and feed.resource_version == "21"


async def test_an_event_after_a_quiet_spell_is_read_at_once() -> None:
    """The pause is for bursts only: a lone event after a quiet spell is read when it
    comes, and so is the next one, however long the pause."""
    feed = await watched([(0.3, pod(f"p-{i}")) for i in range(3)], 60,
                         lambda feed, _: feed.stats.events == 3)
    assert feed.stats.reads == 3 and feed.stats.gathers == 0
