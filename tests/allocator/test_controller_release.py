"""The allocator's and the narrowing controller's per-pod bookkeeping (reports, waits,
retries, holds, deadlines) is released when the pod goes: a long-running draco keeps
nothing for pods that no longer exist."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tests.allocator import test_controller_allocator as alloc
from tests.fake_api import run
from tests.narrowing import test_narrowing_loop as narrow

ALLOCATOR_MAPS = ("pending", "in_flight", "again", "unsatisfied", "retry_at", "stale", "reported")
NARROWING_MAPS = ("pending", "in_flight", "again", "deadlines", "retry_at", "reported")


def kept(controller: Any, names: tuple[str, ...]) -> dict[str, int]:
    return {n: len(getattr(controller, n)) for n in names if getattr(controller, n)}


def test_the_allocator_forgets_deleted_pods() -> None:
    # 1 device, 3 gated pods: one gets it, two are reported unschedulable
    s = alloc.Scenario([alloc.gpu_class(), alloc.slice_("node-0", "d0")]
                       + [o for i in range(3) for o in (alloc.pod(f"p{i}", f"c{i}"), alloc.claim(f"c{i}"))])
    run(s.step())
    assert kept(s.controller, ALLOCATOR_MAPS) == {"unsatisfied": 2, "reported": 2}
    for i in range(3):
        s.echo(f"c{i}")
    for i in range(3):
        s.feed(s.api.pod(alloc.NS, f"p{i}"), "DELETED")
        s.feed(s.api.claim(alloc.NS, f"c{i}"), "DELETED")
    run(s.step())
    assert kept(s.controller, ALLOCATOR_MAPS) == {}
    assert len(s.controller.holds) == 0


def test_the_narrowing_controller_forgets_deleted_pods() -> None:
    s = narrow.Scenario([narrow.pod("a"), narrow.claim("c", allocated=False),
                         narrow.pod("b", claims=("d",)), narrow.claim("d", allocated=False)], timeout=60)

    async def go() -> None:
        await s.step()
        assert kept(s.controller, NARROWING_MAPS) == {"deadlines": 2}
        s.now = narrow.T0 + timedelta(seconds=61)
        await s.step()  # both reported as not allocated
        for name in ("a", "b"):
            s.feed(s.stored(name), "DELETED")
        await s.step()

    run(go())
    assert [e["reason"] for e in s.api.events] == ["ClaimsNotAllocated"] * 2
    assert kept(s.controller, NARROWING_MAPS) == {}


def test_each_search_starts_where_the_last_one_stopped_and_pod_shapes_are_filtered_once() -> None:
    """As kube-scheduler's node search resumes after the node it stopped at: pods
    spread over equally good nodes instead of walking the full ones at the front again
    (quadratic at 2,000 nodes). Pods of one shape share one node filtering."""
    nodes = ("node-0", "node-1", "node-2")
    s = alloc.Scenario([alloc.gpu_class(), *(alloc.slice_(n, "d0", "d1") for n in nodes)]
                       + [o for i in range(4) for o in (alloc.pod(f"p{i}", f"c{i}"), alloc.claim(f"c{i}"))],
                       nodes=nodes)
    run(s.step())
    pools = [s.claim(f"c{i}")["status"]["allocation"]["devices"]["results"][0]["pool"] for i in range(4)]
    assert pools == ["node-0", "node-1", "node-2", "node-0"]
    index = s.controller._index
    assert index is not None and len(index.filtered) == 1


def test_draco_allocate_always_starts_at_the_first_node() -> None:
    from operators.allocator.inventory import inventory_from_tracker
    from operators.allocator.nodes import NodeIndex, place
    from operators.cli.state import build_tracker
    from operators.model.nodes import parse_node

    objs = [alloc.gpu_class(), alloc.slice_("node-0", "d0"), alloc.slice_("node-1", "d0"), alloc.claim("c")]
    tracker = build_tracker(objs)
    index = NodeIndex(inventory_from_tracker(tracker), [parse_node(alloc.node(n)) for n in ("node-0", "node-1")])
    classes = {c.name: c for c in tracker.device_classes()}
    claim = tracker.claim(next(iter(c.meta.key for c in tracker.claims())))
    assert claim is not None
    first = place([claim], index, classes, set(), 5.0)
    resumed = place([claim], index, classes, set(), 5.0, start=1)
    assert (first.node, first.examined) == ("node-0", 1)
    assert (resumed.node, resumed.examined) == ("node-1", 1)
