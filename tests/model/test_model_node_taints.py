"""Node taints, cordons and pod tolerations as kube-scheduler reads them (shared by the
allocator and narrowing), pinned against upstream as tables.

Upstream facts (k8s.io/api core/v1 `Toleration.ToleratesTaint`; the scheduler's
TaintToleration and NodeUnschedulable filter plugins):
- an empty toleration effect matches every effect, a given one only itself;
- an empty key matches every key (the API allows that only with Exists);
- the operator defaults to Equal, which compares the values; Exists ignores the value;
- Lt/Gt parse both values as base-10 int64 (a value that does not parse tolerates
  nothing); any other operator tolerates nothing;
- tolerationSeconds plays no part in matching (it only delays NoExecute eviction);
- the TaintToleration filter looks at NoSchedule and NoExecute taints only, and reports
  the first untolerated one in the node's order; PreferNoSchedule filters nothing;
- NodeUnschedulable rejects a node with spec.unschedulable unless the pod tolerates the
  taint `node.kubernetes.io/unschedulable:NoSchedule`, and runs before TaintToleration.
"""

from __future__ import annotations

from typing import Any

import pytest

from operators.model import Pod, parse_object
from operators.model.nodes import (
    CORDON,
    NodeInfo,
    NodeTaint,
    PodToleration,
    cordoned,
    parse_node,
    parse_tolerations,
    untolerated,
    untolerated_taint,
)

GPU = NodeTaint("example.com/gpu", "a100", "NoSchedule")

# (toleration as the API stores it, taint, tolerated)
TOLERATES: list[tuple[dict[str, Any], NodeTaint, bool]] = [
    # Equal (also the default operator) compares the value
    ({"key": "example.com/gpu", "operator": "Equal", "value": "a100", "effect": "NoSchedule"}, GPU, True),
    ({"key": "example.com/gpu", "value": "a100", "effect": "NoSchedule"}, GPU, True),
    ({"key": "example.com/gpu", "operator": "Equal", "value": "h100", "effect": "NoSchedule"}, GPU, False),
    ({"key": "example.com/gpu", "operator": "Equal", "effect": "NoSchedule"}, GPU, False),
    ({"key": "example.com/gpu", "effect": "NoSchedule"}, NodeTaint("example.com/gpu", "", "NoSchedule"), True),
    # Exists ignores the value
    ({"key": "example.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, GPU, True),
    ({"key": "example.com/other", "operator": "Exists", "effect": "NoSchedule"}, GPU, False),
    # an empty key with Exists matches every key (and with an empty effect every taint)
    ({"operator": "Exists"}, GPU, True),
    ({"operator": "Exists"}, NodeTaint("node.kubernetes.io/unschedulable", "", "NoSchedule"), True),
    ({"operator": "Exists", "effect": "NoExecute"}, GPU, False),
    ({"operator": "Exists", "effect": "NoSchedule"}, GPU, True),
    # an empty effect matches every effect; a given one only itself
    ({"key": "example.com/gpu", "operator": "Exists"}, GPU, True),
    ({"key": "example.com/gpu", "operator": "Exists"}, NodeTaint("example.com/gpu", "", "NoExecute"), True),
    ({"key": "example.com/gpu", "operator": "Exists"}, NodeTaint("example.com/gpu", "", "PreferNoSchedule"), True),
    ({"key": "example.com/gpu", "operator": "Exists", "effect": "NoExecute"}, GPU, False),
    ({"key": "example.com/gpu", "operator": "Exists", "effect": "PreferNoSchedule"}, GPU, False),
    # keys compare exactly (case included)
    ({"key": "Example.com/gpu", "operator": "Exists"}, GPU, False),
    # tolerationSeconds changes nothing about matching
    ({"key": "example.com/gpu", "operator": "Exists", "tolerationSeconds": 0}, GPU, True),
    ({"key": "example.com/gpu", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
     NodeTaint("example.com/gpu", "", "NoExecute"), True),
    # Gt / Lt (1.35 alpha): base-10 int64 comparison of the taint's value with the toleration's
    ({"key": "example.com/score", "operator": "Gt", "value": "800"}, NodeTaint("example.com/score", "1000", "NoSchedule"), True),
    ({"key": "example.com/score", "operator": "Gt", "value": "800"}, NodeTaint("example.com/score", "500", "NoSchedule"), False),
    ({"key": "example.com/score", "operator": "Gt", "value": "800"}, NodeTaint("example.com/score", "800", "NoSchedule"), False),
    ({"key": "example.com/score", "operator": "Lt", "value": "5"}, NodeTaint("example.com/score", "2", "NoSchedule"), True),
    ({"key": "example.com/score", "operator": "Lt", "value": "5"}, NodeTaint("example.com/score", "5", "NoSchedule"), False),
    ({"key": "example.com/score", "operator": "Lt", "value": "0"}, NodeTaint("example.com/score", "-3", "NoSchedule"), True),
    ({"key": "example.com/score", "operator": "Gt", "value": "+1"}, NodeTaint("example.com/score", "2", "NoSchedule"), True),
    ({"key": "example.com/score", "operator": "Gt", "value": "1"}, NodeTaint("example.com/score", "many", "NoSchedule"), False),
    ({"key": "example.com/score", "operator": "Gt", "value": "1"}, NodeTaint("example.com/score", "1_000", "NoSchedule"), False),
    ({"key": "example.com/score", "operator": "Gt", "value": "1"}, NodeTaint("example.com/score", " 5", "NoSchedule"), False),
    ({"key": "example.com/score", "operator": "Gt", "value": "1"},
     NodeTaint("example.com/score", "9223372036854775808", "NoSchedule"), False),  # past int64
    ({"key": "example.com/score", "operator": "Gt", "value": "1"},
     NodeTaint("example.com/score", "9223372036854775807", "NoSchedule"), True),
    # an unknown operator tolerates nothing
    ({"key": "example.com/gpu", "operator": "Matches", "value": "a100"}, GPU, False),
]


@pytest.mark.parametrize(("raw", "taint", "tolerated"), TOLERATES,
                         ids=[f"{c[0]}-{c[1]}" for c in TOLERATES])
def test_toleration_matching_as_upstream(raw: dict[str, Any], taint: NodeTaint, tolerated: bool) -> None:
    (toleration,) = parse_tolerations([raw])
    assert toleration.tolerates(taint) is tolerated


MAINT = NodeTaint("node.example.com/maint", "x", "NoSchedule")
EVICT = NodeTaint("b", "x", "NoExecute")
EXISTS_MAINT = PodToleration("node.example.com/maint", "Exists")
TOLERATES_CORDON = PodToleration("node.kubernetes.io/unschedulable", "Exists", "", "NoSchedule")

# (node taints, cordoned, pod tolerations, NodeUnschedulable rejects, TaintToleration's
#  first untolerated taint, narrowing's combined answer)
FILTERS: list[tuple[tuple[NodeTaint, ...], bool, tuple[PodToleration, ...], bool, NodeTaint | None,
                    NodeTaint | None]] = [
    ((), False, (), False, None, None),
    ((MAINT,), False, (), False, MAINT, MAINT),
    ((EVICT,), False, (), False, EVICT, EVICT),
    # PreferNoSchedule is a preference (a score), not a filter
    ((NodeTaint("a", "", "PreferNoSchedule"),), False, (), False, None, None),
    ((MAINT,), False, (EXISTS_MAINT,), False, None, None),
    # the first untolerated taint in the node's order
    ((MAINT, EVICT), False, (), False, MAINT, MAINT),
    ((MAINT, EVICT), False, (EXISTS_MAINT,), False, EVICT, EVICT),
    # an unknown effect filters nothing
    ((NodeTaint("a", "", "Sometimes"),), False, (), False, None, None),
    # a cordon is the unschedulable taint, taint or not
    ((), True, (), True, None, CORDON),
    ((), True, (TOLERATES_CORDON,), False, None, None),
    ((), True, (PodToleration("", "Exists"),), False, None, None),
    ((), True, (PodToleration("node.kubernetes.io/unschedulable", "Exists", "", "NoExecute"),), True, None, CORDON),
    # cordoned and tainted: kube-scheduler reports the cordon (its filter runs first);
    # narrowing's answer keeps naming the node's own taint first, as it always did
    ((MAINT,), True, (), True, MAINT, MAINT),
    ((CORDON,), True, (), True, CORDON, CORDON),
    ((CORDON,), True, (TOLERATES_CORDON,), False, None, None),
]


@pytest.mark.parametrize(("taints", "unschedulable", "tolerations", "rejects_cordon", "first_taint", "either"),
                         FILTERS)
def test_the_filters_that_keep_a_pod_off_a_node(
        taints: tuple[NodeTaint, ...], unschedulable: bool, tolerations: tuple[PodToleration, ...],
        rejects_cordon: bool, first_taint: NodeTaint | None, either: NodeTaint | None) -> None:
    node = NodeInfo("n", {}, taints, unschedulable)
    assert cordoned(node, tolerations) is rejects_cordon
    assert untolerated_taint(node, tolerations) == first_taint
    assert untolerated(node, tolerations) == either


def test_nodes_are_read_from_api_objects() -> None:
    node = parse_node({"metadata": {"name": "node-0", "labels": {"a": "b"}},
                       "spec": {"unschedulable": True,
                                "taints": [{"key": "k", "value": "v", "effect": "NoSchedule",
                                            "timeAdded": "2026-01-01T00:00:00Z"}, "junk"]},
                       "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    assert node == NodeInfo("node-0", {"a": "b"}, (NodeTaint("k", "v", "NoSchedule"),), True)
    # what a heartbeat changes is not kept: equal views, so no pod is woken for it
    assert parse_node({"metadata": {"name": "n", "resourceVersion": "1"}}) == \
        parse_node({"metadata": {"name": "n", "resourceVersion": "2"}, "status": {"phase": "x"}})
    assert str(NodeTaint("k", "v", "NoSchedule")) == "k=v:NoSchedule"
    assert str(NodeTaint("k", "", "NoExecute")) == "k:NoExecute"


def test_pods_carry_their_tolerations_and_pods_alike_share_them() -> None:
    defaults = [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                 "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
                 "tolerationSeconds": 300}]
    pods = [parse_object({"apiVersion": "v1", "kind": "Pod",
                          "metadata": {"name": f"p{i}", "namespace": "ns"},
                          "spec": {"tolerations": defaults, "containers": []}}) for i in range(2)]
    assert all(isinstance(p, Pod) for p in pods)
    first, second = (p.tolerations for p in pods if isinstance(p, Pod))
    assert first == (PodToleration("node.kubernetes.io/not-ready", "Exists", "", "NoExecute"),
                     PodToleration("node.kubernetes.io/unreachable", "Exists", "", "NoExecute"))
    assert first is second  # the tracker keeps every pod: one copy of the usual defaults
    bare = parse_object({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "b", "namespace": "ns"},
                         "spec": {"tolerations": "not-a-list"}})
    assert isinstance(bare, Pod) and bare.tolerations == ()  # unreadable: the pod still counts
