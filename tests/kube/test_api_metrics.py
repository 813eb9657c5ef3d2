"""draco_api_request_errors_total through the real client against a local HTTP server,
draco_events_total from the recorder, and the allocation latency helper."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aiohttp import web
from prometheus_client import REGISTRY

from operators.kube.client import Credentials, KubeClient
from operators.kube.events import EventRecorder
from operators.kube.metrics import REASONS, VERBS, error_reason, gated_pod_done


def errors(verb: str, reason: str) -> float:
    return REGISTRY.get_sample_value("draco_api_request_errors_total", {"verb": verb, "reason": reason}) or 0.0


@pytest.mark.parametrize(("status", "path", "reason"), [
    (0, "/api/v1/pods", "transport"), (500, "/x", "server"), (503, "/x", "server"), (504, "/x", "server"),
    (429, "/api/v1/pods", "throttled"), (429, "/api/v1/namespaces/ns/pods/p/eviction", None),
    (401, "/x", "denied"), (403, "/x", "denied"), (400, "/x", "rejected"), (422, "/x", "rejected"),
    (404, "/x", None), (409, "/x", None), (200, "/x", None), (201, "/x", None),
])
def test_which_answers_are_errors(status: int, path: str, reason: str | None) -> None:
    assert error_reason(status, path) == reason


def test_every_verb_and_reason_has_a_series_from_the_start() -> None:
    for verb in VERBS:
        for reason in REASONS:
            assert REGISTRY.get_sample_value("draco_api_request_errors_total",
                                             {"verb": verb, "reason": reason}) is not None


def test_the_client_counts_every_failed_attempt_retries_too() -> None:
    answers = {"/flaky": [503, 503, 200], "/denied": [403], "/gone": [404]}

    async def handler(request: web.Request) -> web.Response:
        status = answers[request.path].pop(0)
        return web.json_response({"kind": "Status"}, status=status)

    async def scenario() -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        client = KubeClient(Credentials(f"http://127.0.0.1:{port}", {}, False), qps=0, retries=3)
        try:
            assert (await client.get("/flaky")).status == 200
            assert (await client.request("PATCH", "/denied", {})).status == 403
            assert (await client.delete("/gone")).status == 404
        finally:
            await client.close()
            await runner.cleanup()

    before = {key: errors(*key) for key in (("GET", "server"), ("PATCH", "denied"), ("DELETE", "rejected"))}
    asyncio.run(scenario())
    assert errors("GET", "server") - before[("GET", "server")] == 2
    assert errors("PATCH", "denied") - before[("PATCH", "denied")] == 1
    assert errors("DELETE", "rejected") == before[("DELETE", "rejected")]  # 404: expected


def test_the_client_counts_a_server_that_does_not_answer() -> None:
    client = KubeClient(Credentials("http://127.0.0.1:9", {}, False), qps=0, retries=1, timeout=5)
    before = errors("POST", "transport")

    async def scenario() -> Any:
        try:
            return await client.post("/api/v1/namespaces/ns/events", {})
        finally:
            await client.close()

    assert asyncio.run(scenario()).status == 0
    assert errors("POST", "transport") - before == 2


class Api:
    def __init__(self, ok: bool) -> None:
        self.ok = ok

    async def post(self, path: str, body: dict[str, Any]) -> Any:
        return type("Resp", (), {"ok": self.ok, "status": 201 if self.ok else 403})()


def events(component: str, outcome: str) -> float | None:
    return REGISTRY.get_sample_value("draco_events_total", {"component": component, "outcome": outcome})


def test_events_are_counted_by_outcome_from_zero() -> None:
    posting = EventRecorder(Api(True), "draco-metrics-test-ok")  # type: ignore[arg-type]
    refused = EventRecorder(Api(False), "draco-metrics-test-refused")  # type: ignore[arg-type]
    assert events("draco-metrics-test-ok", "dropped") == 0.0  # made with the recorder
    involved = {"kind": "Pod", "namespace": "ns", "name": "p", "uid": "u"}
    assert asyncio.run(posting.emit(involved, "Allocated", "one"))
    assert not asyncio.run(refused.emit(involved, "Allocated", "one"))
    assert events("draco-metrics-test-ok", "posted") == 1.0
    assert events("draco-metrics-test-refused", "failed") == 1.0
    assert events("draco-metrics-test-refused", "posted") == 0.0


def bucket(controller: str, le: str) -> float:
    return REGISTRY.get_sample_value("draco_allocation_duration_seconds_bucket",
                                     {"controller": controller, "le": le}) or 0.0


def test_a_gated_pods_wait_is_observed_from_its_creation() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    count = REGISTRY.get_sample_value("draco_allocation_duration_seconds_count", {"controller": "narrowing"})
    assert count is not None  # made at import, for both controllers
    below_5, below_10 = bucket("narrowing", "5.0"), bucket("narrowing", "10.0")
    gated_pod_done("narrowing", now - timedelta(seconds=7), now)
    gated_pod_done("narrowing", None, now)  # no creation time known: nothing observed
    assert bucket("narrowing", "5.0") == below_5 and bucket("narrowing", "10.0") == below_10 + 1
    assert REGISTRY.get_sample_value("draco_allocation_duration_seconds_count",
                                     {"controller": "narrowing"}) == count + 1
