"""Running gangs as victims, and the shapes of issue 48 through `draco allocate --preempt`:
a victim gang keeps minCount or goes whole (a single pod or a gang preempting), its
launcher counts as a running member, a claim several pods share is one claim, a
partition's counters are freed by a holder outside the gang's device domain."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fake_api import run
from tests.gangs.world import NS, classes, gang, gpus, member, node, node_slice, shared_claim
from tests.preemption.test_gang_preemptor import members
from tests.preemption.test_preemption_controller import Cluster
from tests.preemption.test_victims import decide, preemptor, running


def launcher(name: str, gang_name: str, node_name: str, priority: int = 1) -> dict[str, Any]:
    """A running member of GANG_NAME that holds no device."""
    (p,) = member(name, gang_name, [], node_name=node_name)
    p["spec"]["schedulingGates"] = []
    p["spec"]["priority"] = priority
    p["status"] = {"phase": "Running", "startTime": "2026-01-01T00:00:00Z"}
    return p


def victim_gang(size: int, min_count: int, *, per_node: int = 3) -> list[dict[str, Any]]:
    """Gang `team` of SIZE running members on node a (priority 1), each holding one GPU."""
    objs = [*classes(), node("a"), *node_slice("a", gpus(per_node)), gang("team", min_count)]
    for i in range(size):
        objs += running(f"t-{i}", "a", f"gpu-{i}", priority=1, gang_name="team")
    return objs


TEAM = [f"{NS}/t-{i}" for i in range(3)]


@pytest.mark.parametrize(("min_count", "wanted", "victims"), [
    # three members, minCount 2: one may go (two keep minCount); two may not (one left
    # alone): for two GPUs the whole gang goes
    (2, 1, TEAM[2:]),
    (2, 2, TEAM),
    # minCount 1: two may go
    (1, 2, TEAM[1:]),
    # minCount 3: none may go alone
    (3, 1, TEAM),
])
def test_a_single_pod_leaves_a_victim_gang_whole_or_at_min_count(min_count: int, wanted: int,
                                                                 victims: list[str]) -> None:
    doc = decide([*victim_gang(3, min_count), *preemptor(count=wanted)])
    assert doc["status"] == "preempt", doc["reason"]
    assert doc["victims"] == victims
    assert len(doc["devices"]) == wanted


@pytest.mark.parametrize(("min_count", "size", "victims"), [
    (2, 2, TEAM),  # a gang of two needs two GPUs: the victim gang cannot keep two of three
    (1, 2, TEAM[1:]),  # minCount 1: two of its members go, one stays
    (2, 1, TEAM[2:]),  # a gang of one: one member goes, two keep minCount
])
def test_a_gang_leaves_a_victim_gang_whole_or_at_min_count(min_count: int, size: int,
                                                           victims: list[str]) -> None:
    objs = [*victim_gang(3, min_count), gang("vip", size), *members("vip", size)]
    doc = decide(objs, "m-0")
    assert doc["status"] == "preempt", doc["reason"]
    assert doc["victims"] == victims


@pytest.mark.parametrize("min_count", [1, 2])
def test_a_launcher_counts_as_a_running_member(min_count: int) -> None:
    # gang team: t-0 holds the GPU, its launcher none; with minCount 2 they go together,
    # with minCount 1 the GPU holder goes alone and the launcher keeps the gang at minCount
    objs = [*victim_gang(1, min_count, per_node=1), launcher("t-launcher", "team", "a"), *preemptor()]
    doc = decide(objs)
    assert doc["status"] == "preempt", doc["reason"]
    assert doc["victims"] == ([f"{NS}/t-0", f"{NS}/t-launcher"] if min_count == 2 else [f"{NS}/t-0"])


def test_a_launcher_of_higher_priority_keeps_its_gang_from_going_whole() -> None:
    objs = [*victim_gang(1, 2, per_node=1), launcher("t-launcher", "team", "a", priority=500), *preemptor()]
    doc = decide(objs)
    assert doc["status"] == "impossible" and doc["victims"] == []


def nic_world(*holders: str) -> list[dict[str, Any]]:
    """Node a: two GPUs and two NICs; each HOLDER a running pod (priority 1) holding one NIC."""
    nics = [{"name": f"nic-{i}", "attributes": {"kind": {"string": "nic"}}} for i in range(2)]
    objs = [*classes(), node("a"), *node_slice("a", [*gpus(2, kind="gpu"), *nics])]
    for i, name in enumerate(holders):
        objs += running(name, "a", f"nic-{i}", priority=1)
    return objs


GPU = [{"name": "gpu", "class": "class-a", "selectors": ['device.attributes["driver-a"].kind == "gpu"']}]
NIC = [{"name": "nic", "class": "class-a", "selectors": ['device.attributes["driver-a"].kind == "nic"']}]


def nic_gang() -> list[dict[str, Any]]:
    """Gang vip: two members, one GPU each, both naming one NIC claim."""
    objs: list[dict[str, Any]] = [gang("vip", 2), shared_claim("fabric", NIC)]
    for i in range(2):
        c, p = member(f"m-{i}", "vip", GPU, shared=["fabric"])
        p["spec"]["priority"] = 100
        objs += [c, p]
    return objs


def test_a_claim_the_preemptor_gang_shares_is_one_claim() -> None:
    # one NIC is enough for the shared claim: one holder goes, not both
    doc = decide([*nic_world("low-0", "low-1"), *nic_gang()], "m-0")
    assert doc["status"] == "preempt", doc["reason"]
    assert doc["victims"] == [f"{NS}/low-1"]
    assert sorted(doc["devices"]) == ["driver-a/a/gpu-0", "driver-a/a/gpu-1", "driver-a/a/nic-1"]
    # with one NIC held and the other free, no one goes
    doc = decide([*nic_world("low-0"), *nic_gang()], "m-0")
    assert doc["status"] == "fits"


def test_a_claim_a_victim_gang_shares_is_freed_when_the_gang_goes() -> None:
    # gang team (minCount 2): both members use one claim holding nic-0; the preemptor
    # needs that NIC: the gang goes whole, the NIC is nominated once
    objs = [*nic_world(), gang("team", 2)]
    c, p = running("t-0", "a", "nic-0", priority=1, gang_name="team")
    c["status"]["reservedFor"].append({"resource": "pods", "name": "t-1", "uid": f"uid-{NS}-t-1"})
    _, p1 = running("t-1", "a", "nic-0", priority=1, gang_name="team")
    p1["spec"]["resourceClaims"][0]["resourceClaimName"] = "t-0-claim"
    objs += [c, p, p1, *preemptor(requests=[{**NIC[0], "count": 2}])]
    objs += running("low", "a", "nic-1", priority=1)
    doc = decide(objs)
    assert doc["status"] == "preempt", doc["reason"]
    assert doc["victims"] == [f"{NS}/low", f"{NS}/t-0", f"{NS}/t-1"]
    assert doc["devices"] == ["driver-a/a/nic-0", "driver-a/a/nic-1"]


def clique_node(name: str) -> list[dict[str, Any]]:
    """A GPU as a whole (no clique attribute) or two halves in clique x, one counter set."""
    full = {"counterSet": "gpu-0", "counters": {"mem": {"value": "40Gi"}}}
    half = {"counterSet": "gpu-0", "counters": {"mem": {"value": "20Gi"}}}
    clique = {"clique": {"string": "x"}, "size": {"string": "half"}}
    return node_slice(name, [
        {"name": "whole", "attributes": {"size": {"string": "whole"}}, "consumesCounters": [full]},
        {"name": "half-a", "attributes": clique, "consumesCounters": [half]},
        {"name": "half-b", "attributes": clique, "consumesCounters": [half]},
    ], counters=[{"name": "gpu-0", "counters": {"mem": {"value": "40Gi"}}}])


def test_a_holder_outside_the_device_domain_frees_its_counters() -> None:
    objs = [*classes(), node("a"), *clique_node("a"), gang("vip", 2, device_attribute="driver-a/clique"),
            *running("whole", "a", "whole", priority=1), *members("vip", 2)]
    doc = decide(objs, "m-0")
    assert doc["status"] == "preempt", doc["reason"]
    assert doc["victims"] == [f"{NS}/whole"]
    assert doc["devices"] == ["driver-a/a/half-a", "driver-a/a/half-b"]
    assert doc["domain"] == "driver-a/clique=x"


def test_the_controller_nominates_a_shared_claim_once_and_evicts_only_what_it_needs() -> None:
    c = Cluster([*nic_world("low-0", "low-1"), *nic_gang()])
    run(c.settle())
    n0, n1 = c.nomination("m-0"), c.nomination("m-1")
    assert n0 is not None and n1 is not None
    assert n0["victims"] == n1["victims"] == [f"{NS}/low-1"]
    nominated = n0["devices"] + n1["devices"]
    assert len(nominated) == len(set(nominated)), "no device nominated on two members"
    assert sorted(nominated) == ["driver-a/a/gpu-0", "driver-a/a/gpu-1", "driver-a/a/nic-1"]
    assert c.pod("low-0") is not None and c.pod("low-1") is None
    c.release_claims_of_gone_pods()
    run(c.settle())
    assert c.devices("fabric") == ["nic-1"]
    assert sorted(c.devices("m-0-claim") + c.devices("m-1-claim")) == ["gpu-0", "gpu-1"]


def test_the_controller_evicts_a_launcher_with_its_gang() -> None:
    c = Cluster([*victim_gang(1, 2, per_node=1), launcher("t-launcher", "team", "a"), *preemptor()])
    run(c.settle())
    nomination = c.nomination("vip")
    assert nomination is not None and nomination["victims"] == [f"{NS}/t-0", f"{NS}/t-launcher"]
    assert c.pod("t-0") is None and c.pod("t-launcher") is None
    c.release_claims_of_gone_pods()
    run(c.settle())
    assert c.devices("vip-claim") == ["gpu-0"]
