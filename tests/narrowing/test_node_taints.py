"""Which nodes take a narrowed pod: kube-scheduler's TaintToleration and NodeUnschedulable
filters, as a table (pod x nodes -> held or not). Toleration matching and the filters
themselves are shared with the allocator and pinned in tests/model/test_model_node_taints.py."""

from __future__ import annotations

from typing import Any

import pytest

from operators.model import nodes as shared
from operators.narrowing.nodes import (
    NodeInfo,
    NodeTaint,
    PodToleration,
    parse_node,
    parse_tolerations,
    refusal,
)

GPU = NodeTaint("example.com/gpu", "a100", "NoSchedule")


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


def test_narrowing_uses_the_rules_it_shares_with_the_allocator() -> None:
    assert (NodeInfo, NodeTaint, PodToleration, parse_node) == (
        shared.NodeInfo, shared.NodeTaint, shared.PodToleration, shared.parse_node)
    cordoned_and_tainted = {"node-0": NodeInfo("node-0", {}, (GPU,), True)}
    got = refusal(pod(required=pinned("node-0")), cordoned_and_tainted)
    assert got is not None and got.reason == "UntoleratedNodeTaint"  # its own taint named first
    assert got.message == ("no node that can reach the pod's devices takes the pod: node node-0 has "
                           "the taint example.com/gpu=a100:NoSchedule, which the pod does not tolerate")
    cordoned = {"node-0": NodeInfo("node-0", {}, (), True)}
    got = refusal(pod(required=pinned("node-0")), cordoned)
    assert got is not None and (got.reason, got.message) == (
        "NodeUnschedulable",
        "no node that can reach the pod's devices takes the pod: node node-0 is cordoned (spec.unschedulable)")
