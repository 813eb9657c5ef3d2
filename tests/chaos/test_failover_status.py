"""Found by the chaos run (`draco_leader` changing ten times in four minutes, 469 Gang
status writes for 25 gangs): a new leader, whose memory of the statuses it wrote is
empty, wrote every Gang's status again with `lastTransitionTime` set to the moment it
took over, although the `Allocated` condition had not flipped. A failover is no
transition: the condition keeps its time, and a status that is already current is not
written at all."""

from __future__ import annotations

from typing import Any

from tests.fake_api import run
from tests.gangs.test_gang_controller import Cluster, halves_world
from tests.gangs.world import NS

GANG = f"/apis/resource.draco.dev/v1alpha1/namespaces/{NS}/gangs/g"
LONG_AGO = "2026-01-01T00:00:00Z"


def condition(c: Cluster) -> dict[str, Any]:
    return dict(c.gang_status()["conditions"][0])


def gang_writes(c: Cluster, since: int) -> list[Any]:
    return [b for m, p, b in c.api.calls[since:] if m in ("PATCH", "PUT") and p.startswith(GANG)]


def test_a_new_leader_keeps_the_condition_and_writes_nothing_when_the_status_is_current() -> None:
    c = Cluster(halves_world())
    run(c.settle())
    assert condition(c)["status"] == "True"
    c.api.touch(GANG, lambda g: g["status"]["conditions"][0].update(lastTransitionTime=LONG_AGO))
    c.start()  # the next leader: nothing of the last one's memory
    calls = len(c.api.calls)
    run(c.settle())
    assert condition(c)["lastTransitionTime"] == LONG_AGO
    assert gang_writes(c, calls) == []


def test_a_new_leader_keeps_the_time_of_a_condition_whose_status_stays_but_whose_words_change() -> None:
    c = Cluster(halves_world())
    run(c.settle())
    c.api.touch(GANG, lambda g: g["status"]["conditions"][0].update(
        lastTransitionTime=LONG_AGO, message="written by an older draco"))
    c.start()
    calls = len(c.api.calls)
    run(c.settle())
    cond = condition(c)
    assert cond["lastTransitionTime"] == LONG_AGO and cond["message"] != "written by an older draco"
    assert len(gang_writes(c, calls)) == 1


def test_a_condition_that_flips_under_a_new_leader_gets_a_new_time() -> None:
    c = Cluster(halves_world())
    run(c.settle())
    c.api.touch(GANG, lambda g: g["status"]["conditions"][0].update(
        status="False", reason="GangUnschedulable", lastTransitionTime=LONG_AGO))
    c.start()
    run(c.settle())
    cond = condition(c)
    assert cond["status"] == "True" and cond["lastTransitionTime"] != LONG_AGO


def test_concurrent_status_writes_of_one_gang_land_one_at_a_time_the_newest_last() -> None:
    """Found by the hostile-object run: decisions write a Gang's status from concurrent
    tasks, and an older status landing after a newer one left the Gang a decision behind."""
    import asyncio

    from operators.kube.client import Response

    c = Cluster(halves_world())
    placer = c.allocator.gangs
    landed: list[str] = []
    most = 0
    flying = 0

    class Slow:
        def __init__(self) -> None:
            self.release = asyncio.Event()

        async def merge_patch(self, path: str, body: Any) -> Response:
            nonlocal flying, most
            flying += 1
            most = max(most, flying)
            await self.release.wait()
            flying -= 1
            landed.append(body["status"]["conditions"][0]["reason"])
            return Response(200, {})

    slow = Slow()
    placer.status.client = slow  # type: ignore[assignment]
    key = ("Gang", NS, "g")

    async def go() -> None:
        tasks = [asyncio.create_task(placer.status.patch(
            key, {"conditions": [{"type": "Allocated", "status": "False", "reason": reason}]}))
            for reason in ("GangNotFound", "Unschedulable", "GangUnschedulable")]
        await asyncio.sleep(0)
        slow.release.set()
        await asyncio.gather(*tasks)

    run(go())
    assert landed == ["GangNotFound", "GangUnschedulable"], "the newest last; a superseded one never"
    assert most == 1, "one write per gang at a time"
    assert placer.status.latest == {} and placer.status.writing == set()


def test_a_superseded_status_write_keeps_what_only_it_set() -> None:
    """Gang statuses are merge patches: the status written when the gang is placed sets
    its domain and nodes, later ones leave them out. When the placed one is superseded
    before it is sent, what only it set is still written (a real-cluster run saw a placed
    Gang without its domain)."""
    import asyncio

    from operators.kube.client import Response

    c = Cluster(halves_world())
    placer = c.allocator.gangs
    sent: list[dict[str, Any]] = []

    class Slow:
        def __init__(self) -> None:
            self.release = asyncio.Event()

        async def merge_patch(self, path: str, body: Any) -> Response:
            await self.release.wait()
            sent.append(body["status"])
            return Response(200, {})

    slow = Slow()
    placer.status.client = slow  # type: ignore[assignment]
    key = ("Gang", NS, "g")
    cond = [{"type": "Allocated", "status": "True", "reason": "Allocated"}]

    async def go() -> None:
        tasks = [asyncio.create_task(placer.status.patch(key, status)) for status in (
            {"placed": 0, "conditions": cond},
            {"placed": 2, "domain": "rack=r1", "nodes": ["n-1"], "conditions": cond},
            {"placed": 2, "members": 2, "conditions": cond})]
        await asyncio.sleep(0)
        slow.release.set()
        await asyncio.gather(*tasks)

    run(go())
    assert sent[-1]["domain"] == "rack=r1" and sent[-1]["nodes"] == ["n-1"] and sent[-1]["members"] == 2
