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
