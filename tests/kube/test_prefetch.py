"""`draco run` asks for its first lists while it is still importing (kube/prefetch.py):
the feed takes that answer once instead of listing, and lists itself when the answer
failed or came from another server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from operators.cli.main import _prefetch_for_run
from operators.kube import prefetch
from operators.kube.client import Credentials
from operators.kube.pod_watch import PodFeed
from operators.tracker import Tracker

POD = {"metadata": {"name": "claim", "namespace": "default", "resourceVersion": "5"},
       "spec": {"containers": [{"name": "c", "image": "i"}],
                "resourceClaims": [{"name": "gpu", "resourceClaimName": "c"}]}}


class Fake:
    def __init__(self) -> None:
        self.lists: list[dict[str, str]] = []
        self.fail = False

    async def pods(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("watch"):
            resp = web.StreamResponse()
            await resp.prepare(request)
            await asyncio.sleep(30)
            return resp
        self.lists.append(dict(request.query))
        if self.fail:
            return web.json_response({"kind": "Status", "code": 403}, status=403)
        return web.json_response({"kind": "PodList", "metadata": {"resourceVersion": "7"}, "items": [POD]})


@pytest.fixture
async def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[Fake, str]]:
    state = Fake()
    app = web.Application()
    app.router.add_get("/api/v1/pods", state.pods)
    async with TestServer(app) as srv:
        url = str(srv.make_url("")).rstrip("/")
        config = {"apiVersion": "v1", "kind": "Config", "current-context": "c",
                  "clusters": [{"name": "c", "cluster": {"server": url}}],
                  "users": [{"name": "u", "user": {"token": "t"}}],
                  "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}
        (tmp_path / "kubeconfig").write_text(json.dumps(config))
        monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
        monkeypatch.delenv("DRACO_CONTROLLERS", raising=False)
        prefetch.forget()
        try:
            yield state, url
        finally:
            prefetch.forget()


async def first_list(url: str) -> PodFeed:
    tracker = Tracker()
    feed = PodFeed(tracker, credentials=lambda: Credentials(url, {}, False), delay=lambda a: 0.05)
    task = asyncio.create_task(feed.run())
    try:
        for _ in range(3000):
            if feed.synced.is_set():
                break
            await asyncio.sleep(0.01)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert {p.meta.name for p in tracker.pods()} == {"claim"} and feed.resource_version == "7"
    return feed


async def test_the_feed_takes_the_answer_asked_for_at_start(fake: tuple[Fake, Any]) -> None:
    state, url = fake
    _prefetch_for_run(["run", "--controllers", "narrowing", "--qps", "10"])
    await first_list(url)
    assert state.lists == [{"limit": "500", "resourceVersion": "0"}]  # asked once, at start
    assert await prefetch.take(prefetch.PATHS["Pod"], url) is None  # taken once


async def test_a_failed_early_answer_or_another_server_s_makes_the_feed_list_itself(
        fake: tuple[Fake, Any]) -> None:
    state, url = fake
    state.fail = True
    _prefetch_for_run(["run"])
    await asyncio.sleep(0.5)
    state.fail = False
    await first_list(url)
    assert len(state.lists) == 2  # the refused early list, then the feed's own
    prefetch.start([prefetch.PATHS["Pod"]])
    await first_list(url.replace("127.0.0.1", "localhost"))  # another server's name
    assert len(state.lists) == 4


def test_nothing_is_asked_for_help_for_none_or_for_other_commands(fake: tuple[Fake, Any]) -> None:
    for argv in (["run", "--help"], ["run", "--controllers=none"], ["devices"], []):
        _prefetch_for_run(argv)
    assert not prefetch._pending
    _prefetch_for_run(["run", "--controllers", "patches"])  # patches read slices, not pods
    assert set(prefetch._pending) == {prefetch.PATHS["ResourceSlice"]}
