"""Nodes kube-scheduler would never put the pod on are no candidates for its devices:
cordoned nodes (NodeUnschedulable) and nodes with a NoSchedule/NoExecute taint the pod
does not tolerate (TaintToleration), in that order; and the reason says so in words a
user can act on. The same filter in `draco allocate --from` when the input's Pods use
the claims.
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
from operators.model.meta import parse_meta
from operators.model.nodes import NodeTaint, PodToleration
from operators.model.pods import parse_pod
from tests.allocator.build import case_inputs
from tests.cli.test_allocate import dclass, dev, exactly, rclaim, rslice, run_json

MAINT = NodeTaint("node.example.com/maint", "x", "NoSchedule")
EVICT = NodeTaint("node.example.com/broken", "", "NoExecute")
SOFT = NodeTaint("node.example.com/busy", "", "PreferNoSchedule")
TOLERATE_MAINT = (PodToleration("node.example.com/maint", "Exists"),)
TOLERATE_CORDON = (PodToleration("node.kubernetes.io/unschedulable", "Exists", "", "NoSchedule"),)
NODES = [NodeInfo("clean"), NodeInfo("maint", taints=(MAINT,)), NodeInfo("broken", taints=(EVICT,)),
         NodeInfo("soft", taints=(SOFT,)), NodeInfo("cordoned", unschedulable=True),
         NodeInfo("both", taints=(MAINT,), unschedulable=True)]

def schedulable(nodes: list[NodeInfo], tolerations: list[tuple[PodToleration, ...]],
                ) -> tuple[list[NodeInfo], list[RefusedNode]]:
    """`candidate_nodes` for pods that differ only in their tolerations."""
    def pod(tols: tuple[PodToleration, ...]) -> PodFit:
        spec = {"containers": [{"name": "c", "image": "i"}],
                "tolerations": [{"key": t.key, "operator": t.operator, "value": t.value, "effect": t.effect}
                                for t in tols]}
        return PodFit(parse_pod(parse_meta({"metadata": {"name": "p", "namespace": "default"}},
                                           namespaced=True), spec, {}))
    return candidate_nodes(nodes, [pod(t) for t in tolerations])


# (tolerations of each pod, nodes kept, nodes refused with why: the taint, or None = cordoned)
SCHEDULABLE: list[tuple[list[tuple[PodToleration, ...]], list[str], list[tuple[str, NodeTaint | None]]]] = [
    ([()], ["clean", "soft"],
     [("maint", MAINT), ("broken", EVICT), ("cordoned", None), ("both", None)]),  # cordon first
    ([TOLERATE_MAINT], ["clean", "maint", "soft"],
     [("broken", EVICT), ("cordoned", None), ("both", None)]),
    ([TOLERATE_CORDON], ["clean", "soft", "cordoned"], [("maint", MAINT), ("broken", EVICT), ("both", MAINT)]),
    ([TOLERATE_MAINT + TOLERATE_CORDON], ["clean", "maint", "soft", "cordoned", "both"], [("broken", EVICT)]),
    ([(PodToleration("", "Exists"),)], [n.name for n in NODES], []),  # tolerates everything
    # several pods share the claims: a node must take every one of them
    ([(PodToleration("", "Exists"),), TOLERATE_MAINT], ["clean", "maint", "soft"],
     [("broken", EVICT), ("cordoned", None), ("both", None)]),
    ([], [n.name for n in NODES], []),  # no pod known: nothing to filter with
]


@pytest.mark.parametrize(("tolerations", "kept", "refused"), SCHEDULABLE)
def test_which_nodes_a_pod_may_be_scheduled_on(
        tolerations: list[tuple[PodToleration, ...]], kept: list[str],
        refused: list[tuple[str, NodeTaint | None]]) -> None:
    allowed, out = schedulable(NODES, tolerations)
    assert [n.name for n in allowed] == kept
    assert [(r.name, r.taint) for r in out] == refused


# (funnel, the words a user reads)
FUNNELS: list[tuple[NodeFunnel, str]] = [
    (NodeFunnel(1, refused=(RefusedNode("node-0", MAINT),)),
     "no node fits (1 node: 1 has a taint the pod does not tolerate "
     "(node.example.com/maint=x:NoSchedule on node-0))"),
    (NodeFunnel(2, refused=(RefusedNode("node-0"), RefusedNode("node-1"))),
     "no node fits (2 nodes: 2 are cordoned (spec.unschedulable: node-0, node-1))"),
    (NodeFunnel(3, unreached=1, refused=(RefusedNode("a", EVICT), RefusedNode("b"))),
     "no node fits (3 nodes: 1 has a taint the pod does not tolerate "
     "(node.example.com/broken:NoExecute on a), 1 is cordoned (spec.unschedulable: b), "
     "1 reaches no devices)"),
    (NodeFunnel(5, refused=tuple(RefusedNode(f"n{i}", MAINT) for i in range(5))),
     "no node fits (5 nodes: 5 have a taint the pod does not tolerate "
     "(node.example.com/maint=x:NoSchedule on n0, node.example.com/maint=x:NoSchedule on n1, "
     "node.example.com/maint=x:NoSchedule on n2, and 2 more))"),
    (NodeFunnel(2, cluster_short=True, refused=(RefusedNode("a", MAINT),)),
     "no node fits (2 nodes: 1 has a taint the pod does not tolerate "
     "(node.example.com/maint=x:NoSchedule on a); the whole cluster has too few devices for a request)"),
    # unchanged when nothing is refused
    (NodeFunnel(2, cluster_short=True), "no node fits (2 nodes; the whole cluster has too few devices for a request)"),
    (NodeFunnel(2, unreached=2), "no node fits (2 nodes: 2 reach no devices)"),
]


@pytest.mark.parametrize(("funnel", "words"), FUNNELS, ids=[w for _, w in FUNNELS])
def test_the_reason_names_the_nodes_kube_scheduler_rules_out(funnel: NodeFunnel, words: str) -> None:
    assert funnel.summary() == words


def _placed(slices: list[dict[str, Any]], nodes: list[NodeInfo], tolerations: tuple[PodToleration, ...],
            only: str | None = None, in_use: tuple[str, ...] = ()) -> Any:
    claims, _, inventory, classes, used = case_inputs(
        {"slices": slices, "claims": [{"requests": [{"name": "req"}]}], "inUse": list(in_use)})
    allowed, refused = schedulable(nodes, [tolerations])
    pick = next((n for n in nodes if n.name == only), None)
    return place(claims, NodeIndex(inventory, allowed), classes, used, 10.0, only=pick, refused=refused)


LOCAL = [{"node": "node-1", "pool": "p1", "devices": ["dev-1"]},
         {"node": "node-2", "pool": "p2", "devices": ["dev-2"]}]
EVERYWHERE = [{"allNodes": True, "pool": "net", "devices": ["dev-n"]}]

# (slices, nodes, pod tolerations, only, in use, node chosen or None, reason when none)
PLACE: list[tuple[list[dict[str, Any]], list[NodeInfo], tuple[PodToleration, ...], str | None,
                  tuple[str, ...], str | None, str | None]] = [
    # the best node by name is tainted: the next one gets the devices
    (LOCAL, [NodeInfo("node-1", taints=(MAINT,)), NodeInfo("node-2")], (), None, (), "node-2", None),
    (LOCAL, [NodeInfo("node-1", unschedulable=True), NodeInfo("node-2")], (), None, (), "node-2", None),
    # tolerated, or only preferred away from: used as before
    (LOCAL, [NodeInfo("node-1", taints=(MAINT,)), NodeInfo("node-2")], TOLERATE_MAINT, None, (), "node-1", None),
    (LOCAL, [NodeInfo("node-1", taints=(SOFT,)), NodeInfo("node-2")], (), None, (), "node-1", None),
    # the only device-bearing node is tainted: nothing, and the reason names the taint
    (LOCAL[:1], [NodeInfo("node-1", taints=(MAINT,)), NodeInfo("node-2")], (), None, (), None,
     "no node fits (2 nodes: 1 has a taint the pod does not tolerate "
     "(node.example.com/maint=x:NoSchedule on node-1), 1 reaches no devices)"),
    # node-independent devices: fine while some node takes the pod ...
    (EVERYWHERE, [NodeInfo("node-1", taints=(MAINT,)), NodeInfo("node-2")], (), None, (), None, None),
    # ... but not when every node refuses it (kube-scheduler would allocate for no node)
    (EVERYWHERE, [NodeInfo("node-1", taints=(MAINT,)), NodeInfo("node-2", unschedulable=True)], (), None, (),
     None, "no node fits (2 nodes: 1 has a taint the pod does not tolerate "
     "(node.example.com/maint=x:NoSchedule on node-1), 1 is cordoned (spec.unschedulable: node-2))"),
    # the node asked for is refused
    (LOCAL, [NodeInfo("node-1", taints=(EVICT,)), NodeInfo("node-2")], (), "node-1", (), None,
     "cannot allocate: no node fits (1 node: 1 has a taint the pod does not tolerate "
     "(node.example.com/broken:NoExecute on node-1))"),
    # devices in use where the pod may go, free where it may not: said so
    (LOCAL, [NodeInfo("node-1", taints=(MAINT,)), NodeInfo("node-2")], (), None, ("driver-a/p2/dev-2",),
     None, "no node fits (2 nodes: 1 has a taint the pod does not tolerate "
     "(node.example.com/maint=x:NoSchedule on node-1), 1 reaches too few free, matching, tolerated "
     "devices for a request); the cluster as a whole has enough devices for every request, but no "
     "single node that takes the pod reaches them"),
]


@pytest.mark.parametrize(("slices", "nodes", "tolerations", "only", "in_use", "chosen", "reason"), PLACE)
def test_devices_only_where_the_pod_may_run(
        slices: list[dict[str, Any]], nodes: list[NodeInfo], tolerations: tuple[PodToleration, ...],
        only: str | None, in_use: tuple[str, ...], chosen: str | None, reason: str | None) -> None:
    placed = _placed(slices, nodes, tolerations, only, in_use)
    if reason is None:
        assert placed.allocated, placed.outcome.reason
        assert placed.node == chosen
        return
    assert (placed.outcome.status, placed.node) == ("unsatisfiable", None)
    assert placed.outcome.reason == reason


# -- draco allocate --from

def _node(name: str, *, taints: list[dict[str, str]] | None = None, cordoned: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if cordoned:
        spec["unschedulable"] = True
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {}}, "spec": spec}


def _pod(name: str, claim: str, tolerations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "i"}],
                            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}]}
    if tolerations:
        spec["tolerations"] = tolerations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": spec}


MAINT_API = {"key": "node.example.com/maint", "value": "x", "effect": "NoSchedule"}


def _world(tmp_path: Path, *extra: dict[str, Any]) -> str:
    objects = [_node("node-1", taints=[MAINT_API]), _node("node-2"), dclass(),
               rslice("node-1", [dev("gpu-0")]), rslice("node-2", [dev("gpu-0")]), rclaim("c", exactly()),
               *extra]
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    return str(path)


def test_draco_allocate_skips_nodes_the_claims_pod_cannot_run_on(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # no pod uses the claim: who would tolerate what is unknown, node-1 (first by name) as before
    rec = run_json(capsys, "--from", _world(tmp_path), "--claim", "default/c")["claims"]["default/c"]
    assert (rec["allocated"], rec["node"]) == (True, "node-1")
    # its pod does not tolerate node-1's taint: node-2, also without --claim
    world = _world(tmp_path, _pod("p", "c"))
    for args in (["--claim", "default/c"], []):
        rec = run_json(capsys, "--from", world, *args)["claims"]["default/c"]
        assert (rec["allocated"], rec["node"], rec["results"][0]["pool"]) == (True, "node-2", "node-2")
    # tolerated: node-1 again
    world = _world(tmp_path, _pod("p", "c", [{"key": "node.example.com/maint", "operator": "Exists"}]))
    rec = run_json(capsys, "--from", world)["claims"]["default/c"]
    assert rec["node"] == "node-1"


def test_draco_allocate_says_which_node_refused_the_pod(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    world = _world(tmp_path, _pod("p", "c"))
    rec = run_json(capsys, "--from", world, "--claim", "default/c", "--node", "node-1")["claims"]["default/c"]
    assert rec == {"status": "unsatisfiable", "allocated": False, "node": None, "nodeSelector": None,
                   "results": [], "config": [],
                   "reason": "cannot allocate: no node fits (1 node: 1 has a taint the pod does not "
                             "tolerate (node.example.com/maint=x:NoSchedule on node-1))",
                   "explain": None}
    cordoned = tmp_path / "cordoned.yaml"
    cordoned.write_text(yaml.safe_dump_all([
        _node("node-1", cordoned=True), dclass(), rslice("node-1", [dev("gpu-0")]), rclaim("c", exactly()),
        _pod("p", "c")]))
    rec = run_json(capsys, "--from", str(cordoned))["claims"]["default/c"]
    assert rec["allocated"] is False
    assert rec["reason"].startswith("no node fits (1 node: 1 is cordoned (spec.unschedulable: node-1))")


def test_a_cordon_is_in_the_table_output_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    world = tmp_path / "in.yaml"
    world.write_text(yaml.safe_dump_all([
        _node("node-1", cordoned=True), dclass(), rslice("node-1", [dev("gpu-0")]),
        rclaim("c", exactly()), _pod("p", "c")]))
    assert main(["allocate", "--from", str(world)]) == 0
    assert "1 is cordoned (spec.unschedulable: node-1)" in capsys.readouterr().out
