"""The allocator with `--preemption` and a gang as the preemptor, against the fake API:
every member's nomination is in the API before a victim is touched, the victims go once,
the gang is placed all together on the freed devices, no other pod takes them meanwhile,
and a new draco finishes the same gang nomination."""

from __future__ import annotations

import asyncio
from typing import Any

from operators.preemption.nomination import NOMINATION_ANNOTATION
from tests.fake_api import run
from tests.gangs.world import NS, classes, gang, gpus, node, node_slice
from tests.preemption.test_gang_preemptor import members
from tests.preemption.test_preemption_controller import Cluster
from tests.preemption.test_victims import preemptor, running


def world() -> list[dict[str, Any]]:
    """Two racks of two one-GPU nodes; rack r1's GPUs are held by priority-0 pods, rack
    r2's by priority-5 pods; a priority-100 gang of two wants one rack, and a priority-0
    single pod created at the same moment wants a GPU too."""
    out = [*classes()]
    for name, rack in (("a1", "r1"), ("a2", "r1"), ("b1", "r2"), ("b2", "r2")):
        out += [node(name, rack=rack), *node_slice(name, gpus(1))]
    out += [*running("low-a1", "a1", "gpu-0", priority=0), *running("low-a2", "a2", "gpu-0", priority=0),
            *running("mid-b1", "b1", "gpu-0", priority=5), *running("mid-b2", "b2", "gpu-0", priority=5),
            gang("team", 2, node_label="rack"), *members("team", 2), *preemptor("other", priority=0)]
    return out


def placed_on(c: Cluster, claim: str) -> list[str]:
    alloc = (c.api.claim(NS, claim).get("status") or {}).get("allocation")
    return [f"{r['pool']}/{r['device']}" for r in alloc["devices"]["results"]] if alloc else []


def test_the_gang_gets_the_freed_rack_all_together() -> None:
    c = Cluster(world())
    run(c.settle())
    n0, n1 = c.nomination("m-0"), c.nomination("m-1")
    assert n0 is not None and n1 is not None
    assert n0["victims"] == n1["victims"] == [f"{NS}/low-a1", f"{NS}/low-a2"]
    assert {n0["node"], n1["node"]} == {"a1", "a2"}
    assert sorted(n0["devices"] + n1["devices"]) == ["driver-a/a1/gpu-0", "driver-a/a2/gpu-0"]
    assert c.pod("low-a1") is None and c.pod("low-a2") is None
    assert c.pod("mid-b1") is not None and c.pod("mid-b2") is not None
    calls = [(m, p) for m, p, _ in c.api.calls]
    last_nomination = max(i for i, (m, p) in enumerate(calls)
                          if m == "PATCH" and p.endswith(("/pods/m-0", "/pods/m-1")))
    first_delete = min(i for i, (m, _) in enumerate(calls) if m == "DELETE")
    assert last_nomination < first_delete, "both nominations stand before the first victim goes"
    assert sum(1 for m, _ in calls if m == "DELETE") == 2, "each victim is evicted once"
    status = c.api.objects[f"/apis/resource.draco.dev/v1alpha1/namespaces/{NS}/gangs/team"]["status"]
    assert status["conditions"][0]["reason"] == "WaitingForPreemption"
    c.release_claims_of_gone_pods()
    run(c.settle())
    assert sorted(placed_on(c, "m-0-claim") + placed_on(c, "m-1-claim")) == ["a1/gpu-0", "a2/gpu-0"]
    assert placed_on(c, "other-claim") == [], "the nominated devices went to no one else"
    assert c.nomination("m-0") is None and c.nomination("m-1") is None
    assert {"Preempting", "Preempted"} <= {e["reason"] for e in c.api.events}


def test_a_new_draco_finishes_the_same_gang_nomination() -> None:
    c = Cluster(world())
    c.api.deletes_left = 1  # dies after the first victim's deletion
    run(c.settle())
    first = (c.nomination("m-0"), c.nomination("m-1"))
    assert first[0] is not None and first[1] is not None
    assert [c.pod("low-a1") is None, c.pod("low-a2") is None].count(True) == 1
    c.start()  # a newly elected draco, from the API's objects
    run(c.settle())
    assert c.pod("low-a1") is None and c.pod("low-a2") is None
    assert c.pod("mid-b1") is not None and c.pod("mid-b2") is not None, "no new victims"
    assert (c.nomination("m-0"), c.nomination("m-1")) == first, "the same nomination"
    c.release_claims_of_gone_pods()
    run(c.settle())
    assert sorted(placed_on(c, "m-0-claim") + placed_on(c, "m-1-claim")) == ["a1/gpu-0", "a2/gpu-0"]


def test_a_gang_of_no_higher_priority_waits_as_before() -> None:
    objs = world()
    for obj in objs:
        if obj["kind"] == "Pod" and obj["metadata"]["name"] in ("m-0", "m-1"):
            obj["spec"]["priority"] = 0
    c = Cluster(objs)
    run(c.settle())
    assert c.nomination("m-0") is None and c.pod("low-a1") is not None
    status = c.api.objects[f"/apis/resource.draco.dev/v1alpha1/namespaces/{NS}/gangs/team"]["status"]
    assert status["conditions"][0]["reason"] == "GangUnschedulable"


def test_a_single_pod_preempting_beside_the_gang_never_shares_its_devices() -> None:
    """A priority-100 single pod decided after the gang: the gang's nominated GPUs stay
    taken for it, so it preempts elsewhere (a mid pod of rack r2), and after the
    releases both get distinct GPUs."""
    objs = world()
    for obj in objs:
        if obj["kind"] == "Pod" and obj["metadata"]["name"] == "other":
            obj["spec"]["priority"] = 100
    c = Cluster(objs)
    run(c.settle())
    gang_devices = set(c.nomination("m-0")["devices"] + c.nomination("m-1")["devices"])
    other = c.nomination("other")
    assert other is not None and not gang_devices & set(other["devices"]), "no device nominated twice"
    assert other["victims"] in ([f"{NS}/mid-b1"], [f"{NS}/mid-b2"])
    c.release_claims_of_gone_pods()
    run(c.settle())
    placed = placed_on(c, "m-0-claim") + placed_on(c, "m-1-claim") + placed_on(c, "other-claim")
    assert len(placed) == 3 and len(set(placed)) == 3
    assert sorted(placed_on(c, "m-0-claim") + placed_on(c, "m-1-claim")) == ["a1/gpu-0", "a2/gpu-0"]


def test_passes_while_the_nomination_is_written_evict_no_one_twice() -> None:
    """Deletions answer slowly; the allocator keeps deciding meanwhile (pod events, the
    gang's report): the gang is not nominated again and each victim is deleted once."""
    c = Cluster(world())
    c.api.delete_delay = 0.05
    allocator = c.allocator

    async def passes() -> None:
        for _ in range(4):
            await allocator.step()
            await asyncio.sleep(0.02)  # the nomination's writes run, a deletion is pending
            c.echo()
            allocator.gangs.gang_queue.add(("Gang", NS, "team"))
        while allocator.tasks:
            await asyncio.gather(*list(allocator.tasks), return_exceptions=True)

    run(passes())
    deletes = [p for m, p, _ in c.api.calls if m == "DELETE"]
    assert sorted(deletes) == sorted(set(deletes)) and len(deletes) == 2, deletes
    nominations = [p for m, p, b in c.api.calls if m == "PATCH" and p.endswith("/pods/m-0")
                   and NOMINATION_ANNOTATION in str(b)]
    assert len(nominations) == 1, "nominated once"


def test_only_the_core_is_nominated() -> None:
    objs = world()
    objs += members("team", 3)[4:]  # m-2: a member beyond minCount 2
    c = Cluster(objs)
    run(c.settle())
    assert c.nomination("m-0") is not None and c.nomination("m-1") is not None
    assert c.nomination("m-2") is None, "an extra is placed when it fits, never nominated"
    c.release_claims_of_gone_pods()
    run(c.settle())
    assert sorted(placed_on(c, "m-0-claim") + placed_on(c, "m-1-claim")) == ["a1/gpu-0", "a2/gpu-0"]
    assert c.nomination("m-0") is None and c.nomination("m-1") is None and c.nomination("m-2") is None
