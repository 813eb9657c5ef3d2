"""Victim selection through `draco allocate --preempt`'s document: which pods go, which
devices the preemptor gets, and why; the order follows upstream's default preemption."""

from __future__ import annotations

from typing import Any

import pytest

from operators.cli.allocate_preempt import preempt_document
from operators.cli.inputs import UsageError
from operators.cli.state import build_tracker
from operators.model import NamespacedName
from tests.gangs.test_gang_placement import partitioned_node
from tests.gangs.world import NS, allocated_on, classes, gang, gpus, member, node, node_slice

ONE = [{"name": "gpu", "class": "class-a"}]


def running(name: str, node_name: str, *devices: str, priority: int = 0, gang_name: str = "",
            started: str = "2026-01-01T00:00:00Z", labels: dict[str, str] | None = None,
            ) -> list[dict[str, Any]]:
    request = [{"name": "gpu", "class": "class-a", "count": len(devices)}]
    c, p = member(name, gang_name or "x", request, allocation=allocated_on(node_name, *devices),
                  node_name=node_name)
    p["metadata"]["labels"] = dict(labels or {})
    if gang_name:
        p["metadata"]["labels"]["resource.draco.dev/gang"] = gang_name
    p["spec"]["priority"] = priority
    p["status"] = {"phase": "Running", "startTime": started}
    return [c, p]


def preemptor(name: str = "vip", priority: int = 100, count: int = 1,
              policy: str | None = None, requests: list[dict[str, Any]] | None = None,
              ) -> list[dict[str, Any]]:
    c, p = member(name, "x", requests or [{"name": "gpu", "class": "class-a", "count": count}])
    del p["metadata"]["labels"]
    p["spec"]["priority"] = priority
    if policy:
        p["spec"]["preemptionPolicy"] = policy
    return [c, p]


def pdb(name: str, allowed: int, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"selector": {"matchLabels": labels}}, "status": {"disruptionsAllowed": allowed}}


def decide(objs: list[dict[str, Any]], pod: str = "vip") -> dict[str, Any]:
    return preempt_document(build_tracker(objs), objs, NamespacedName(NS, pod))


def two_nodes(per_node: int = 1) -> list[dict[str, Any]]:
    return [*classes(), node("a"), *node_slice("a", gpus(per_node)), node("b"),
            *node_slice("b", gpus(per_node))]


def test_a_lower_priority_pod_makes_room() -> None:
    objs = [*classes(), node("a"), *node_slice("a", gpus(1)),
            *running("low", "a", "gpu-0", priority=1), *preemptor()]
    doc = decide(objs)
    assert doc == {"preemptor": "default/vip", "status": "preempt", "node": "a",
                   "victims": ["default/low"], "devices": ["driver-a/a/gpu-0"],
                   "reason": doc["reason"], "pdbViolations": 0}
    assert "evicting 1 pod(s) of priority at most 1" in doc["reason"]


@pytest.mark.parametrize(("prio", "policy", "why"), [
    (1, None, "no running pod has a lower priority than 1"),
    (100, "Never", "the pod's preemptionPolicy is Never"),
])
def test_no_victims_for_equal_priority_or_never(prio: int, policy: str | None, why: str) -> None:
    objs = [*classes(), node("a"), *node_slice("a", gpus(1)),
            *running("low", "a", "gpu-0", priority=1), *preemptor(priority=prio, policy=policy)]
    doc = decide(objs)
    assert (doc["status"], doc["victims"], doc["reason"]) == ("impossible", [], why)


def test_a_pod_that_fits_needs_no_preemption() -> None:
    objs = [*two_nodes(), *running("low", "a", "gpu-0", priority=1), *preemptor()]
    doc = decide(objs)
    assert (doc["status"], doc["victims"], doc["devices"]) == ("fits", [], ["driver-a/b/gpu-0"])


def test_fewest_pdb_violations_first() -> None:
    objs = [*two_nodes(), *running("guarded", "a", "gpu-0", priority=1, labels={"app": "db"}),
            *running("free", "b", "gpu-0", priority=1, labels={"app": "web"}),
            pdb("db", 0, app="db"), *preemptor()]
    assert decide(objs)["victims"] == ["default/free"]
    objs[-3] = pdb("db", 1, app="db")  # one disruption allowed: no violation either way
    doc = decide(objs)
    assert doc["victims"] == ["default/guarded"] and doc["pdbViolations"] == 0  # node a, tried first


def test_the_lowest_highest_victim_priority_wins() -> None:
    objs = [*two_nodes(), *running("mid", "a", "gpu-0", priority=50),
            *running("low", "b", "gpu-0", priority=10), *preemptor()]
    assert decide(objs)["victims"] == ["default/low"]


def test_then_the_lowest_priority_sum_then_the_fewest_victims() -> None:
    objs = [*two_nodes(2), *running("a1", "a", "gpu-0", priority=5), *running("a2", "a", "gpu-1", priority=5),
            *running("b1", "b", "gpu-0", "gpu-1", priority=5), *preemptor(count=2)]
    assert decide(objs)["victims"] == ["default/b1"]


def test_then_the_latest_started() -> None:
    objs = [*two_nodes(), *running("old", "a", "gpu-0", priority=1, started="2026-01-01T00:00:00Z"),
            *running("new", "b", "gpu-0", priority=1, started="2026-01-02T00:00:00Z"), *preemptor()]
    assert decide(objs)["victims"] == ["default/new"]


def test_only_as_many_victims_as_needed_the_least_important_go() -> None:
    objs = [*classes(), node("a"), *node_slice("a", gpus(3)),
            *running("p1", "a", "gpu-0", priority=1), *running("p2", "a", "gpu-1", priority=2),
            *running("p3", "a", "gpu-2", priority=3), *preemptor()]
    doc = decide(objs)
    assert doc["victims"] == ["default/p1"] and doc["devices"] == ["driver-a/a/gpu-0"]


def shared_gpu(owner: str, other: str, other_priority: int) -> list[dict[str, Any]]:
    """OWNER (priority 1) holds gpu-0 through its claim, which OTHER uses too."""
    objs = [*classes(), node("a"), *node_slice("a", gpus(1)),
            *running(owner, "a", "gpu-0", priority=1), *preemptor()]
    claim = next(o for o in objs if o["kind"] == "ResourceClaim"
                 and o["metadata"]["name"] == f"{owner}-claim")
    claim["status"]["reservedFor"].append({"resource": "pods", "name": other, "uid": f"uid-{other}"})
    _, pod = running(other, "a", "gpu-0", priority=other_priority)
    pod["spec"]["resourceClaims"][0]["resourceClaimName"] = f"{owner}-claim"
    return [*objs, pod]


def test_a_claim_shared_with_a_pod_that_stays_frees_nothing() -> None:
    doc = decide(shared_gpu("low", "high", 500))
    assert doc["status"] == "impossible" and doc["victims"] == []


def test_a_partition_frees_counters_for_the_whole_device() -> None:
    whole = [{"name": "gpu", "class": "class-a",
              "selectors": ['device.attributes["driver-a"].size == "whole"']}]
    objs = [*classes(), node("node-1"), *partitioned_node("node-1"),
            *running("half", "node-1", "half-a", priority=1), *preemptor(requests=whole)]
    doc = decide(objs)
    assert doc["victims"] == ["default/half"] and doc["devices"] == ["driver-a/node-1/whole"]


def test_a_network_attached_device_held_from_another_node() -> None:
    shared_slice = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                    "metadata": {"name": "fabric"},
                    "spec": {"driver": "driver-a", "allNodes": True,
                             "pool": {"name": "fabric", "generation": 1, "resourceSliceCount": 1},
                             "devices": [{"name": "nic-0"}]}}
    c, p = running("low", "b", "nic-0", priority=1)
    c["status"]["allocation"] = {"devices": {"results": [
        {"request": "gpu", "driver": "driver-a", "pool": "fabric", "device": "nic-0"}]}}
    objs = [*classes(), node("a"), node("b"), shared_slice, c, p, *preemptor()]
    doc = decide(objs)
    assert doc["victims"] == ["default/low"] and doc["devices"] == ["driver-a/fabric/nic-0"]


@pytest.mark.parametrize(("min_count", "evicted"), [
    (2, 2),  # the gang would fall below minCount: it goes whole
    (1, 1),  # it keeps minCount without one member: one member goes
])
def test_a_gang_member_takes_its_gang_unless_the_gang_keeps_min_count(min_count: int, evicted: int) -> None:
    objs = [*classes(), node("a"), *node_slice("a", gpus(2)), gang("team", min_count),
            *running("g-0", "a", "gpu-0", priority=1, gang_name="team"),
            *running("g-1", "a", "gpu-1", priority=1, gang_name="team"), *preemptor()]
    victims = decide(objs)["victims"]
    assert len(victims) == evicted and set(victims) <= {"default/g-0", "default/g-1"}


def test_no_such_preemptor() -> None:
    with pytest.raises(UsageError, match="no Pod default/vip"):
        decide([*classes()])


def test_a_claim_shared_by_two_lower_pods_is_freed_when_both_go() -> None:
    doc = decide(shared_gpu("low-a", "low-b", 2))
    assert doc["victims"] == ["default/low-a", "default/low-b"]
