"""A pod's own node choice bounds where its claims' devices may be: its nodeSelector,
its required node affinity (matchExpressions with every operator, matchFields on
metadata.name) and the node selectors of its claims that are allocated already, after
cordons and taints (kube-scheduler's NodeUnschedulable, TaintToleration, NodeAffinity,
then DynamicResources). The allocator controller and `draco allocate --from` share that
filter (`candidate_nodes`); when several pods share the claims a node must take all of
them, and the reason counts what each ruled out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from operators.allocator import NodeInfo
from operators.allocator.explain import NodeFunnel, RefusedNode
from operators.allocator.nodes import NodeIndex, PodFit, candidate_nodes, place
from operators.cli.main import main
from operators.cli.state import build_tracker
from operators.model import NamespacedName
from operators.model.nodes import NodeTaint
from tests.allocator.build import case_inputs
from tests.cli.test_allocate import dclass, dev, exactly, rclaim, rslice, run_json

NODES = [NodeInfo("a", {"zone": "east", "gpu": "true", "gen": "3"}),
         NodeInfo("b", {"zone": "west", "gpu": "true", "gen": "5"}),
         NodeInfo("c", {"zone": "east", "gen": "10"})]


def _req(key: str, op: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": op, **({"values": list(values)} if values else {})}


def _affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": list(terms)}}}


def _pin(node: str) -> dict[str, Any]:
    return {"nodeSelectorTerms": [{"matchFields": [_req("metadata.name", "In", node)]}]}


def _pod(name: str, *claims: str, selector: dict[str, str] | None = None,
         affinity: dict[str, Any] | None = None, tolerations: list[dict[str, Any]] | None = None,
         ) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "i"}],
                            "resourceClaims": [{"name": f"r{i}", "resourceClaimName": c}
                                               for i, c in enumerate(claims)]}
    if selector:
        spec["nodeSelector"] = selector
    if affinity:
        spec["affinity"] = affinity
    if tolerations:
        spec["tolerations"] = tolerations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": spec}


def _sibling(node: str) -> dict[str, Any]:
    """A claim the pod uses that is allocated already, to `node`."""
    return rclaim("sibling", allocation={"devices": {"results": []}, "nodeSelector": _pin(node)})


# (case, the pod's spec extras, sibling claim's node or None, nodes kept, nodes ruled out with why)
ONE_POD: list[tuple[str, dict[str, Any], str | None, list[str], list[tuple[str, str]]]] = [
    ("nodeSelector", {"selector": {"zone": "east"}}, None, ["a", "c"], [("b", "selector")]),
    ("nodeSelector, every label", {"selector": {"zone": "east", "gpu": "true"}}, None, ["a"],
     [("b", "selector"), ("c", "selector")]),
    ("In", {"affinity": _affinity({"matchExpressions": [_req("zone", "In", "west")]})}, None,
     ["b"], [("a", "selector"), ("c", "selector")]),
    ("NotIn", {"affinity": _affinity({"matchExpressions": [_req("zone", "NotIn", "west")]})}, None,
     ["a", "c"], [("b", "selector")]),
    ("NotIn matches a node without the label",
     {"affinity": _affinity({"matchExpressions": [_req("gpu", "NotIn", "true")]})}, None,
     ["c"], [("a", "selector"), ("b", "selector")]),
    ("Exists", {"affinity": _affinity({"matchExpressions": [_req("gpu", "Exists")]})}, None,
     ["a", "b"], [("c", "selector")]),
    ("DoesNotExist", {"affinity": _affinity({"matchExpressions": [_req("gpu", "DoesNotExist")]})},
     None, ["c"], [("a", "selector"), ("b", "selector")]),
    ("Gt compares integers (10 > 4)", {"affinity": _affinity({"matchExpressions": [_req("gen", "Gt", "4")]})},
     None, ["b", "c"], [("a", "selector")]),
    ("Lt", {"affinity": _affinity({"matchExpressions": [_req("gen", "Lt", "5")]})}, None,
     ["a"], [("b", "selector"), ("c", "selector")]),
    ("matchFields metadata.name In", {"affinity": _affinity({"matchFields": [_req("metadata.name", "In", "c")]})},
     None, ["c"], [("a", "selector"), ("b", "selector")]),
    ("matchFields metadata.name NotIn",
     {"affinity": _affinity({"matchFields": [_req("metadata.name", "NotIn", "a")]})}, None,
     ["b", "c"], [("a", "selector")]),
    ("terms are ORed", {"affinity": _affinity({"matchExpressions": [_req("zone", "In", "west")]},
                                              {"matchFields": [_req("metadata.name", "In", "c")]})},
     None, ["b", "c"], [("a", "selector")]),
    ("requirements of a term are ANDed",
     {"affinity": _affinity({"matchExpressions": [_req("zone", "In", "east"), _req("gpu", "Exists")]})},
     None, ["a"], [("b", "selector"), ("c", "selector")]),
    ("nodeSelector and affinity both bind", {"selector": {"gpu": "true"}, "affinity": _affinity(
        {"matchExpressions": [_req("zone", "NotIn", "east")]})}, None, ["b"],
     [("a", "selector"), ("c", "selector")]),
    ("an allocated sibling claim pins the pod", {}, "b", ["b"], [("a", "claim"), ("c", "claim")]),
    ("the pod's own selector is checked before its claims'", {"selector": {"zone": "east"}}, "b", [],
     [("a", "claim"), ("b", "selector"), ("c", "claim")]),
    ("nothing asked: every node", {}, None, ["a", "b", "c"], []),
]


def _fits(objects: list[dict[str, Any]]) -> list[PodFit]:
    tracker = build_tracker(objects)
    several = sum(o["kind"] == "Pod" for o in objects) > 1
    fits = []
    for obj in objects:
        if obj["kind"] != "Pod":
            continue
        key = NamespacedName("default", obj["metadata"]["name"])
        pod = tracker.pod(key)
        assert pod is not None
        allocated = tuple(c for pc in pod.resource_claims
                          if (c := tracker.claim(NamespacedName("default", pc.resource_claim_name or "")))
                          is not None and c.allocation is not None)
        fits.append(PodFit(pod, allocated, str(key) if several else ""))
    return fits


@pytest.mark.parametrize(("case", "extras", "sibling", "kept", "refused"), ONE_POD,
                         ids=[c[0] for c in ONE_POD])
def test_the_pods_selector_affinity_and_allocated_claims_bound_the_nodes(
        case: str, extras: dict[str, Any], sibling: str | None, kept: list[str],
        refused: list[tuple[str, str]]) -> None:
    objects = [_pod("p", "c", *(["sibling"] if sibling else []), **extras)]
    if sibling:
        objects.append(_sibling(sibling))
    allowed, out = candidate_nodes(NODES, _fits(objects))
    assert [n.name for n in allowed] == kept
    assert [(r.name, r.excluded) for r in out] == refused


def test_a_node_must_take_every_pod_sharing_the_claims_and_the_first_refusing_pod_is_named() -> None:
    fits = _fits([_pod("p1", "c", selector={"zone": "east"}),
                  _pod("p2", "c", affinity=_affinity({"matchExpressions": [_req("gpu", "Exists")]})),
                  rclaim("c")])
    allowed, out = candidate_nodes(NODES, fits)
    assert [n.name for n in allowed] == ["a"]
    assert [(r.name, r.excluded, r.pod) for r in out] == [("b", "selector", "default/p1"),
                                                          ("c", "selector", "default/p2")]


def test_a_taint_is_reported_before_the_selector() -> None:
    maint = NodeTaint("node.example.com/maint", "x", "NoSchedule")
    nodes = [NodeInfo("a", {"zone": "west"}, (maint,)), NodeInfo("b", {"zone": "west"}, unschedulable=True)]
    _, out = candidate_nodes(nodes, _fits([_pod("p", "c", selector={"zone": "east"})]))
    assert [(r.name, r.taint, r.excluded) for r in out] == [("a", maint, ""), ("b", None, "")]
    assert out[1].cordoned and not out[0].cordoned


FUNNELS: list[tuple[NodeFunnel, str]] = [
    (NodeFunnel(3, unreached=1, refused=(RefusedNode("b", excluded="selector"),
                                         RefusedNode("c", excluded="selector"))),
     "no node fits (3 nodes: 2 excluded by the pod's node selector or affinity, 1 reaches no devices)"),
    (NodeFunnel(2, refused=(RefusedNode("a", excluded="claim"), RefusedNode("b", excluded="selector"))),
     "no node fits (2 nodes: 1 excluded by the pod's node selector or affinity, "
     "1 excluded by the node selector of the pod's allocated claims)"),
    (NodeFunnel(3, refused=(RefusedNode("a", excluded="selector", pod="default/p1"),
                            RefusedNode("b", excluded="selector", pod="default/p2"),
                            RefusedNode("c", excluded="selector", pod="default/p2"))),
     "no node fits (3 nodes: 1 excluded by pod default/p1's node selector or affinity, "
     "2 excluded by pod default/p2's node selector or affinity)"),
    (NodeFunnel(2, refused=(RefusedNode("a"), RefusedNode("b", excluded="selector"))),
     "no node fits (2 nodes: 1 is cordoned (spec.unschedulable: a), "
     "1 excluded by the pod's node selector or affinity)"),
]


@pytest.mark.parametrize(("funnel", "words"), FUNNELS, ids=[w for _, w in FUNNELS])
def test_the_reason_counts_the_nodes_the_pod_excluded(funnel: NodeFunnel, words: str) -> None:
    assert funnel.summary() == words


LOCAL = [{"node": "node-1", "pool": "p1", "devices": ["dev-1"]},
         {"node": "node-2", "pool": "p2", "devices": ["dev-2"]}]
EVERYWHERE = [{"allNodes": True, "pool": "net", "devices": ["dev-n"]}]
TWO = [NodeInfo("node-1", {"zone": "east"}), NodeInfo("node-2", {"zone": "west"})]

# (slices, the pod's nodeSelector, node chosen, reason when none)
PLACE: list[tuple[list[dict[str, Any]], dict[str, str], str | None, str | None]] = [
    (LOCAL, {"zone": "west"}, "node-2", None),
    (LOCAL, {}, "node-1", None),
    (LOCAL[:1], {"zone": "west"}, None,
     "no node fits (2 nodes: 1 excluded by the pod's node selector or affinity, 1 reaches no devices)"),
    (EVERYWHERE, {"zone": "west"}, None, None),  # node-independent devices, a node takes the pod
    # no node takes the pod: kube-scheduler allocates for no node, and neither does draco
    (EVERYWHERE, {"zone": "north"}, None,
     "no node fits (2 nodes: 2 excluded by the pod's node selector or affinity)"),
]


@pytest.mark.parametrize(("slices", "selector", "chosen", "reason"), PLACE)
def test_devices_only_where_the_pods_selector_lets_it_run(
        slices: list[dict[str, Any]], selector: dict[str, str], chosen: str | None, reason: str | None) -> None:
    claims, _, inventory, classes, used = case_inputs(
        {"slices": slices, "claims": [{"requests": [{"name": "req"}]}]})
    allowed, refused = candidate_nodes(TWO, _fits([_pod("p", "c", selector=selector)]))
    placed = place(claims, NodeIndex(inventory, allowed), classes, used, 10.0, refused=refused)
    if reason is None:
        assert placed.allocated, placed.outcome.reason
        assert placed.node == chosen
    else:
        assert (placed.outcome.status, placed.node, placed.outcome.reason) == ("unsatisfiable", None, reason)


# -- draco allocate --from

def _node(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


def _world(tmp_path: Path, *extra: dict[str, Any], devices: int = 1) -> str:
    objects = [_node("node-1", zone="east", gpu="true"), _node("node-2", zone="west", gpu="true"),
               _node("node-3", zone="west"), dclass(),
               *(rslice(n, [dev(f"gpu-{i}") for i in range(devices)]) for n in ("node-1", "node-2", "node-3")),
               rclaim("c", exactly()), *extra]
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    return str(path)


def _table(path: str, *args: str, capsys: pytest.CaptureFixture[str]) -> dict[str, list[str]]:
    assert main(["allocate", "--from", path, *args]) == 0
    lines = capsys.readouterr().out.splitlines()
    return {line.split()[0]: line.split() for line in lines[1:]}


WEST = {"selector": {"zone": "west"}}
NOT_NODE_2 = {"affinity": _affinity({"matchFields": [_req("metadata.name", "NotIn", "node-2")]})}
GPU = {"affinity": _affinity({"matchExpressions": [_req("gpu", "Exists")]})}

# (case, pods and extra claims, node chosen for default/c)
CLI: list[tuple[str, list[dict[str, Any]], str]] = [
    ("no pod: the first node by name", [], "node-1"),
    ("the pod's nodeSelector", [_pod("p", "c", **WEST)], "node-2"),
    ("the pod's required affinity (matchFields)", [_pod("p", "c", **NOT_NODE_2)], "node-1"),
    ("selector and affinity together", [_pod("p", "c", selector={"zone": "west"}, **NOT_NODE_2)], "node-3"),
    ("an allocated sibling claim", [_pod("p", "c", "sibling"), _sibling("node-3")], "node-3"),
    ("two pods share the claim", [_pod("p1", "c", **WEST), _pod("p2", "c", **GPU)], "node-2"),
    ("a finished pod does not count", [{**_pod("p", "c", **WEST), "status": {"phase": "Succeeded"}}],
     "node-1"),
]


@pytest.mark.parametrize(("case", "extra", "chosen"), CLI, ids=[c[0] for c in CLI])
def test_draco_allocate_picks_a_node_the_claims_pods_may_run_on(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, extra: list[dict[str, Any]],
        chosen: str) -> None:
    world = _world(tmp_path, *extra)
    for args in (["--claim", "default/c"], []):
        rec = run_json(capsys, "--from", world, *args)["claims"]["default/c"]
        assert (rec["allocated"], rec["node"], rec["results"][0]["pool"]) == (True, chosen, chosen)
        assert rec["nodeSelector"] == _pin(chosen)
        row = _table(world, *args, capsys=capsys)["default/c"]
        assert row[1:3] == ["yes", chosen]


def test_draco_allocate_says_which_pod_excluded_the_nodes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    world = _world(tmp_path, _pod("p1", "c", **WEST),
                   _pod("p2", "c", affinity=_affinity({"matchExpressions": [_req("zone", "In", "east")]})))
    rec = run_json(capsys, "--from", world)["claims"]["default/c"]
    assert (rec["allocated"], rec["node"], rec["results"]) == (False, None, [])
    assert rec["reason"] == ("no node fits (3 nodes: 1 excluded by pod default/p1's node selector or "
                             "affinity, 2 excluded by pod default/p2's node selector or affinity)")
    assert main(["allocate", "--from", world]) == 0
    assert "1 excluded by pod default/p1's node selector or affinity" in capsys.readouterr().out
    # --node names a node the pod may not use
    rec = run_json(capsys, "--from", _world(tmp_path, _pod("p", "c", **WEST)), "--node", "node-1")
    assert rec["claims"]["default/c"]["reason"] == (
        "cannot allocate: no node fits (1 node: 1 excluded by the pod's node selector or affinity)")


def test_claims_allocated_earlier_in_the_run_bind_the_pods_later_claims(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # c goes to node-1 (first by name); d, used by the same pod, must follow it
    world = _world(tmp_path, rclaim("d", exactly()), _pod("p", "c", "d"), devices=2)
    doc = run_json(capsys, "--from", world)["claims"]
    assert [(doc[k]["node"], doc[k]["results"][0]["device"]) for k in ("default/c", "default/d")] == [
        ("node-1", "gpu-0"), ("node-1", "gpu-1")]
    # one device per node: d cannot join c, and the reason says why
    world = _world(tmp_path, rclaim("d", exactly()), _pod("p", "c", "d"))
    doc = run_json(capsys, "--from", world)["claims"]
    assert doc["default/d"]["allocated"] is False
    assert doc["default/d"]["reason"].startswith(
        "no node fits (3 nodes: 2 excluded by the node selector of the pod's allocated claims, "
        "1 reaches too few free, matching, tolerated devices for a request)")
    # allocated together, as the controller would: no node holds two devices
    doc = run_json(capsys, "--from", world, "--claim", "default/c", "--claim", "default/d")["claims"]
    assert doc["default/c"]["allocated"] is False
