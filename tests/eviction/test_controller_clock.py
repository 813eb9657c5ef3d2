"""The controller loop with a fake clock and a recording API client: no sleeping."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from operators.cli.state import build_tracker
from operators.eviction.controller import EvictionController, EvictionSettings
from operators.kube.client import Response

T0 = datetime(2026, 1, 1, tzinfo=UTC)


class RecordingClient:
    """Answers every write with success and remembers it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []

    async def request(self, method: str, path: str, body: Any = None, content_type: str = "") -> Response:
        self.calls.append((method, path, body))
        return Response(200 if method != "POST" else 201, {"metadata": {}})

    async def get(self, path: str) -> Response:
        return await self.request("GET", path)

    async def post(self, path: str, body: Any) -> Response:
        return await self.request("POST", path, body)

    async def merge_patch(self, path: str, body: Any) -> Response:
        return await self.request("PATCH", path, body, "merge")

    async def strategic_patch(self, path: str, body: Any) -> Response:
        return await self.request("PATCH", path, body, "strategic")

    async def delete(self, path: str, body: Any = None) -> Response:
        return await self.request("DELETE", path, body)

    def deleted(self) -> list[str]:
        return [p for m, p, _ in self.calls if m == "DELETE"]


def objects(toleration_seconds: int) -> list[dict[str, Any]]:
    return [
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
         "spec": {"driver": "gpu.example.com", "nodeName": "n1", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                  "devices": [{"name": "d0", "taints": [{"key": "k", "effect": "NoExecute", "timeAdded": "2026-01-01T00:00:00Z"}]}]}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c", "namespace": "ns", "uid": "uc"},
         "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
         "status": {"allocation": {"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "p", "device": "d0",
                                                             "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoExecute",
                                                                              "tolerationSeconds": toleration_seconds}]}]}},
                    "reservedFor": [{"resource": "pods", "name": "a", "uid": "ua"}]}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "namespace": "ns", "uid": "ua"},
         "spec": {"nodeName": "n1", "resourceClaims": [{"name": "gpu", "resourceClaimName": "c"}], "containers": [{"name": "c", "image": "i"}]},
         "status": {"phase": "Running"}},
    ]


def test_toleration_seconds_delay_eviction_on_the_controllers_clock() -> None:
    now = [T0 + timedelta(seconds=10)]
    tracker = build_tracker(objects(toleration_seconds=300))
    client = RecordingClient()

    async def scenario() -> tuple[float, list[str], list[str]]:
        controller = EvictionController(tracker, client, EvictionSettings(), clock=lambda: now[0])  # type: ignore[arg-type]
        wait = await controller.step()
        before = list(client.deleted())
        now[0] = T0 + timedelta(seconds=300)
        await controller.step()
        await asyncio.gather(*controller.tasks)
        return wait, before, client.deleted()

    wait, before, after = asyncio.run(scenario())
    assert before == []
    assert 0 < wait <= 5  # it re-checks at most every 5 s (and at the due time), never busy-loops
    assert after == ["/api/v1/namespaces/ns/pods/a"]
    marks = [b for m, p, b in client.calls if m == "PATCH" and p.endswith("/a/status")]
    assert marks and marks[0]["metadata"]["uid"] == "ua"
    assert marks[0]["status"]["conditions"][0]["type"] == "DisruptionTarget"


def test_an_evicted_pod_is_never_evicted_twice() -> None:
    tracker = build_tracker(objects(toleration_seconds=0))
    client = RecordingClient()

    async def scenario() -> list[str]:
        controller = EvictionController(tracker, client, EvictionSettings(), clock=lambda: T0 + timedelta(hours=1))  # type: ignore[arg-type]
        for _ in range(3):  # the pod is still in the tracker: no DELETED event arrived yet
            await controller.step()
            await asyncio.gather(*controller.tasks)
        return client.deleted()

    assert asyncio.run(scenario()) == ["/api/v1/namespaces/ns/pods/a"]


def test_an_evicted_pods_uid_is_forgotten_once_the_pod_is_gone() -> None:
    """"Never twice" needs the uid only while the pod exists: a long-running controller
    keeps nothing of the pods it evicted once their DELETED event arrived."""
    objs = objects(toleration_seconds=0)
    tracker = build_tracker(objs)
    client = RecordingClient()

    async def scenario() -> tuple[set[str], set[str]]:
        controller = EvictionController(tracker, client, EvictionSettings(), clock=lambda: T0 + timedelta(hours=1))  # type: ignore[arg-type]
        await controller.step()
        await asyncio.gather(*controller.tasks)
        evicted = set(controller.done)
        terminating = {**objs[2], "metadata": {**objs[2]["metadata"], "deletionTimestamp": "2026-01-01T01:00:00Z"}}
        tracker.apply({"type": "MODIFIED", "object": terminating})
        await controller.step()
        assert controller.done == {"ua"}  # still terminating: still remembered
        tracker.apply({"type": "DELETED", "object": terminating})
        await controller.step()
        return evicted, controller.done | controller.left_to_upstream | controller.refused | set(controller._uids)

    evicted, left = asyncio.run(scenario())
    assert evicted == {"ua"} and left == set()
    assert client.deleted() == ["/api/v1/namespaces/ns/pods/a"]


def test_a_pass_starts_only_as_many_evictions_as_there_are_free_workers() -> None:
    """12 due pods and 3 workers: the queue keeps the rest, and no pass walks the
    evictions under way (it did after every eviction: quadratic in the pods)."""
    objs = objects(toleration_seconds=0)
    pods = []
    for i in range(12):
        pod = {**objs[2], "metadata": {**objs[2]["metadata"], "name": f"a{i}", "uid": f"ua{i}"}}
        pods.append(pod)
    claim = objs[1]
    claim = {**claim, "status": {**claim["status"], "reservedFor": [
        {"resource": "pods", "name": p["metadata"]["name"], "uid": p["metadata"]["uid"]} for p in pods]}}
    tracker = build_tracker([objs[0], claim, *pods])
    release = asyncio.Event()

    class SlowClient(RecordingClient):
        async def delete(self, path: str, body: Any = None) -> Response:
            await release.wait()
            return await super().delete(path, body)

    client = SlowClient()

    async def scenario() -> tuple[int, int, int, list[str]]:
        controller = EvictionController(tracker, client, EvictionSettings(workers=3),  # type: ignore[arg-type]
                                        clock=lambda: T0 + timedelta(hours=1))
        await controller.step()
        await asyncio.sleep(0.05)
        started, queued = len(controller.in_flight), len(controller.queue)
        await controller.step()  # nothing finished: nothing more starts
        again = len(controller.in_flight)
        release.set()
        for _ in range(20):
            await asyncio.gather(*controller.tasks)
            await controller.step()
        return started, queued, again, client.deleted()

    started, queued, again, deleted = asyncio.run(scenario())
    assert (started, queued, again) == (3, 9, 3)
    assert sorted(deleted) == sorted(f"/api/v1/namespaces/ns/pods/a{i}" for i in range(12))
