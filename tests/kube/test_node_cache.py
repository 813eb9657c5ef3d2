"""The node cache the allocator and the admission check share: a heartbeat wakes
nothing, a label, taint or cordon does; the first listing never overwrites a node the
watch already delivered; a failed listing is said and tried again."""

from __future__ import annotations

import asyncio
from typing import Any

from operators.kube.client import Response
from operators.kube.node_cache import NodeCache


def node(name: str, labels: dict[str, str] | None = None, heartbeat: str = "t0",
         unschedulable: bool = False) -> dict[str, Any]:
    return {"kind": "Node", "metadata": {"name": name, "labels": labels or {}},
            "spec": {"unschedulable": unschedulable},
            "status": {"conditions": [{"type": "Ready", "lastHeartbeatTime": heartbeat}]}}


class Client:
    def __init__(self, *answers: Response) -> None:
        self.answers = list(answers)

    async def get(self, path: str) -> Response:
        assert path == "/api/v1/nodes"
        return self.answers.pop(0)


def test_only_what_decisions_read_counts_as_a_change() -> None:
    cache = NodeCache()
    assert cache.event("ADDED", node("n-1")) == "n-1"
    assert cache.event("MODIFIED", node("n-1", heartbeat="t1")) is None
    assert cache.event("MODIFIED", node("n-1", {"rack": "a"})) == "n-1"
    assert cache.event("MODIFIED", node("n-1", {"rack": "a"}, unschedulable=True)) == "n-1"
    assert cache.event("DELETED", node("n-2")) is None
    assert cache.event("DELETED", node("n-1")) == "n-1" and cache.nodes == {}
    assert cache.event("ADDED", {"kind": "Node", "metadata": {}}) is None


def test_the_listing_keeps_what_the_watch_delivered_and_a_failure_is_retried() -> None:
    cache = NodeCache()
    cache.event("ADDED", node("n-1", {"rack": "new"}))
    failed = Client(Response(503, {"message": "down"}))
    assert asyncio.run(cache.load(failed)) == 503 and not cache.listed  # type: ignore[arg-type]
    listing = Client(Response(200, {"items": [node("n-1", {"rack": "old"}), node("n-0"), "junk"]}))
    assert asyncio.run(cache.load(listing)) is None and cache.listed  # type: ignore[arg-type]
    assert [n.name for n in cache.in_order()] == ["n-0", "n-1"]
    assert cache.nodes["n-1"].labels == {"rack": "new"}
