"""The writer's HTTP requests: a merge patch on the status subresource, a core/v1 Event."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aiohttp import web

from operators.kube.client import Credentials, KubeClient
from operators.patches.kube_writer import KubePatchWriter, StatusWriteError
from operators.patches.report import EventSpec


@pytest.fixture
async def recorder() -> Any:
    seen: list[tuple[str, str, str, Any]] = []

    async def handle(request: web.Request) -> web.Response:
        body = await request.read()
        seen.append((request.method, request.path, request.headers.get("Content-Type", ""),
                     json.loads(body) if body else None))
        if request.path.endswith("/missing/status"):
            return web.json_response({"kind": "Status", "code": 404}, status=404)
        if request.path.endswith("/broken/status"):
            return web.json_response({"kind": "Status", "code": 500}, status=500)
        return web.json_response({})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    kube = KubeClient(Credentials(f"http://127.0.0.1:{port}", {}, False), retries=0)
    writer = KubePatchWriter(kube)
    yield writer, seen
    await writer.close()
    await runner.cleanup()


async def test_status_is_a_merge_patch_on_the_subresource(recorder: Any) -> None:
    writer, seen = recorder
    status = {"matchedDevices": 3, "observedGeneration": 2, "conditions": []}
    await writer.patch_status("p", status)
    assert seen == [("PATCH", "/apis/resource.draco.dev/v1alpha1/resourceslicepatches/p/status",
                     "application/merge-patch+json", {"status": status})]


async def test_a_deleted_patch_needs_no_status_but_other_failures_raise(recorder: Any) -> None:
    writer, _ = recorder
    await writer.patch_status("missing", {})
    with pytest.raises(StatusWriteError, match="HTTP 500"):
        await writer.patch_status("broken", {})


async def test_events_name_the_patch(recorder: Any) -> None:
    writer, seen = recorder
    involved = {"apiVersion": "resource.draco.dev/v1alpha1", "kind": "ResourceSlicePatch",
                "name": "p", "uid": "u1"}
    await writer.post_event(involved, EventSpec("SelectorFailed", "selector `x` failed", ("k",)))
    ((method, path, ctype, body),) = seen
    assert (method, path, ctype) == ("POST", "/api/v1/namespaces/default/events",
                                     "application/json")
    assert body["involvedObject"] == involved
    assert (body["reason"], body["type"], body["message"]) == (
        "SelectorFailed", "Warning", "selector `x` failed")
    assert body["metadata"]["generateName"] == "p."
