"""Node choice and KEP-4816 scoring: node_cases.yaml, plus upstream's normalization."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from operators.allocator.nodes import NodeIndex, PodFit, candidate_nodes, place
from operators.allocator.scoring import normalize, pick
from operators.model import Pod
from operators.model.meta import parse_meta
from operators.model.nodes import parse_node
from operators.model.pods import parse_pod
from tests.allocator.build import case_inputs
from tests.allocator.test_allocation_table import _results

CASES: list[dict[str, Any]] = yaml.safe_load(Path(__file__).with_name("node_cases.yaml").read_text())


def node_api(n: dict[str, Any]) -> dict[str, Any]:
    """A table node as the API serves it: labels, taints, cordon."""
    spec: dict[str, Any] = {}
    if n.get("taints"):
        spec["taints"] = n["taints"]
    if n.get("unschedulable"):
        spec["unschedulable"] = True
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": n["name"], "labels": n.get("labels", {})},
            "spec": spec}


def case_pod(case: dict[str, Any]) -> Pod:
    """The pod using the case's claims: its tolerations, nodeSelector and affinity."""
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "i"}],
                            "tolerations": case.get("tolerations", []),
                            "nodeSelector": case.get("podNodeSelector", {})}
    if "podAffinity" in case:
        spec["affinity"] = case["podAffinity"]
    return parse_pod(parse_meta({"metadata": {"name": "p", "namespace": "default"}}, namespaced=True), spec, {})


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_node_cases(case: dict[str, Any]) -> None:
    claims, _, inventory, classes, in_use = case_inputs(case)
    nodes = [parse_node(node_api(n)) for n in case["nodes"]]
    only = next((n for n in nodes if n.name == case["only"]), None) if "only" in case else None
    allowed, refused = candidate_nodes(nodes, [PodFit(case_pod(case))])  # the controller's filter
    placed = place(claims, NodeIndex(inventory, allowed), classes, in_use, 10.0, only=only,
                   refused=refused)
    expect = case["expect"]
    assert placed.outcome.status == expect["status"], placed.outcome.reason
    assert placed.node == expect["node"]
    if "reason" in expect:
        assert expect["reason"] in (placed.outcome.reason or ""), placed.outcome.reason
    if "results" in expect:
        assert [_results(placed.outcome.allocation_api(i)) for i in range(len(claims))] == expect["results"]
    if "nodeSelector" in expect:
        got = [placed.outcome.allocation_api(i).get("nodeSelector") for i in range(len(claims))]
        assert got == expect["nodeSelector"]
    if "scores" in expect:
        # Only nodes actually searched are scored; those listed must be exact.
        for node, score in expect["scores"].items():
            assert placed.scores.get(node) == score, placed.scores
    if "explain" in expect:
        got = {r.request: r.to_api() for ce in placed.outcome.explain for r in ce.requests}
        for request, fields in expect["explain"].items():
            for k, v in fields.items():
                assert got[request][k] == v, (request, k, got[request])


NORMALIZE = [
    # (raw scores, normalized) — upstream's helper.DefaultNormalizeScore(100, false, ...)
    ({"a": 7, "b": 8}, {"a": 87, "b": 100}),
    ({"a": 0, "b": 0}, {"a": 0, "b": 0}),
    ({"a": 0, "b": 16}, {"a": 0, "b": 100}),
    ({"a": 15, "b": 16}, {"a": 93, "b": 100}),
    ({"a": 200, "b": 201}, {"a": 99, "b": 100}),
    ({"a": 301, "b": 302, "c": 300}, {"a": 99, "b": 100, "c": 99}),
]


@pytest.mark.parametrize(("raw", "normalized"), NORMALIZE)
def test_normalize_as_upstream(raw: dict[str, int], normalized: dict[str, int]) -> None:
    assert normalize(raw) == normalized


PICK = [
    # (order tried, raw scores, winner): highest normalized, ties to the earliest tried
    ([None, "n1", "n2"], {None: 7, "n1": 8, "n2": 8}, "n1"),
    ([None, "n1"], {None: 0, "n1": 0}, None),
    (["n1", "n2", "n3"], {"n1": 301, "n3": 300, "n2": 302}, "n2"),
    # 100*300//302 == 100*301//302 == 99: integer division makes these two tie
    (["n1", "n2", "n3"], {"n1": 300, "n2": 301, "n3": 302}, "n3"),
    (["n1"], {}, None),
]


@pytest.mark.parametrize(("order", "raw", "winner"), PICK)
def test_pick(order: list[Any], raw: dict[Any, int], winner: Any) -> None:
    assert pick(order, raw) == winner
