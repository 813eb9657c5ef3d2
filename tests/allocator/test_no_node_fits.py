"""The reason given when no node fits: how the candidate nodes fell away, in words a user
can act on, then what the explain over the whole cluster shows (node_cases.yaml pins two
more: the whole cluster short of devices, and enough devices but never on one node)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from operators.allocator import NodeInfo
from operators.allocator.nodes import NodeIndex, place
from operators.cli.main import main
from tests.allocator.build import case_inputs
from tests.cli.test_allocate import dclass, dev, exactly, node, rclaim, rslice, run_json

NOT_TOGETHER = ("cannot allocate: each request has enough matching devices on its own, but not "
                "together (devices shared between requests or claims, or constraint values that "
                "disagree)")

# (case, table nodes, slices (node-local), requests, how the nodes fell away, what follows)
CASES: list[tuple[str, list[str], list[dict[str, Any]], list[dict[str, Any]], str, str]] = [
    ("the nodes reach none of the devices", ["node-1", "node-2"],
     [{"node": "node-3", "pool": "p3", "devices": ["dev-3"]}], [{"name": "req"}],
     "no node fits (2 nodes: 2 reach no devices)", ""),
    ("no candidate node at all", [],
     [{"node": "node-1", "pool": "p1", "devices": ["dev-1"]}], [{"name": "req"}],
     "no node to try (none known, or none that the pod's node selector, node affinity and "
     "already allocated claims allow)", ""),
    ("a node searched without a fit says what the search met", ["node-1", "node-2"],
     [{"node": "node-1", "pool": "p1", "devices": ["dev-1"]}], [{"name": "a"}, {"name": "b"}],
     "no node fits (2 nodes: 1 reaches no devices, 1 searched without a fit)", f": {NOT_TOGETHER}"),
    ("one node, too few devices on it", ["node-1"],
     [{"node": "node-1", "pool": "p1", "devices": ["dev-1"]},
      {"node": "node-2", "pool": "p2", "devices": ["dev-2"]}], [{"name": "req", "count": 2}],
     "no node fits (1 node: 1 reaches too few free, matching, tolerated devices for a request)",
     "; the cluster as a whole has enough devices for every request, but no single node "
     "reaches them"),
]


@pytest.mark.parametrize(("case", "nodes", "slices", "requests", "where", "then"), CASES,
                         ids=[c[0] for c in CASES])
def test_the_reason_names_how_the_nodes_fell_away(
        case: str, nodes: list[str], slices: list[dict[str, Any]], requests: list[dict[str, Any]],
        where: str, then: str) -> None:
    claims, _, inventory, classes, in_use = case_inputs(
        {"slices": slices, "claims": [{"requests": requests}]})
    index = NodeIndex(inventory, [NodeInfo(n, {}) for n in nodes])
    placed = place(claims, index, classes, in_use, 10.0)
    assert (placed.outcome.status, placed.node) == ("unsatisfiable", None)
    assert placed.outcome.reason == where + then
    quick = place(claims, index, classes, in_use, 10.0, with_explain=False)
    assert quick.outcome.reason == f"cannot allocate: {where}"


def test_draco_allocate_prints_it_and_keeps_the_json_fields(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objects = [node("node-1"), node("node-2"), dclass(), rslice("node-1", [dev("gpu-0")]),
               rslice("node-2", [dev("gpu-0")]), rclaim("c", exactly(count=2))]
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    reason = ("no node fits (2 nodes: 2 reach too few free, matching, tolerated devices for a "
              "request); the cluster as a whole has enough devices for every request, but no "
              "single node reaches them")
    assert main(["allocate", "--from", str(path), "--claim", "default/c"]) == 0
    table = capsys.readouterr().out
    assert table.splitlines()[1].split(None, 4) == ["default/c", "no", "<none>", "<none>", reason]
    doc = run_json(capsys, "--from", str(path), "--claim", "default/c")  # checks the field sets
    rec = doc["claims"]["default/c"]
    assert rec["reason"] == reason and rec["allocated"] is False and rec["node"] is None
    assert rec["explain"]["requests"][0]["available"] == 2  # the cluster-wide funnel, unchanged
