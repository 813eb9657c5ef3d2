"""Nodes another controller chose are honoured by narrowing: a pod that Kueue's topology
ungater (or a user) put on nodes through its nodeSelector or required node affinity is
narrowed only within that choice. Where the devices are elsewhere draco refuses (the gate
stays, the reason says why) instead of writing an affinity no node satisfies; where they
are inside, the narrowed pod still accepts the chosen node. Pinned as a table over what
TAS writes: a hostname selector, a rack selector, a required affinity term."""

from __future__ import annotations

from typing import Any

import pytest
from placement import gated_pod, pod_accepts
from test_narrowing_loop import Scenario, claim, run
from test_narrowing_loop import pod as loop_pod

from operators.apiserver.validation.pods import validate_pod_update
from operators.narrowing import CannotNarrow, Narrowed, narrow

HOST = "kubernetes.io/hostname"
RACK = "example.com/rack"
NODES = {
    "node-a": {HOST: "node-a", RACK: "r1"},
    "node-b": {HOST: "node-b", RACK: "r1"},
    "node-c": {HOST: "node-c", RACK: "r2"},
}


def pin(node: str) -> dict[str, Any]:
    return {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": [node]}]}]}


def rack_affinity(*racks: str) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": RACK, "operator": "In", "values": list(racks)}]}]}}}


# (case, the pod's placement fields another controller set, the devices' node, the outcome:
#  None = narrowed, else the refusal's reason)
CASES: list[tuple[str, dict[str, Any], str, str | None]] = [
    ("TAS hostname, devices there", {"nodeSelector": {HOST: "node-b"}}, "node-b", None),
    ("TAS hostname, devices on another node", {"nodeSelector": {HOST: "node-b"}}, "node-a",
     "PodRejectsChosenNode"),
    ("TAS rack, devices in the rack", {"nodeSelector": {RACK: "r1"}}, "node-a", None),
    ("TAS rack, devices in another rack", {"nodeSelector": {RACK: "r1"}}, "node-c",
     "PodRejectsChosenNode"),
    ("required affinity, devices inside", {"affinity": rack_affinity("r2")}, "node-c", None),
    ("required affinity, devices outside", {"affinity": rack_affinity("r2")}, "node-b",
     "PodRejectsChosenNode"),
    ("selector and affinity together, devices inside",
     {"nodeSelector": {HOST: "node-a"}, "affinity": rack_affinity("r1", "r2")}, "node-a", None),
]


@pytest.mark.parametrize(("case", "spec", "device_node", "refused"), CASES, ids=[c[0] for c in CASES])
def test_narrowing_stays_within_the_chosen_nodes(case: str, spec: dict[str, Any], device_node: str,
                                                 refused: str | None) -> None:
    """The controller always narrows with the node the devices pin (and its labels) when
    it knows that node: without it a label selector cannot be proven to exclude a node
    name, and a pod could be narrowed to node-a while its nodeSelector says node-b."""
    pod = gated_pod(spec)
    chosen = [n for n, labels in NODES.items() if pod_accepts(pod, n, labels)]
    result = narrow(pod, [pin(device_node)], device_node, NODES[device_node])
    if refused is not None:
        assert isinstance(result, CannotNarrow), result
        assert result.reason == refused
        assert "where its devices are" in result.message
        return
    assert isinstance(result, Narrowed), result
    new = result.apply(pod)
    assert validate_pod_update(pod, new) == []
    accepted = [n for n, labels in NODES.items() if pod_accepts(new, n, labels)]
    assert accepted == [device_node], "only the devices' node, which the choice allows"
    assert set(accepted) <= set(chosen), "never a node outside the other controller's choice"
    assert new["spec"].get("nodeSelector") == pod["spec"].get("nodeSelector"), \
        "the nodeSelector the other controller wrote is kept as it was"


def test_the_controller_refuses_to_narrow_against_the_pods_own_node_choice() -> None:
    """Kueue's topology ungater wrote hostname=node-b; the claim (allocated beforehand, by
    whoever) pins node-a: the gate stays and the pod says which choice excludes which node."""
    p = loop_pod("a")
    p["spec"]["nodeSelector"] = {HOST: "node-b"}
    s = Scenario([p, claim("c", node_selector=pin("node-a"), reserved_for="u-a")])
    for name, labels in NODES.items():
        s.controller.on_node("ADDED", {"metadata": {"name": name, "labels": labels}})
    run(s.step())
    assert s.api.puts() == [] and [m for m, path, _ in s.api.calls if m == "PATCH" and
                                   path.endswith("/pods/a")] == [], "nothing narrowed"
    cond = s.condition("a")
    assert cond is not None and (cond["status"], cond["reason"]) == ("False", "PodRejectsChosenNode")
    assert f"nodeSelector {HOST}=node-b excludes node node-a" in cond["message"]
