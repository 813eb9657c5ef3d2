"""Which nodes take a narrowed pod: kube-scheduler's TaintToleration and NodeUnschedulable
filters, as tables (toleration x taint -> tolerated; pod x nodes -> held or not)."""

from __future__ import annotations

from typing import Any

import pytest

from operators.narrowing.nodes import (
    NodeInfo,
    NodeTaint,
    PodToleration,
    parse_node,
    parse_tolerations,
    refusal,
    untolerated,
)

GPU = NodeTaint("example.com/gpu", "a100", "NoSchedule")

# (toleration, taint, tolerated)
TOLERATES = [
    # Equal (also the default operator) compares the value
    (PodToleration("example.com/gpu", "Equal", "a100", "NoSchedule"), GPU, True),
    (PodToleration("example.com/gpu", "", "a100", "NoSchedule"), GPU, True),
    (PodToleration("example.com/gpu", "Equal", "h100", "NoSchedule"), GPU, False),
    (PodToleration("example.com/gpu", "Equal", "", "NoSchedule"), GPU, False),
    (PodToleration("example.com/gpu", "Equal", "", "NoSchedule"),
     NodeTaint("example.com/gpu", "", "NoSchedule"), True),
    # Exists ignores the value
    (PodToleration("example.com/gpu", "Exists", "", "NoSchedule"), GPU, True),
    (PodToleration("example.com/other", "Exists", "", "NoSchedule"), GPU, False),
    # an empty key with Exists matches every key
    (PodToleration("", "Exists", "", ""), GPU, True),
    (PodToleration("", "Exists", "", "NoExecute"), GPU, False),
    (PodToleration("", "Exists", "", "NoSchedule"), GPU, True),
    # an empty effect matches every effect; a given one only itself
    (PodToleration("example.com/gpu", "Exists", "", ""), GPU, True),
    (PodToleration("example.com/gpu", "Exists", "", ""),
     NodeTaint("example.com/gpu", "", "NoExecute"), True),
    (PodToleration("example.com/gpu", "Exists", "", "NoExecute"), GPU, False),
    (PodToleration("example.com/gpu", "Exists", "", "PreferNoSchedule"), GPU, False),
    # Gt / Lt (1.35 alpha): integer comparison of the taint's value with the toleration's
    (PodToleration("example.com/score", "Gt", "800", "NoSchedule"),
     NodeTaint("example.com/score", "1000", "NoSchedule"), True),
    (PodToleration("example.com/score", "Gt", "800", "NoSchedule"),
     NodeTaint("example.com/score", "500", "NoSchedule"), False),
    (PodToleration("example.com/score", "Lt", "5", "NoSchedule"),
     NodeTaint("example.com/score", "2", "NoSchedule"), True),
    (PodToleration("example.com/score", "Lt", "5", "NoSchedule"),
     NodeTaint("example.com/score", "5", "NoSchedule"), False),
    (PodToleration("example.com/score", "Gt", "1", "NoSchedule"),
     NodeTaint("example.com/score", "many", "NoSchedule"), False),
    # an unknown operator tolerates nothing
    (PodToleration("example.com/gpu", "Matches", "a100", "NoSchedule"), GPU, False),
]


@pytest.mark.parametrize(("toleration", "taint", "tolerated"), TOLERATES)
def test_toleration_matching(toleration: PodToleration, taint: NodeTaint, tolerated: bool) -> None:
    assert toleration.tolerates(taint) is tolerated


# (node taints, unschedulable, pod tolerations, the taint that keeps the pod off or None)
FILTER = [
    ((), False, (), None),
    ((GPU,), False, (), GPU),
    ((NodeTaint("a", "", "NoExecute"),), False, (), NodeTaint("a", "", "NoExecute")),
    # PreferNoSchedule is a preference, not a filter
    ((NodeTaint("a", "", "PreferNoSchedule"),), False, (), None),
    ((GPU,), False, (PodToleration("example.com/gpu", "Exists"),), None),
    ((GPU, NodeTaint("b", "x", "NoExecute")), False, (PodToleration("example.com/gpu", "Exists"),),
     NodeTaint("b", "x", "NoExecute")),
    # a cordon is the unschedulable taint, taint or not
    ((), True, (), NodeTaint("node.kubernetes.io/unschedulable", "", "NoSchedule")),
    ((), True, (PodToleration("node.kubernetes.io/unschedulable", "Exists", "", "NoSchedule"),), None),
    ((), True, (PodToleration("", "Exists"),), None),
]


@pytest.mark.parametrize(("taints", "cordoned", "tolerations", "keeps_off"), FILTER)
def test_the_taint_that_keeps_a_pod_off_a_node(taints: tuple[NodeTaint, ...], cordoned: bool,
                                               tolerations: tuple[PodToleration, ...],
                                               keeps_off: NodeTaint | None) -> None:
    node = NodeInfo("n", {}, taints, cordoned)
    assert untolerated(node, tolerations) == keeps_off


def pod(*, required: dict[str, Any] | None = None, node_selector: dict[str, str] | None = None,
        tolerations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x"}]}
    if required is not None:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}
    if node_selector is not None:
        spec["nodeSelector"] = node_selector
    if tolerations is not None:
        spec["tolerations"] = tolerations
    return {"spec": spec}


def pinned(*names: str) -> dict[str, Any]:
    return {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": list(names)}]}]}


RACK = {"nodeSelectorTerms": [{"matchExpressions": [
    {"key": "example.com/rack", "operator": "In", "values": ["r1"]}]}]}

NODES = {
    "node-0": NodeInfo("node-0", {"example.com/rack": "r1"}, (GPU,)),
    "node-1": NodeInfo("node-1", {"example.com/rack": "r1"}),
    "node-2": NodeInfo("node-2", {"example.com/rack": "r2"}, (), True),
    "node-3": NodeInfo("node-3", {"example.com/rack": "r2"}, (NodeTaint("x", "", "NoExecute"),)),
}

# (pod, held with reason / None, nodes named)
REFUSAL = [
    (pod(required=pinned("node-0")), "UntoleratedNodeTaint", ("node-0",)),
    (pod(required=pinned("node-0"), tolerations=[{"key": "example.com/gpu", "operator": "Exists"}]),
     None, ()),
    (pod(required=pinned("node-1")), None, ()),
    (pod(required=pinned("node-2")), "NodeUnschedulable", ("node-2",)),
    # one node of several takes it: scheduler's choice, not held
    (pod(required=pinned("node-0", "node-1")), None, ()),
    (pod(required=pinned("node-0", "node-2")), "UntoleratedNodeTaint", ("node-0", "node-2")),
    # network-attached devices: every node of the rack is tried
    (pod(required=RACK), None, ()),
    (pod(required=RACK, node_selector={"example.com/rack": "r2"}), None, ()),  # accepts no node: unknown
    (pod(required={"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "example.com/rack", "operator": "In", "values": ["r2"]}]}]}),
     "UntoleratedNodeTaint", ("node-2", "node-3")),
    # a node draco does not know is no reason to hold
    (pod(required=pinned("node-9")), None, ()),
    # no affinity at all: node-1 takes it
    (pod(), None, ()),
]


@pytest.mark.parametrize(("the_pod", "reason", "named"), REFUSAL)
def test_a_pod_is_held_only_when_every_known_node_it_accepts_refuses_it(
        the_pod: dict[str, Any], reason: str | None, named: tuple[str, ...]) -> None:
    got = refusal(the_pod, NODES)
    if reason is None:
        assert got is None
        return
    assert got is not None
    assert (got.reason, got.nodes) == (reason, named)
    for name in named:
        assert f"node {name}" in got.message


def test_nodes_and_tolerations_are_read_from_api_objects() -> None:
    node = parse_node({"metadata": {"name": "node-0", "labels": {"a": "b"}},
                       "spec": {"unschedulable": True,
                                "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}})
    assert node == NodeInfo("node-0", {"a": "b"}, (NodeTaint("k", "v", "NoSchedule"),), True)
    assert parse_tolerations([{"key": "k", "operator": "Exists", "effect": "NoExecute",
                               "tolerationSeconds": 30}]) == (PodToleration("k", "Exists", "", "NoExecute"),)
    assert str(NodeTaint("k", "v", "NoSchedule")) == "k=v:NoSchedule"
