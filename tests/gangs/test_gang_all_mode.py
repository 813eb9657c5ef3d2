"""`allocationMode: All` inside a device-attribute domain (issue 48, item 6).

draco's choice, consistent with upstream's meaning of All: a request in All mode gets
every device it matches on the member's node (upstream allocates all matching devices
of the node, and fails when one of them cannot be had). The gang's domain does not
narrow that set: when the devices it matches on a node span domains (another value of
the attribute, or devices without it), the member cannot be placed on that node in
that domain, and a gang left with no such node is unsatisfiable, the reason naming the
request and the node.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.gangs.world import NS, classes, gang, member, node, node_slice, place

ALL = [{"name": "gpu", "class": "class-a", "mode": "All"}]
ALL_OF_MODEL_A = [{"name": "gpu", "class": "class-a", "mode": "All",
                   "selectors": ['device.attributes["driver-a"].model == "a"']}]
ONE = [{"name": "gpu", "class": "class-a"}]


def dev(name: str, clique: str | None, model: str = "a") -> dict[str, Any]:
    attrs: dict[str, Any] = {"model": {"string": model}}
    if clique is not None:
        attrs["clique"] = {"string": clique}
    return {"name": name, "attributes": attrs}


# node name -> its devices (name, clique or None, model)
MIXED_NODE = {"n-1": [("g0", "x", "a"), ("g1", "x", "a"), ("g2", "y", "b"), ("g3", "y", "b")]}
TWO_CLEAN_ONE_MIXED = {"n-1": [("g0", "x", "a"), ("g1", "x", "a")],
                       "n-2": [("g0", "x", "a"), ("g1", "x", "a")],
                       "n-3": [("g0", "x", "a"), ("g1", "y", "a")]}
WITHOUT_ATTRIBUTE = {"n-1": [("g0", "x", "a"), ("g1", None, "a")]}

# (name, nodes, members' requests, status, member -> (node, devices) or reason fragment)
CASES: list[tuple[str, dict[str, list[tuple[str, str | None, str]]], list[list[dict[str, Any]]],
                  str, dict[str, tuple[str, list[str]]] | str]] = [
    ("All over a node whose GPUs span two cliques: unsatisfiable, not narrowed to one",
     MIXED_NODE, [ALL], "unsatisfiable",
     "member default/p-0 fits on no node left there (request gpu of claim p-0-claim asks for "
     "all the devices it matches on a node (allocationMode All), and on node n-1 2 of them "
     "are outside the topology domain)"),
    ("All whose selector matches one clique only: every matching device, in one domain",
     MIXED_NODE, [ALL_OF_MODEL_A], "allocated", {"p-0": ("n-1", ["g0", "g1"])}),
    ("two members All: the two nodes inside one clique, never the mixed node",
     TWO_CLEAN_ONE_MIXED, [ALL, ALL], "allocated",
     {"p-0": ("n-1", ["g0", "g1"]), "p-1": ("n-2", ["g0", "g1"])}),
    ("three members All: the mixed node is no choice, so they do not fit",
     TWO_CLEAN_ONE_MIXED, [ALL, ALL, ALL], "unsatisfiable", "allocationMode All"),
    ("a device without the attribute is matched too: outside every domain",
     WITHOUT_ATTRIBUTE, [ALL], "unsatisfiable", "on node n-1 1 of them is outside the topology domain"),
    ("a member asking one device beside an All member keeps to the domain as before "
     "(on the tightest node: the mixed node's one GPU of the clique)",
     TWO_CLEAN_ONE_MIXED, [ALL, ONE], "allocated",
     {"p-0": ("n-1", ["g0", "g1"]), "p-1": ("n-3", ["g0"])}),
]


@pytest.mark.parametrize(("name", "nodes", "requests", "status", "expect"), CASES, ids=[c[0] for c in CASES])
def test_all_mode_in_a_device_attribute_domain(
        name: str, nodes: dict[str, list[tuple[str, str | None, str]]],
        requests: list[list[dict[str, Any]]], status: str,
        expect: dict[str, tuple[str, list[str]]] | str) -> None:
    objs = [*classes(), gang("g", len(requests), device_attribute="driver-a/clique")]
    for name_, devices in nodes.items():
        objs += [node(name_), *node_slice(name_, [dev(*d) for d in devices])]
    for i, r in enumerate(requests):
        objs += member(f"p-{i}", "g", r)
    doc = place(objs)
    assert doc["status"] == status, doc["reason"]
    if isinstance(expect, str):
        assert doc["members"] == {}
        assert expect in doc["reason"], doc["reason"]
        return
    assert doc["domain"] == "driver-a/clique=x"
    for pod, (node_name, devices) in expect.items():
        label = f"{NS}/{pod}"
        assert doc["nodes"][label] == node_name
        assert sorted(r["device"] for r in doc["members"][label][f"{pod}-claim"]) == devices


def test_all_mode_with_a_node_label_domain_is_every_device_of_the_node() -> None:
    """A node-label domain holds whole nodes: All is all of the node, as for one pod."""
    objs = [*classes(), gang("g", 1, node_label="rack"), node("n-1", rack="r1"),
            *node_slice("n-1", [dev(*d) for d in MIXED_NODE["n-1"]]), *member("p-0", "g", ALL)]
    doc = place(objs)
    assert doc["status"] == "allocated", doc["reason"]
    assert sorted(r["device"] for r in doc["members"][f"{NS}/p-0"]["p-0-claim"]) == ["g0", "g1", "g2", "g3"]


def test_a_subrequest_in_all_mode_that_spans_domains_falls_to_the_next_alternative() -> None:
    """firstAvailable: the All alternative is out on the mixed node; the next one is used."""
    first = [{"name": "gpu", "firstAvailable": [
        {"name": "every", "class": "class-a", "mode": "All"},
        {"name": "two", "class": "class-a", "count": 2}]}]
    objs = [*classes(), gang("g", 1, device_attribute="driver-a/clique"), node("n-1"),
            *node_slice("n-1", [dev(*d) for d in MIXED_NODE["n-1"]]), *member("p-0", "g", first)]
    doc = place(objs)
    assert doc["status"] == "allocated", doc["reason"]
    results = doc["members"][f"{NS}/p-0"]["p-0-claim"]
    assert {r["request"] for r in results} == {"gpu/two"} and len(results) == 2
