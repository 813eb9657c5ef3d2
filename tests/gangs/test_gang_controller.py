"""The allocator and narrowing controllers on a gang, against the fake API.

What a user would notice: a gang's members get their devices together (#138765's
shape: two halves) and are ungated only once all of them have them; a gang that
does not fit holds nothing; and a draco killed at any claim write leaves, once a new
draco has run, either the whole gang allocated or none of it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from prometheus_client import REGISTRY

from operators.allocator_controller.controller import AllocatorController, AllocatorSettings
from operators.cli.state import build_tracker
from operators.narrowing.controller import NarrowingController, NarrowingSettings
from operators.tracker import Tracker
from tests.fake_api import FakeAPI, Response, run
from tests.gangs.test_gang_placement import WHOLE_OR_HALF, partitioned_node
from tests.gangs.world import (
    NS,
    allocated_on,
    classes,
    gang,
    gpus,
    joining,
    member,
    node,
    node_slice,
    pod_group,
)

STORED = ("Pod", "ResourceClaim", "Gang")


class Killed(Exception):
    """The process died: this request and every later one never reach the server."""


class KillableAPI(FakeAPI):
    def __init__(self) -> None:
        super().__init__()
        self.claim_writes_left: int | None = None  # None: never killed
        self.dead = False

    async def request(self, method: str, path: str, body: Any = None, content_type: str = "") -> Response:
        if self.dead:
            raise Killed
        if method in ("PUT", "PATCH") and "/resourceclaims/" in path and self.claim_writes_left is not None:
            if self.claim_writes_left == 0:
                self.dead = True
                raise Killed
            self.claim_writes_left -= 1
        return await super().request(method, path, body, content_type)


class Cluster:
    """One fake API server; draco (tracker, allocator, narrowing) can be killed and started
    afresh against it, as a restarted or newly elected draco would start."""

    settings = AllocatorSettings()

    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self.api = self.new_api()
        self.others = [o for o in objects if o["kind"] not in STORED]
        self.api.nodes = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Node"}
        for obj in objects:
            if obj["kind"] in STORED:
                self.api.add(obj)
        self.start()

    def start(self) -> None:
        self.api.dead = False
        self.now = 1000.0
        self.tracker: Tracker = build_tracker(self.others + list(self.api.objects.values()))
        self.allocator = AllocatorController(self.tracker, self.api, self.settings,  # type: ignore[arg-type]
                                             monotonic=lambda: self.now)
        self.narrowing = NarrowingController(self.tracker, self.api, NarrowingSettings())  # type: ignore[arg-type]

    def new_api(self) -> KillableAPI:
        return KillableAPI()

    def echo(self) -> None:
        """Every stored object's watch event."""
        for obj in list(self.api.objects.values()):
            self.tracker.apply({"type": "MODIFIED", "object": obj})

    async def settle(self, rounds: int = 4) -> None:
        for _ in range(rounds):
            for controller in (self.allocator, self.narrowing):
                await controller.step()
                while controller.tasks:
                    await asyncio.gather(*list(controller.tasks), return_exceptions=True)
                if self.api.dead:
                    return
                self.echo()

    def claim(self, name: str) -> dict[str, Any]:
        return self.api.claim(NS, name)

    def allocated(self, *names: str) -> list[bool]:
        return [bool(self.claim(n).get("status", {}).get("allocation")) for n in names]

    def gated(self, name: str) -> bool:
        return bool(self.api.pod(NS, name)["spec"].get("schedulingGates"))

    def gang_status(self, name: str = "g") -> dict[str, Any]:
        stored: dict[str, Any] = self.api.objects[f"/apis/resource.draco.dev/v1alpha1/namespaces/{NS}/gangs/{name}"]
        return stored.get("status") or {}


def halves_world(pods: int = 2) -> list[dict[str, Any]]:
    objs = [*classes(), node("node-1"), *partitioned_node("node-1"), gang("g", pods)]
    for i in range(pods):
        objs += member(f"p-{i}", "g", WHOLE_OR_HALF)
    return objs


def allocator_latencies() -> float:
    """How many allocations draco_allocation_duration_seconds{controller="allocator"} has seen."""
    return REGISTRY.get_sample_value("draco_allocation_duration_seconds_count",
                                     {"controller": "allocator"}) or 0.0


def test_138765_members_get_halves_and_are_ungated_together() -> None:
    objs = halves_world()
    for obj in objs:
        if obj["kind"] == "Pod":  # the API server sets it; the latency counts from it
            obj["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    c = Cluster(objs)
    seen = allocator_latencies()
    run(c.settle())
    assert allocator_latencies() - seen == 2, "each member's allocation latency is observed"
    devices = sorted(c.claim(f"p-{i}-claim")["status"]["allocation"]["devices"]["results"][0]["device"]
                     for i in range(2))
    assert devices == ["half-a", "half-b"]
    for i in range(2):
        assert c.claim(f"p-{i}-claim")["status"]["reservedFor"][0]["name"] == f"p-{i}"
        assert not c.gated(f"p-{i}"), "a complete gang's members are ungated"
    status = c.gang_status()
    assert status["placed"] == 2 and status["nodes"] == ["node-1"]
    assert status["conditions"][0]["type"] == "Allocated" and status["conditions"][0]["status"] == "True"


def test_a_gang_short_of_members_holds_nothing_and_says_why() -> None:
    objs = [gang("g", 3) if o["kind"] == "Gang" else o for o in halves_world(1)]
    c = Cluster(objs)
    run(c.settle())
    assert c.allocated("p-0-claim") == [False]
    assert c.gated("p-0")
    cond = c.gang_status()["conditions"][0]
    assert cond["status"] == "False" and cond["reason"] == "GangUnschedulable"
    assert "waiting for members: 1 of 3 exist" in cond["message"]
    warnings = [e["reason"] for e in c.api.events if e["type"] == "Warning"]
    assert "GangUnschedulable" in warnings


def test_a_placed_member_is_not_ungated_while_its_gang_is_incomplete() -> None:
    """p-0's claim is allocated and reserved (left by a killed draco, say) but p-1 cannot
    get a device: the narrowing keeps p-0 gated, and the allocator releases p-0's claim."""
    objs = [*classes(), node("node-1"), *partitioned_node("node-1"), gang("g", 2)]
    whole_only = [{"name": "gpu", "class": "class-a",
                   "selectors": ['device.attributes["driver-a"].size == "whole"']}]
    objs += member("p-0", "g", whole_only) + member("p-1", "g", whole_only)
    c = Cluster(objs)
    c.api.touch(f"/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaims/p-0-claim", lambda o: o.update(
        status={"allocation": {"devices": {"results": [
            {"request": "gpu", "driver": "driver-a", "pool": "node-1", "device": "whole"}]}},
            "reservedFor": [{"resource": "pods", "name": "p-0", "uid": "uid-p-0"}]}))
    c.start()
    run(c.settle())
    assert c.gated("p-0") and c.gated("p-1")
    assert c.allocated("p-0-claim", "p-1-claim") == [False, False], "an incomplete gang holds nothing"


@pytest.mark.parametrize("kill_at", range(8))
def test_a_kill_at_any_claim_write_leaves_all_or_nothing(kill_at: int) -> None:
    """Three members, one claim each; each claim costs two writes (finalizer, then
    allocation with reservation): a kill before write k, for every k, then a new draco."""
    c = Cluster(halves_world(2) + member("p-2", "g", [{"name": "gpu", "class": "class-b"}])
                + [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                    "metadata": {"name": "b"}, "spec": {"driver": "driver-b", "nodeName": "node-1",
                    "pool": {"name": "b", "generation": 1, "resourceSliceCount": 1},
                    "devices": [{"name": "b-0"}]}}])
    c.api.objects[f"/apis/resource.draco.dev/v1alpha1/namespaces/{NS}/gangs/g"]["spec"]["minCount"] = 3
    c.start()
    c.api.claim_writes_left = kill_at
    run(c.settle())
    killed = c.api.dead
    c.api.claim_writes_left = None
    c.start()  # a new draco: fresh tracker and controllers over what the server kept
    run(c.settle())
    names = ("p-0-claim", "p-1-claim", "p-2-claim")
    assert c.allocated(*names) == [True, True, True], (kill_at, killed)
    assert not any(c.gated(f"p-{i}") for i in range(3))
    if kill_at < 6:
        assert killed


def test_a_kill_mid_gang_is_rolled_back_when_the_rest_no_longer_fits() -> None:
    """Killed after p-0's claim was written; meanwhile someone else took the device p-1
    needs: the new draco cannot complete the gang, so it releases p-0's claim."""
    objs = [*classes(), node("node-1"), *partitioned_node("node-1"), gang("g", 2)]
    half = [{"name": "gpu", "class": "class-a",
             "selectors": ['device.attributes["driver-a"].size == "half"']}]
    objs += member("p-0", "g", half) + member("p-1", "g", half)
    c = Cluster(objs)
    c.api.claim_writes_left = 2  # p-0's finalizer and allocation, then death
    run(c.settle())
    assert c.api.dead and c.allocated("p-0-claim", "p-1-claim") == [True, False]
    taken = c.claim("p-0-claim")["status"]["allocation"]["devices"]["results"][0]["device"]
    other = "half-b" if taken == "half-a" else "half-a"
    c.api.add({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
               "metadata": {"name": "intruder", "namespace": NS, "uid": "u-intruder"},
               "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "class-a"}}]}},
               "status": {"allocation": {"devices": {"results": [
                   {"request": "gpu", "driver": "driver-a", "pool": "node-1", "device": other}]}}}})
    c.api.claim_writes_left = None
    c.start()
    run(c.settle())
    assert c.allocated("p-0-claim", "p-1-claim") == [False, False]
    assert c.gated("p-0") and c.gated("p-1")


def let_go_world(finished: str) -> list[dict[str, Any]]:
    """A gang of three on node-1's three GPUs, caught while it is being ungated: p-0 was
    let go and has finished (FINISHED: its phase; its claim already deleted, as
    kube-controller-manager deletes a finished pod's claim), p-1 was let go and runs,
    p-2 is allocated and reserved and still gated."""
    objs: list[dict[str, Any]] = [*classes(), node("node-1"), *node_slice("node-1", gpus(3)), gang("g", 3)]
    for i in range(3):
        objs += member(f"p-{i}", "g", [{"name": "gpu", "class": "class-a"}],
                       allocation=allocated_on("node-1", f"gpu-{i}"), node_name="" if i == 2 else "node-1")
    objs = [o for o in objs if o["metadata"]["name"] != "p-0-claim"]
    for o in objs:
        if o["kind"] == "Pod" and o["metadata"]["name"] == "p-0":
            o["status"]["phase"] = finished
        if o["kind"] == "Pod" and o["metadata"]["name"] == "p-2":
            o["spec"]["schedulingGates"] = [{"name": "resource.draco.dev/allocation"}]
    return objs


def test_a_gang_whose_first_members_finished_is_not_taken_back_from_the_rest() -> None:
    """Under kwok a Job's pod completes as soon as it is bound, and its claim goes: the
    gang then counts fewer than minCount members with devices while its last member is
    still being ungated. The gang was complete when it was let go: the last member keeps
    its devices and is ungated, and nothing of the members that run is released."""
    c = Cluster(let_go_world("Succeeded"))
    run(c.settle())
    assert c.allocated("p-1-claim", "p-2-claim") == [True, True]
    assert not c.gated("p-2"), "the rest of a released gang is ungated"


def test_a_gang_whose_member_failed_before_the_rest_let_go_releases_them() -> None:
    """A member that failed is no member that ran for the gang: p-0 failed, so the gang
    has two of three and p-2, still gated, lets go of its GPU (p-1 runs and keeps its)."""
    c = Cluster(let_go_world("Failed"))
    run(c.settle())
    assert c.allocated("p-1-claim", "p-2-claim") == [True, False]
    assert c.gated("p-2")


def test_a_roll_back_reads_the_pod_from_the_server_not_a_lagging_tracker() -> None:
    """The tracker still shows p-1 gated, but the server has it ungated and bound (the
    narrowing let it go; the watch event is not in yet). Releasing p-1's claim would free
    a GPU in use for kube-scheduler to give away: only p-2, gated on the server too,
    lets go of its devices."""
    c = Cluster(let_go_world("Failed"))
    pod = f"/api/v1/namespaces/{NS}/pods/p-1"
    c.api.objects[pod]["spec"]["schedulingGates"] = [{"name": "resource.draco.dev/allocation"}]
    del c.api.objects[pod]["spec"]["nodeName"]
    c.start()  # the tracker has p-1 gated and unbound
    c.api.touch(pod, lambda o: o["spec"].update(schedulingGates=[], nodeName="node-1"))

    async def allocator_only() -> None:  # no watch event reaches the tracker meanwhile
        await c.allocator.step()
        while c.allocator.tasks:
            await asyncio.gather(*list(c.allocator.tasks), return_exceptions=True)

    run(allocator_only())
    assert c.allocated("p-1-claim", "p-2-claim") == [True, False]


def test_a_waiting_gang_keeps_younger_single_pods_off_its_domain_until_its_limit() -> None:
    """Rack b (n-2, n-3) is the gang's only chance, but n-3's GPU is held. A younger pod
    that can only run in rack b would take n-2 and starve the gang; the gang's
    reservation keeps it off until the holder lets go (the gang then gets rack b), or,
    in a second run, until waitSeconds pass (then the pod gets n-2 and the gang reports
    WaitLimitExceeded)."""
    def world() -> list[dict[str, Any]]:
        g = gang("g", 2, node_label="rack")
        g["spec"]["waitSeconds"] = 120
        objs = [*classes(), g]
        for name, rack in (("n-1", "a"), ("n-2", "b"), ("n-3", "b")):
            objs += [node(name, rack=rack), *node_slice(name, gpus(1))]
        objs += member("holder", "other", [{"name": "gpu", "class": "class-a"}],
                       allocation=allocated_on("n-3", "gpu-0"), node_name="n-3")
        for i in range(2):
            objs += member(f"p-{i}", "g", [{"name": "gpu", "class": "class-a"}])
        c, p = member("late", "none", [{"name": "gpu", "class": "class-a"}])
        del p["metadata"]["labels"]
        p["metadata"]["creationTimestamp"] = "2026-01-02T00:00:00Z"  # younger than the gang
        p["spec"]["nodeSelector"] = {"rack": "b"}
        return [*objs, c, p]

    c = Cluster(world())
    run(c.settle())
    assert c.allocated("p-0-claim", "p-1-claim", "late-claim") == [False, False, False]
    assert c.gang_status()["conditions"][0]["reason"] == "GangUnschedulable"
    c.api.touch(f"/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaims/holder-claim",
                lambda o: o.update(status={}))  # the holder lets go of n-3's GPU
    run(c.settle())
    assert c.allocated("p-0-claim", "p-1-claim", "late-claim") == [True, True, False]
    assert c.gang_status()["domain"] == "rack=b"

    c = Cluster(world())
    run(c.settle())
    assert c.allocated("late-claim") == [False]
    c.now += 121  # past waitSeconds
    run(c.settle())
    assert c.allocated("p-0-claim", "p-1-claim", "late-claim") == [False, False, True]
    assert c.gang_status()["conditions"][0]["reason"] == "WaitLimitExceeded"


@pytest.mark.parametrize(("older", "priority", "winner"), [
    ("first", 0, "first"),  # equal priority: the older gang
    ("first", 10, "second"),  # the second gang's members have the higher priority
])
def test_competing_gangs_are_served_by_priority_then_age(older: str, priority: int, winner: str) -> None:
    """Two gangs of two want the same two GPUs, both arriving in one pass."""
    objs = [*classes(), node("n-1"), *node_slice("n-1", gpus(2))]
    for name, created in (("first", "2026-01-01T00:00:00Z"), ("second", "2026-01-02T00:00:00Z")):
        g = gang(name, 2)
        g["metadata"]["creationTimestamp"] = created
        objs.append(g)
        for i in range(2):
            c, p = member(f"{name}-{i}", name, [{"name": "gpu", "class": "class-a"}])
            if name == "second":
                p["spec"]["priority"] = priority
            objs += [c, p]
    c = Cluster(objs)
    run(c.settle())
    loser = "second" if winner == "first" else "first"
    assert c.allocated(f"{winner}-0-claim", f"{winner}-1-claim") == [True, True]
    assert c.allocated(f"{loser}-0-claim", f"{loser}-1-claim") == [False, False]


def test_members_sharing_a_nic_claim_get_it_once_and_both_are_reserved() -> None:
    """Issue 48: one NIC claim named by both members is written once (allocation by the
    first member) and lists both pods in reservedFor; the gang then starts whole."""
    from tests.gangs.test_gang_shared_claims import NIC, fabric
    from tests.gangs.world import shared_claim
    objs = [*classes(), node("n-0"), *node_slice("n-0", gpus(1)), node("n-1"),
            *node_slice("n-1", gpus(1)), fabric(1), shared_claim("nic", NIC), gang("g", 2)]
    objs += member("p-0", "g", [{"name": "gpu", "class": "class-a"}], shared=["nic"])
    objs += member("p-1", "g", [{"name": "gpu", "class": "class-a"}], shared=["nic"])
    c = Cluster(objs)
    run(c.settle(6))
    nic = c.claim("nic")["status"]
    assert [r["device"] for r in nic["allocation"]["devices"]["results"]] == ["nic-0"]
    assert sorted(r["name"] for r in nic["reservedFor"]) == ["p-0", "p-1"]
    assert c.allocated("p-0-claim", "p-1-claim") == [True, True]
    assert not c.gated("p-0") and not c.gated("p-1")


def test_a_podgroup_inside_a_composite_places_no_member_and_says_why() -> None:
    # 1.38's CompositePodGroup: draco does not implement composites, so a child group's
    # members are never placed alone; each pod's condition names the field and why
    objs = [*classes(), node("node-1"), *node_slice("node-1", gpus(2)),
            pod_group("pg", {"parentCompositePodGroupName": "training", "workloadRef": {"name": "w"},
                             "schedulingPolicy": {"gang": {"minCount": 2}}})]
    for i in range(2):
        objs += joining("pg", member(f"p-{i}", "unused", [{"name": "gpu", "class": "class-a"}]))
    c = Cluster(objs)
    run(c.settle())
    assert c.allocated("p-0-claim", "p-1-claim") == [False, False]
    for i in range(2):
        assert c.gated(f"p-{i}")
        conds = c.api.pod(NS, f"p-{i}").get("status", {}).get("conditions") or []
        [cond] = [x for x in conds if x.get("reason") == "GangNotFound"]
        assert ("PodGroup default/pg spec.parentCompositePodGroupName: part of CompositePodGroup "
                "'training'") in cond["message"] and cond["message"].endswith("; its members wait")
