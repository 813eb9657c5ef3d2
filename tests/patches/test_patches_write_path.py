"""The one write path every controller shares (operators.kube): one rate limit for the
process, and 409 Conflict answered by reading again and retrying."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from aiohttp import web

from operators.kube.client import Credentials
from operators.kube.conditions import merge_condition, transition_time
from operators.kube.conflicts import read_modify_write
from operators.kube.events import EventRecorder
from operators.kube.shared import process_limiter, shared_client

PATH = "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c"


class FakeServer:
    """One object with a resourceVersion; `meddle` writes behind the client's back."""

    def __init__(self) -> None:
        self.obj: dict[str, Any] = {"metadata": {"name": "c", "resourceVersion": "1"},
                                    "spec": {}, "status": {"reservedFor": [{"name": "other"}]}}
        self.meddle = 0  # how many reads are followed by someone else's write
        self.log: list[tuple[str, str]] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.log.append((request.method, request.path))
        if not request.path.startswith(PATH):
            return web.json_response({"kind": "Status", "code": 404}, status=404)
        if request.method == "GET":
            body = json.loads(json.dumps(self.obj))
            if self.meddle:
                self.meddle -= 1
                self._bump()
                self.obj["status"]["reservedFor"].append({"name": f"meddler-{self.rv}"})
            return web.json_response(body)
        sent = await request.json()
        if sent["metadata"].get("resourceVersion") != self.obj["metadata"]["resourceVersion"]:
            return web.json_response({"kind": "Status", "code": 409, "reason": "Conflict"},
                                     status=409)
        self.obj = sent
        self._bump()
        return web.json_response(self.obj)

    @property
    def rv(self) -> str:
        return str(self.obj["metadata"]["resourceVersion"])

    def _bump(self) -> None:
        self.obj["metadata"]["resourceVersion"] = str(int(self.rv) + 1)


@pytest.fixture
async def server() -> Any:
    fake = FakeServer()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", fake.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    client = shared_client(credentials=Credentials(f"http://127.0.0.1:{port}", {}, False),
                           retries=0)
    yield fake, client
    await client.close()
    await runner.cleanup()


def reserve(name: str) -> Any:
    def mutate(obj: dict[str, Any]) -> dict[str, Any] | None:
        reserved = obj["status"]["reservedFor"]
        if any(r["name"] == name for r in reserved):
            return None
        reserved.append({"name": name})
        return obj

    return mutate


async def test_a_write_without_interference_reads_once_and_writes_once(server: Any) -> None:
    fake, client = server
    resp = await read_modify_write(client, PATH, reserve("pod-a"), write_path=PATH + "/status")
    assert resp.ok
    assert fake.log == [("GET", PATH), ("PUT", PATH + "/status")]
    assert [r["name"] for r in fake.obj["status"]["reservedFor"]] == ["other", "pod-a"]


async def test_a_conflict_is_read_again_and_nothing_written_in_between_is_lost(
    server: Any,
) -> None:
    fake, client = server
    fake.meddle = 2  # the first two reads go stale before the write arrives
    resp = await read_modify_write(client, PATH, reserve("pod-a"))
    assert resp.ok
    assert [m for m, _ in fake.log] == ["GET", "PUT", "GET", "PUT", "GET", "PUT"]
    assert [r["name"] for r in fake.obj["status"]["reservedFor"]] == [
        "other", "meddler-2", "meddler-3", "pod-a"]


async def test_conflicts_give_up_after_the_attempts(server: Any) -> None:
    fake, client = server
    fake.meddle = 10
    resp = await read_modify_write(client, PATH, reserve("pod-a"), attempts=3)
    assert resp.status == 409
    assert [m for m, _ in fake.log].count("PUT") == 3


async def test_nothing_to_change_writes_nothing_and_a_missing_object_is_reported(
    server: Any,
) -> None:
    fake, client = server
    resp = await read_modify_write(client, PATH, reserve("other"))
    assert resp.ok and fake.log == [("GET", PATH)]
    missing = await read_modify_write(client, "/api/v1/namespaces/ns/pods/gone", reserve("x"))
    assert missing.status == 404


async def test_controllers_share_one_rate_limit(server: Any) -> None:
    _, first = server
    second = shared_client(qps=first.limiter.qps, burst=first.limiter.burst,
                           credentials=first.credentials, retries=0)
    assert second.limiter is first.limiter is process_limiter()
    limiter = process_limiter(20.0, 2)  # 2 at once, then one every 50 ms
    first.limiter = second.limiter = limiter
    started = time.monotonic()
    await asyncio.gather(*(c.get(PATH) for c in (first, second, first, second)))
    # Separate buckets would let all four through at once; a shared one makes two wait.
    assert time.monotonic() - started >= 0.09
    await second.close()


def test_the_shared_limit_works_in_every_event_loop() -> None:
    """Operators started in threads (tests, benchmarks, the demo) bring loops of their own."""
    limiter = process_limiter(200.0, 1)

    async def burst() -> None:
        await asyncio.gather(*(limiter.take() for _ in range(4)))

    asyncio.run(burst())
    asyncio.run(burst())  # an asyncio lock bound to the first loop would refuse


CONDITIONS = [
    # (previous condition, new status, expected lastTransitionTime)
    (None, "True", "now"),
    ({"status": "True", "lastTransitionTime": "then"}, "True", "then"),
    ({"status": "True", "lastTransitionTime": "then"}, "False", "now"),
    ({"status": "True"}, "True", "now"),
    ({"status": "True", "lastTransitionTime": ""}, "True", "now"),
]


@pytest.mark.parametrize(("previous", "status", "expected"), CONDITIONS)
def test_the_transition_time_moves_only_when_the_status_flips(
    previous: dict[str, str] | None, status: str, expected: str
) -> None:
    assert transition_time(previous, status, "now") == expected
    existing = [{"type": "Ready", **previous}] if previous is not None else []
    merged = merge_condition(existing, {"type": "Ready", "status": status}, "now")
    assert merged == [{"type": "Ready", "status": status, "lastTransitionTime": expected}]


async def test_events_draw_from_a_bucket_of_their_own(server: Any) -> None:
    """As kube-scheduler posts Events through a client of its own: a burst of reports
    (one Event per evicted or allocated pod) never delays the writes themselves."""
    fake, client = server
    client.limiter = process_limiter(1.0, 1)  # one write now, the next in a second
    recorder = EventRecorder(client, "draco-test")
    assert recorder.client.limiter is process_limiter(1.0, 1, "events")
    assert recorder.client.limiter is not client.limiter
    before = recorder.client.requests
    await recorder.emit({"kind": "Pod", "namespace": "ns", "name": "a", "uid": "u"}, "Tested", "m")
    assert recorder.client.requests == before + 1 and client.requests == 0
    started = time.monotonic()
    await client.get(PATH)  # the writes' token is still there
    assert time.monotonic() - started < 0.5
    await recorder.client.close()  # closes nothing: the connections are the client's
    assert not client._session.closed
