"""A gang as the preemptor, through `draco allocate --preempt MEMBER`'s document: the
victims free what the gang's core needs, all together, in one topology domain."""

from __future__ import annotations

from typing import Any

from operators.cli.allocate_preempt import preempt_document
from operators.cli.state import build_tracker
from operators.model import NamespacedName
from tests.gangs.world import NS, classes, gang, gpus, joining, member, node, node_slice, pod_group
from tests.preemption.test_victims import pdb, running

ONE = [{"name": "gpu", "class": "class-a"}]


def members(gang_name: str, n: int, priority: int = 100, policy: str | None = None,
            prefix: str = "m") -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(n):
        c, p = member(f"{prefix}-{i}", gang_name, ONE)
        p["spec"]["priority"] = priority
        if policy:
            p["spec"]["preemptionPolicy"] = policy
        out += [c, p]
    return out


def decide(objs: list[dict[str, Any]], pod: str = "m-0") -> dict[str, Any]:
    return preempt_document(build_tracker(objs), objs, NamespacedName(NS, pod))


def racks() -> list[dict[str, Any]]:
    """Two racks of two nodes, one GPU each."""
    out = [*classes()]
    for name, rack in (("a1", "r1"), ("a2", "r1"), ("b1", "r2"), ("b2", "r2")):
        out += [node(name, rack=rack), *node_slice(name, gpus(1))]
    return out


def test_a_gang_preempts_what_its_core_needs_in_one_domain() -> None:
    objs = [*racks(), gang("team", 2, node_label="rack"),
            *running("low-a1", "a1", "gpu-0", priority=1), *running("low-a2", "a2", "gpu-0", priority=1),
            *running("low-b1", "b1", "gpu-0", priority=5), *running("low-b2", "b2", "gpu-0", priority=5),
            *members("team", 2)]
    doc = decide(objs)
    assert doc["status"] == "preempt" and doc["gang"] == "default/team"
    # rack r1's victims have the lower priority: both go, and the gang lands there
    assert doc["victims"] == ["default/low-a1", "default/low-a2"]
    assert doc["domain"] == "rack=r1" and doc["node"] is None
    assert doc["devices"] == ["driver-a/a1/gpu-0", "driver-a/a2/gpu-0"]
    assert doc["nodes"] == {"default/m-0": "a1", "default/m-1": "a2"}
    assert "the gang's 2 member(s) need in topology domain rack=r1" in doc["reason"]


def test_victims_are_never_split_across_domains() -> None:
    # one free GPU in each rack: together two, but no rack has two; one victim per rack
    # would not do, so the gang evicts in one rack only
    objs = [*racks(), gang("team", 2, node_label="rack"),
            *running("low-a1", "a1", "gpu-0", priority=1), *running("low-b1", "b1", "gpu-0", priority=1),
            *members("team", 2)]
    doc = decide(objs)
    assert doc["status"] == "preempt"
    assert doc["victims"] in (["default/low-a1"], ["default/low-b1"])
    racks_used = {"r1" if n.startswith("a") else "r2" for n in doc["nodes"].values()}
    assert len(racks_used) == 1


def test_a_gang_that_fits_needs_no_preemption() -> None:
    objs = [*racks(), gang("team", 2, node_label="rack"),
            *running("low-a1", "a1", "gpu-0", priority=1), *members("team", 2)]
    doc = decide(objs)
    assert (doc["status"], doc["victims"], doc["domain"]) == ("fits", [], "rack=r2")


def test_the_gang_preempts_with_its_lowest_members_priority() -> None:
    objs = [*classes(), node("a"), *node_slice("a", gpus(2)), gang("team", 2),
            *running("mid", "a", "gpu-0", priority=50), *running("low", "a", "gpu-1", priority=1),
            *members("team", 1, priority=100), *members("team", 1, priority=50, prefix="n")]
    doc = decide(objs)
    assert doc["status"] == "impossible" and doc["victims"] == []  # mid is not below 50
    objs[-1]["spec"]["priority"] = 60
    assert decide(objs)["victims"] == ["default/low", "default/mid"]


def test_one_member_with_never_keeps_the_gang_from_preempting() -> None:
    objs = [*classes(), node("a"), *node_slice("a", gpus(2)), gang("team", 2),
            *running("l0", "a", "gpu-0", priority=1), *running("l1", "a", "gpu-1", priority=1),
            *members("team", 1), *members("team", 1, policy="Never", prefix="n")]
    doc = decide(objs)
    assert doc["status"] == "impossible" and doc["reason"] == "member default/n-0's preemptionPolicy is Never"


def test_a_podgroup_whose_preemption_policy_is_never_does_not_preempt() -> None:
    # 1.38 keeps PodGroup.spec.preemptionPolicy: the group's Never holds even when every
    # member's own policy would preempt
    def world(policy: str | None) -> list[dict[str, Any]]:
        spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": 2}}}
        if policy:
            spec["preemptionPolicy"] = policy
        return [*classes(), node("a"), *node_slice("a", gpus(2)), pod_group("pg", spec),
                *running("l0", "a", "gpu-0", priority=1), *running("l1", "a", "gpu-1", priority=1),
                *joining("pg", members("unused", 2))]
    doc = decide(world("Never"))
    assert doc["status"] == "impossible" and doc["victims"] == []
    assert doc["reason"] == "PodGroup default/pg's preemptionPolicy is Never"
    for policy in (None, "PreemptLowerPriority"):
        doc = decide(world(policy))
        assert doc["status"] == "preempt" and doc["victims"] == ["default/l0", "default/l1"]


def test_only_the_core_is_preempted_for_and_the_fewest_go() -> None:
    # minCount 2 of 3 members: two GPUs are enough, three low pods hold the three GPUs
    objs = [*classes(), node("a"), *node_slice("a", gpus(3)), gang("team", 2),
            *running("p1", "a", "gpu-0", priority=1), *running("p2", "a", "gpu-1", priority=2),
            *running("p3", "a", "gpu-2", priority=3), *members("team", 3)]
    doc = decide(objs)
    assert doc["victims"] == ["default/p1", "default/p2"]
    assert len(doc["nodes"]) == 2


def test_pdb_violations_are_avoided_across_domains() -> None:
    objs = [*racks(), gang("team", 2, node_label="rack"),
            *running("db-a1", "a1", "gpu-0", priority=1, labels={"app": "db"}),
            *running("db-a2", "a2", "gpu-0", priority=1, labels={"app": "db"}),
            *running("web-b1", "b1", "gpu-0", priority=3, labels={"app": "web"}),
            *running("web-b2", "b2", "gpu-0", priority=3, labels={"app": "web"}),
            pdb("db", 0, app="db"), *members("team", 2)]
    doc = decide(objs)
    assert doc["victims"] == ["default/web-b1", "default/web-b2"] and doc["pdbViolations"] == 0


def test_a_victim_gang_goes_whole_and_the_preemptor_never_takes_its_own() -> None:
    objs = [*classes(), node("a"), *node_slice("a", gpus(3)), gang("team", 2), gang("old", 2),
            *running("o-0", "a", "gpu-0", priority=1, gang_name="old"),
            *running("o-1", "a", "gpu-1", priority=1, gang_name="old"),
            *running("x", "a", "gpu-2", priority=1), *members("team", 2)]
    doc = decide(objs)
    # the old gang would fall below minCount without either member: both go together,
    # so evicting x and one of them is no option; x alone is not enough
    assert set(doc["victims"]) in ({"default/o-0", "default/o-1"},)
    assert not any(v.startswith("default/m-") for v in doc["victims"])


def test_nothing_to_free_in_any_domain() -> None:
    objs = [*racks(), gang("team", 3, node_label="rack"),
            *running("low-a1", "a1", "gpu-0", priority=1), *members("team", 3)]
    doc = decide(objs)
    assert doc["status"] == "impossible" and doc["victims"] == []
    assert "any topology domain" in doc["reason"]


def test_the_table_names_the_gang_and_each_member() -> None:
    from operators.cli.allocate_preempt import preempt_table
    objs = [*racks(), gang("team", 2, node_label="rack"),
            *running("low-a1", "a1", "gpu-0", priority=1), *running("low-a2", "a2", "gpu-0", priority=1),
            *running("low-b1", "b1", "gpu-0", priority=5), *running("low-b2", "b2", "gpu-0", priority=5),
            *members("team", 2)]
    text = preempt_table(decide(objs))
    assert text.startswith("Gang default/team (for pod default/m-0): preempt in rack=r1")
    assert "default/m-1 -> a2" in text and "default/low-a1" in text
