"""draco's own list+watch of ResourceClaims and ResourceSlices (kube/list_watch.py): the
tracker holds what the cluster has, a list page reaches the controllers as one
notification, and kopf no longer watches these kinds."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import kopf
import pytest

from operators.apiserver.testing import EmbeddedCluster
from operators.kube.client import Credentials
from operators.kube.feed import OWN_FEEDS, SyncGate, register_feed
from operators.kube.list_watch import CLAIMS, SLICES, ListWatch
from operators.model import NamespacedName
from operators.tracker import Tracker
from tests.model.model_cases import claim_obj, slice_obj

NS = "default"
CLAIMS_PATH = f"/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaims"
SLICES_PATH = "/apis/resource.k8s.io/v1/resourceslices"


class Api:
    def __init__(self, url: str) -> None:
        self.url = url

    def _call(self, method: str, path: str, body: Any, ctype: str) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": ctype})
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read() or b"null")

    async def __call__(self, method: str, path: str, body: Any = None,
                       ctype: str = "application/json") -> Any:
        return await asyncio.to_thread(self._call, method, path, body, ctype)


def claim(name: str) -> dict[str, Any]:
    body = claim_obj()
    body["metadata"] = {"name": name, "namespace": NS}
    return body


def a_slice(name: str) -> dict[str, Any]:
    body = slice_obj(nodeName=name, pool={"name": name, "generation": 1, "resourceSliceCount": 1})
    body["metadata"] = {"name": name}
    return body


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Api]:
    cluster = EmbeddedCluster(tmp_path)
    try:
        yield Api(cluster.url)
    finally:
        cluster.stop()


async def until(check: Any, what: str) -> None:
    for _ in range(3000):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


async def test_claims_and_slices_reach_the_tracker_through_draco_s_own_watch(api: Api) -> None:
    for i in range(12):
        await api("POST", CLAIMS_PATH, claim(f"c-{i}"))
    for node in ("node-a", "node-b"):
        await api("POST", SLICES_PATH, a_slice(node))
    tracker, gate = Tracker(), SyncGate()
    notified: list[int] = []
    tracker.subscribe(lambda change: notified.append(1))
    creds = Credentials(api.url, {}, False)
    feeds = [ListWatch(kind, tracker, gate, credentials=lambda: creds, page_size=5,
                       delay=lambda attempt: 0.05) for kind in (CLAIMS, SLICES)]
    assert gate.held == {"ResourceClaim", "ResourceSlice"}  # the initial sync waits for both
    tasks = [asyncio.create_task(f.run()) for f in feeds]
    try:
        await until(lambda: all(f.synced.is_set() for f in feeds), "the first lists")
        assert not gate.held
        assert {c.meta.name for c in tracker.claims()} == {f"c-{i}" for i in range(12)}
        assert {s.meta.name for s in tracker.resource_slices()} == {"node-a", "node-b"}
        # pages of 5: three claim pages and one slice page, each one notification
        assert feeds[0].stats.lists == 1 and len(notified) <= 3 + 1

        # watch: a status change, a deletion, a new slice
        await api("PUT", f"{CLAIMS_PATH}/c-0/status", {**claim("c-0"), "status": {"allocation": {
            "devices": {"results": [{"request": "gpu", "driver": "gpu.example.com",
                                     "pool": "node-a", "device": "gpu-1"}]}}},
            "metadata": {**(await api("GET", f"{CLAIMS_PATH}/c-0"))["metadata"]}})
        await until(lambda: bool(tracker.claim_devices(NamespacedName(NS, "c-0"))), "the allocation")
        await api("DELETE", f"{CLAIMS_PATH}/c-1")
        await api("POST", SLICES_PATH, a_slice("node-c"))
        await until(lambda: tracker.claim(NamespacedName(NS, "c-1")) is None, "the deleted claim to go")
        await until(lambda: tracker.resource_slice("node-c") is not None, "the new slice")
        assert feeds[0].stats.bad == feeds[1].stats.bad == 0
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def test_a_relist_drops_claims_and_slices_deleted_while_draco_was_not_watching() -> None:
    tracker = Tracker()
    claims, slices = ListWatch(CLAIMS, tracker), ListWatch(SLICES, tracker)
    for name in ("kept", "gone"):
        claims.offer("ADDED", json.dumps(claim(name)).encode())
        slices.offer("ADDED", json.dumps(a_slice(name)).encode())
    # what _list does after a page that has "kept" only
    for feed in (claims, slices):
        for stale in [o for o in feed.kind.held(tracker) if o.meta.name != "kept"]:
            feed._apply("DELETED", stale)
    assert [c.meta.name for c in tracker.claims()] == ["kept"]
    assert [s.meta.name for s in tracker.resource_slices()] == ["kept"]


def test_kopf_watches_none_of_the_many_object_kinds() -> None:
    registry = kopf.OperatorRegistry()
    kinds = ["ResourceSlice", "DeviceClass", "ResourceClaim", "Pod", "DeviceTaintRule"]
    register_feed(registry, Tracker(), kinds, SyncGate())
    watched = {h.selector.plural for h in registry._watching.get_all_handlers()}  # type: ignore[union-attr]
    assert watched == {"deviceclasses", "devicetaintrules"}
    assert set(OWN_FEEDS) == {"Pod", "ResourceClaim", "ResourceSlice"}
