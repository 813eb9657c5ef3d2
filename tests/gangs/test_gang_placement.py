"""Gang placement through `draco allocate --gang`'s document: the joint search's verdicts.

Each case is a small cluster of API objects (tests/gangs/world.py); the assertions are
what an admin reads in the command's JSON: status, domain, each member's devices,
the reason.
"""

from __future__ import annotations

from typing import Any

import pytest

from operators.cli.allocate import document
from operators.cli.inputs import UsageError
from operators.cli.state import build_tracker
from tests.gangs.world import (
    NS,
    allocated_on,
    classes,
    devices_of,
    gang,
    gpus,
    joining,
    member,
    node,
    node_slice,
    place,
    pod_group,
)

GPU = [{"name": "gpu", "class": "class-a"}]


def gpu_request(count: int, *selectors: str) -> list[dict[str, Any]]:
    r: dict[str, Any] = {"name": "gpu", "class": "class-a", "count": count}
    if selectors:
        r["selectors"] = list(selectors)
    return [r]


def partitioned_node(name: str) -> list[dict[str, Any]]:
    """kubernetes/kubernetes#138765's device: one GPU as a whole or as two halves."""
    full = {"counterSet": "gpu-0", "counters": {"mem": {"value": "40Gi"}}}
    half = {"counterSet": "gpu-0", "counters": {"mem": {"value": "20Gi"}}}
    size = "attributes"
    return node_slice(name, [
        {"name": "whole", size: {"size": {"string": "whole"}}, "consumesCounters": [full]},
        {"name": "half-a", size: {"size": {"string": "half"}}, "consumesCounters": [half]},
        {"name": "half-b", size: {"size": {"string": "half"}}, "consumesCounters": [half]},
    ], counters=[{"name": "gpu-0", "counters": {"mem": {"value": "40Gi"}}}])


WHOLE_OR_HALF = [{"name": "gpu", "firstAvailable": [
    {"name": "whole", "class": "class-a", "selectors": ['device.attributes["driver-a"].size == "whole"']},
    {"name": "half", "class": "class-a", "selectors": ['device.attributes["driver-a"].size == "half"']},
]}]


def test_138765_two_pods_whole_or_half_fit_as_two_halves() -> None:
    objs = [*classes(), node("node-1"), *partitioned_node("node-1"), gang("g", 2),
            *member("p-0", "g", WHOLE_OR_HALF), *member("p-1", "g", WHOLE_OR_HALF)]
    doc = place(objs)
    assert doc["status"] == "allocated", doc["reason"]
    assert devices_of(doc) == ["node-1/half-a", "node-1/half-b"]
    assert {r["request"] for c in doc["members"].values() for rs in c.values() for r in rs} \
        == {"gpu/half"}
    # pod by pod, first fit (what kube-scheduler's pod-group cycle does): the first pod
    # takes the whole device and the second finds nothing
    tracker = build_tracker(objs)
    single = document(tracker, objs, [], None, 10.0)["claims"]
    assert single[f"{NS}/p-0-claim"]["results"][0]["device"] == "whole"
    assert single[f"{NS}/p-1-claim"]["allocated"] is False


def test_node_label_topology_keeps_every_member_in_one_rack() -> None:
    objs = [*classes(), gang("g", 2, node_label="example.com/rack")]
    # rack-a: two nodes with one GPU each; rack-b: two nodes with two each
    for name, rack, n in (("a-1", "rack-a", 1), ("a-2", "rack-a", 1), ("b-1", "rack-b", 2),
                          ("b-2", "rack-b", 2)):
        objs += [node(name, **{"example.com/rack": rack}), *node_slice(name, gpus(n))]
    objs += member("p-0", "g", gpu_request(2)) + member("p-1", "g", gpu_request(2))
    doc = place(objs)
    assert doc["status"] == "allocated", doc["reason"]
    assert doc["domain"] == "example.com/rack=rack-b"
    assert set(doc["nodes"].values()) <= {"b-1", "b-2"}
    assert len(devices_of(doc)) == 4


def test_device_attribute_topology_spans_nodes_but_not_cliques() -> None:
    objs = [*classes(), gang("g", 2, device_attribute="driver-a/clique")]
    # clique x: one GPU on each of n-1 and n-2; clique y: two GPUs on n-2 and two on n-3
    objs += [node("n-1"), *node_slice("n-1", gpus(1, "x", clique="x") + gpus(1, "y1", clique="z"))]
    objs += [node("n-2"), *node_slice("n-2", gpus(1, "x", clique="x") + gpus(2, "y", clique="y"))]
    objs += [node("n-3"), *node_slice("n-3", gpus(2, "y", clique="y"))]
    objs += member("p-0", "g", gpu_request(2)) + member("p-1", "g", gpu_request(2))
    doc = place(objs)
    assert doc["status"] == "allocated", doc["reason"]
    assert doc["domain"] == "driver-a/clique=y"
    assert devices_of(doc) == ["n-2/y-0", "n-2/y-1", "n-3/y-0", "n-3/y-1"]


def test_a_gang_that_fits_in_only_one_of_fifty_domains() -> None:
    objs = [*classes(), gang("g", 2, node_label="rack")]
    for r in range(50):
        for n in range(2):
            name = f"r{r:02d}-n{n}"
            objs += [node(name, rack=f"r{r:02d}"), *node_slice(name, gpus(4))]
    for r in range(50):
        if r == 37:
            continue
        objs += member(f"held-{r}", "other", gpu_request(1),
                       allocation=allocated_on(f"r{r:02d}-n1", "gpu-3"), node_name=f"r{r:02d}-n1")
    objs += member("p-0", "g", gpu_request(4)) + member("p-1", "g", gpu_request(4))
    doc = place(objs)
    assert doc["status"] == "allocated", doc["reason"]
    assert doc["domain"] == "rack=r37"
    assert sorted(doc["nodes"].values()) == ["r37-n0", "r37-n1"]


def test_too_few_members_wait_without_a_search() -> None:
    objs = [*classes(), node("n-1"), *node_slice("n-1", gpus(8)), gang("g", 3),
            *member("p-0", "g", gpu_request(1)), *member("p-1", "g", gpu_request(1))]
    doc = place(objs)
    assert doc["status"] == "unsatisfiable"
    assert doc["members"] == {}
    assert doc["reason"] == "waiting for members: 2 of 3 exist"


def test_short_by_count_names_the_request_and_the_numbers() -> None:
    objs = [*classes(), gang("g", 3, node_label="rack")]
    for name, rack in (("a-1", "a"), ("a-2", "a"), ("b-1", "b")):
        objs += [node(name, rack=rack), *node_slice(name, gpus(4))]
    objs += [x for i in range(3) for x in member(f"p-{i}", "g", gpu_request(4))]
    doc = place(objs)
    assert doc["status"] == "unsatisfiable"
    assert doc["members"] == {} and doc["domain"] is None
    assert "cannot place 3 members of the gang together in 2 topology domains" in doc["reason"]
    assert "2 short by count" in doc["reason"]
    assert "domain rack=a: request gpu (class class-a) needs 12 free devices across the gang, " \
           "the domain has 8" in doc["reason"]


def test_a_member_that_fits_nowhere_is_named_with_its_own_reason() -> None:
    devices = [{"name": f"gpu-{i}", "attributes": {"model": {"string": m}}}
               for i, m in enumerate(("a", "b", "c", "d"))]
    objs = [*classes(), node("n-1"), *node_slice("n-1", devices), gang("g", 2),
            *member("p-0", "g", gpu_request(1)),
            *member("p-1", "g", gpu_request(2), constraints=[{"matchAttribute": "driver-a/model"}])]
    doc = place(objs)
    assert doc["status"] == "unsatisfiable" and doc["members"] == {}
    # the most constrained member (two devices, one node) is searched first, so the
    # search is stuck before anything is placed and names it
    assert "at best 0 of 2 placed; member default/p-1 fits on no node left there (even alone: " \
        in doc["reason"], doc["reason"]
    assert doc["partial"] == []


def test_short_by_count_without_topology() -> None:
    objs = [*classes(), node("n-1"), *node_slice("n-1", gpus(1)), gang("g", 2),
            *member("p-0", "g", gpu_request(1)), *member("p-1", "g", gpu_request(1))]
    doc = place(objs)
    assert doc["reason"] == ("cannot place 2 members of the gang together in the cluster; short "
                             "by count: request gpu (class class-a) needs 2 free devices across "
                             "the gang, the domain has 1")


def test_a_cel_error_is_the_verdict_and_nothing_is_placed() -> None:
    objs = [*classes(), node("n-1"), *node_slice("n-1", gpus(4)), gang("g", 2),
            *member("p-0", "g", gpu_request(1)),
            *member("p-1", "g", gpu_request(1, 'device.attributes["driver-a"].model == "h100"'))]
    doc = place(objs)
    assert doc["status"] == "unsatisfiable" and doc["members"] == {}
    assert "CEL runtime error: no such key: model" in doc["reason"]


def test_a_claim_constraint_holds_inside_the_joint_search() -> None:
    objs = [*classes(), gang("g", 2)]
    objs += [node("n-1"), *node_slice("n-1", gpus(2, "a", model="a") + gpus(1, "b", model="b"))]
    same_model = [{"matchAttribute": "driver-a/model"}]
    objs += member("p-0", "g", gpu_request(2), constraints=same_model)
    objs += member("p-1", "g", gpu_request(1))
    doc = place(objs)
    assert doc["status"] == "allocated", doc["reason"]
    assert doc["members"]["default/p-0"]["p-0-claim"][0]["device"].startswith("a-")
    assert doc["members"]["default/p-0"]["p-0-claim"][1]["device"].startswith("a-")
    assert doc["members"]["default/p-1"]["p-1-claim"][0]["device"] == "b-0"


def test_a_late_member_joins_the_placed_members_domain() -> None:
    objs = [*classes(), gang("g", 1, node_label="rack")]
    for name, rack in (("a-1", "a"), ("b-1", "b")):
        objs += [node(name, rack=rack), *node_slice(name, gpus(2))]
    objs += member("p-0", "g", gpu_request(1), allocation=allocated_on("b-1", "gpu-0"),
                   node_name="b-1")
    objs += member("p-1", "g", gpu_request(1))
    doc = place(objs)
    assert doc["status"] == "allocated", doc["reason"]
    assert doc["domain"] == "rack=b"
    assert doc["nodes"] == {"default/p-0": "b-1", "default/p-1": "b-1"}
    assert devices_of(doc) == ["b-1/gpu-0", "b-1/gpu-1"]


def test_members_beyond_min_count_that_do_not_fit_wait() -> None:
    objs = [*classes(), node("n-1"), *node_slice("n-1", gpus(3)), gang("g", 2)]
    objs += [x for i in range(3) for x in member(f"p-{i}", "g", gpu_request(1 if i < 2 else 2))]
    doc = place(objs)
    assert doc["status"] == "allocated", doc["reason"]
    assert sorted(doc["members"]) == ["default/p-0", "default/p-1"]
    assert doc["waiting"] == ["default/p-2"]


def test_backtracking_across_members_into_the_node_choice() -> None:
    """p-0 first fits on n-1 (one GPU of model a), but then p-1 (two of model a) fits
    nowhere; only p-0 on n-2 leaves n-1... the search must move p-0."""
    objs = [*classes(), gang("g", 2)]
    objs += [node("n-1"), *node_slice("n-1", gpus(2, "a", model="a"))]
    objs += [node("n-2"), *node_slice("n-2", gpus(1, "b", model="b") + gpus(1, "a", model="a"))]
    objs += member("p-0", "g", gpu_request(1))
    objs += member("p-1", "g", gpu_request(2, 'device.attributes["driver-a"].model == "a"'))
    doc = place(objs)
    assert doc["status"] == "allocated", doc["reason"]
    assert doc["nodes"] == {"default/p-0": "n-2", "default/p-1": "n-1"}


def test_podgroup_is_read_like_a_gang() -> None:
    objs = [*classes(), node("a-1", rack="a"), *node_slice("a-1", gpus(1)),
            node("b-1", rack="b"), *node_slice("b-1", gpus(2)),
            pod_group("pg", {"schedulingPolicy": {"gang": {"minCount": 2}},
                             "schedulingConstraints": {"topology": [{"key": "rack"}]}})]
    for i in range(2):
        objs += joining("pg", member(f"p-{i}", "unused", gpu_request(1)))
    doc = place(objs, "pg")
    assert doc["kind"] == "PodGroup"
    assert doc["status"] == "allocated", doc["reason"]
    assert doc["domain"] == "rack=b"


@pytest.mark.parametrize("policy", [{"gang": {"minCount": 1}}, {"basic": {}}])
def test_a_podgroup_inside_a_composite_is_refused_never_placed_alone(policy: dict[str, Any]) -> None:
    # 1.38's CompositePodGroup: the child starts only with its siblings (minGroupCount);
    # draco does not implement composites, so neither a gang nor a basic child is placed
    objs = [*classes(), node("a-1"), *node_slice("a-1", gpus(1)),
            pod_group("pg", {"parentCompositePodGroupName": "training", "workloadRef": {"name": "w"},
                      "schedulingPolicy": policy})]
    with pytest.raises(UsageError) as err:
        place(objs, "pg")
    assert ("PodGroup default/pg spec.parentCompositePodGroupName: part of CompositePodGroup "
            "'training': draco does not implement composite pod groups") in str(err.value)


def test_a_podgroup_preemption_policy_draco_does_not_know_refuses_the_gang() -> None:
    objs = [*classes(), pod_group("pg", {"schedulingPolicy": {"gang": {"minCount": 1}},
                                  "preemptionPolicy": "Sometimes"})]
    with pytest.raises(UsageError, match=r"spec.preemptionPolicy: unknown value 'Sometimes'; "
                                         r"expected one of PreemptLowerPriority, Never"):
        place(objs, "pg")


@pytest.mark.parametrize(("spec", "message"), [
    ({"minCount": 0}, "spec.minCount: must be between 1 and 10000, not 0"),
    ({"minCount": 2, "topology": {"rack": "x"}}, "spec.topology: unknown field 'rack'"),
    ({"minCount": 2, "topology": {"deviceAttribute": "clique"}},
     "must be a qualified name (DOMAIN/NAME), not 'clique'"),
    ({}, "spec.minCount: required field is missing"),
])
def test_an_unreadable_gang_is_an_error_naming_the_field(spec: dict[str, Any], message: str) -> None:
    g = gang("g", 1)
    g["spec"] = spec
    with pytest.raises(UsageError, match="Gang default/g") as err:
        place([*classes(), g])
    assert message in str(err.value)


def test_no_gang_in_the_input() -> None:
    with pytest.raises(UsageError, match="no Gang or PodGroup default/g in the input"):
        place(classes())


def test_the_search_keeps_to_its_time_budget() -> None:
    """Many interchangeable members on one node and a last member that can never fit
    (two devices of one NUMA value, each device having its own): the search would try
    every order of the first members' devices; the gang's budget stops it."""
    import time as clock
    devices = [{"name": f"gpu-{i}", "attributes": {"numa": {"int": i}}} for i in range(10)]
    objs = [*classes(), node("n-1"), *node_slice("n-1", devices), gang("g", 9)]
    objs += [x for i in range(8) for x in member(f"p-{i}", "g", gpu_request(1))]
    objs += member("z", "g", gpu_request(2), constraints=[{"matchAttribute": "driver-a/numa"}])
    started = clock.monotonic()
    doc = place(objs, budget_s=0.5)
    assert clock.monotonic() - started < 5
    assert doc["status"] == "unsatisfiable" and doc["members"] == {}
    assert "budget" in doc["reason"] or "fits on no node" in doc["reason"], doc["reason"]


def test_a_member_without_claims_fixes_no_domain() -> None:
    """A launcher pod of the gang, without claims, is placed but says nothing of the
    domain: the workers still go where they fit."""
    objs = [*classes(), gang("g", 3, device_attribute="driver-a/nvl")]
    objs += [node("n-1"), *node_slice("n-1", gpus(1, "a", nvl="a") + gpus(4, "b", nvl="b"))]
    _, launcher = member("launcher", "g", gpu_request(1))
    launcher["spec"]["resourceClaims"] = []
    launcher["spec"]["schedulingGates"] = []
    objs.append(launcher)
    objs += member("w-0", "g", gpu_request(2)) + member("w-1", "g", gpu_request(2))
    doc = place(objs)
    assert doc["status"] == "allocated", doc["reason"]
    assert doc["domain"] == "driver-a/nvl=b"


def test_an_extra_member_with_a_broken_claim_waits_and_the_core_is_placed() -> None:
    objs = [*classes(), node("n-1"), *node_slice("n-1", gpus(2)), gang("g", 1),
            *member("a", "g", gpu_request(1)),
            *member("b", "g", [{"name": "gpu", "class": "no-such-class"}])]
    doc = place(objs)
    assert doc["status"] == "allocated" and list(doc["members"]) == ["default/a"]
    assert doc["waiting"] == ["default/b"]
