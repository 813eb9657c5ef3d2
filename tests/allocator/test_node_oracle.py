"""The node search's shortcuts never change the pick: `place` agrees with trying every
candidate, scoring all that fit and picking as `scoring.pick` does (hypothesis)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from operators.allocator import NodeInfo, allocate, inventory_from_slices
from operators.allocator.nodes import NodeIndex, place
from operators.allocator.scoring import pick, raw_score
from operators.model import DeviceID
from tests.allocator.build import DEFAULT_CLASSES, claim, device_class, resource_slice

NODES = ["node-1", "node-2", "node-3"]
SIZE = "device.attributes['driver-a'].size == {}"


@st.composite
def scenario(draw: st.DrawFn) -> dict[str, Any]:
    slices = []
    for i, where in enumerate(draw(st.lists(st.sampled_from([*NODES, "all"]), min_size=1, max_size=4))):
        sizes = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
        devices = [{"name": f"d{j}", "attributes": {"size": {"int": s}}} for j, s in enumerate(sizes)]
        s: dict[str, Any] = {"pool": f"p{i}", "devices": devices}
        if where == "all":
            s["allNodes"] = True
        else:
            s["node"] = where
        slices.append(s)
    requests = []
    for r in range(draw(st.integers(1, 2))):
        if draw(st.booleans()):
            subs = [{"name": f"s{size}", "selectors": [SIZE.format(size)],
                     "count": draw(st.integers(1, 2))}
                    for size in draw(st.lists(st.integers(1, 3), min_size=1, max_size=3, unique=True))]
            requests.append({"name": f"r{r}", "firstAvailable": subs})
        else:
            requests.append({"name": f"r{r}", "count": draw(st.integers(1, 2))})
    claims = [{"name": f"c{c}", "requests": requests} for c in range(draw(st.integers(1, 2)))]
    all_ids = [f"driver-a/p{i}/d{j}" for i, s in enumerate(slices) for j in range(len(s["devices"]))]
    in_use = draw(st.lists(st.sampled_from(all_ids), max_size=2, unique=True))
    return {"slices": slices, "claims": claims, "inUse": in_use}


@settings(max_examples=150, deadline=None)
@given(scenario())
def test_place_agrees_with_exhaustive_scoring(case: dict[str, Any]) -> None:
    classes = {c.name: c for c in map(device_class, DEFAULT_CLASSES)}
    inventory = inventory_from_slices([resource_slice(s, i) for i, s in enumerate(case["slices"])])
    claims = [claim(c) for c in case["claims"]]
    in_use = {DeviceID(*x.split("/")) for x in case["inUse"]}
    nodes = [NodeInfo(n) for n in NODES]
    placed = place(claims, NodeIndex(inventory, nodes), classes, in_use, 10.0, with_explain=False)

    order: list[str | None] = []
    raw: dict[str | None, int] = {}
    outcomes = {}
    for node in [None, *nodes]:
        out = allocate(claims, node, inventory, classes, in_use, 10.0, with_explain=False)
        assert out.status in ("allocated", "unsatisfiable")
        if out.allocated:
            key = None if node is None else node.name
            order.append(key)
            raw[key] = raw_score(claims, out.allocations)
            outcomes[key] = out
    if not outcomes:
        assert placed.outcome.status == "unsatisfiable"
        return
    winner = pick(order, raw)
    assert placed.allocated and placed.node == winner
    assert placed.outcome.allocations == outcomes[winner].allocations
