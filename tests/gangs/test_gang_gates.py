"""A gang waits whole while any member still carries another controller's gate (Kueue's
admission or topology gate): nothing is allocated, reserved or narrowed for any member,
each gated member says which member waits for which gate, and once the last such gate
goes the gang is placed and ungated together. The narrowing controller, on its own,
never narrows or ungates a pod that carries another controller's gate."""

from __future__ import annotations

from typing import Any

from operators.allocator_controller.controller import AllocatorSettings
from operators.model.gates import DRACO_GATE
from tests.fake_api import run
from tests.gangs.test_gang_controller import Cluster, halves_world
from tests.gangs.world import NS, allocated_on

ADMISSION = "kueue.x-k8s.io/admission"
TOPOLOGY = "kueue.x-k8s.io/topology"


def _with_gates(objs: list[dict[str, Any]], pod: str, *gates: str) -> list[dict[str, Any]]:
    for obj in objs:
        if obj["kind"] == "Pod" and obj["metadata"]["name"] == pod:
            obj["spec"]["schedulingGates"] = [{"name": g} for g in (*gates, DRACO_GATE)]
    return objs


def _remove_gate(c: Cluster, pod: str, gate: str) -> None:
    """Kueue's ungater: the gate goes, the others stay."""
    c.api.touch(f"/api/v1/namespaces/{NS}/pods/{pod}", lambda p: p["spec"].update(
        schedulingGates=[g for g in p["spec"]["schedulingGates"] if g["name"] != gate]))
    c.echo()


def _condition(c: Cluster, pod: str) -> dict[str, Any] | None:
    conds = c.api.pod(NS, pod).get("status", {}).get("conditions", [])
    return next((x for x in conds if x["type"] == "DracoAllocation"), None)


def test_a_gang_waits_while_one_member_carries_kueues_gate() -> None:
    c = Cluster(_with_gates(halves_world(), "p-1", ADMISSION, TOPOLOGY))
    run(c.settle())
    assert c.allocated("p-0-claim", "p-1-claim") == [False, False], "no member holds a device"
    assert c.gated("p-0") and c.gated("p-1")
    for pod in ("p-0", "p-1"):
        cond = _condition(c, pod)
        assert cond is not None and (cond["status"], cond["reason"]) == ("False", "WaitingForGate")
        assert f"member {NS}/p-1 is waiting for gates {ADMISSION}, {TOPOLOGY}" in cond["message"]
    status = c.gang_status()["conditions"][0]
    assert (status["status"], status["reason"]) == ("False", "WaitingForGate")
    assert not [e for e in c.api.events if e["type"] == "Warning"], "waiting is no warning"
    _remove_gate(c, "p-1", ADMISSION)
    run(c.settle())
    assert c.allocated("p-0-claim", "p-1-claim") == [False, False], "the topology gate is still on"
    _remove_gate(c, "p-1", TOPOLOGY)
    run(c.settle())
    assert c.allocated("p-0-claim", "p-1-claim") == [True, True]
    assert not c.gated("p-0") and not c.gated("p-1"), "placed and ungated together"
    assert c.gang_status()["conditions"][0]["status"] == "True"


def test_a_gang_allowed_beside_the_gate_is_placed_at_once() -> None:
    class Beside(Cluster):
        settings = AllocatorSettings(act_beside=frozenset({ADMISSION}))

    c = Beside(_with_gates(halves_world(), "p-1", ADMISSION))
    run(c.settle())
    assert c.allocated("p-0-claim", "p-1-claim") == [True, True]
    assert not c.gated("p-0"), "p-0 carries draco's gate alone: ungated"


def test_narrowing_leaves_a_pod_with_another_controllers_gate_alone() -> None:
    """Claims allocated and reserved beforehand (whoever did it): while Kueue's topology
    gate is on, the pod is neither narrowed nor ungated, and its narrowing timeout counts
    from when that gate goes, not from the pod's creation."""
    objs = [o for o in halves_world(1) if o["kind"] != "Gang"]
    for obj in objs:
        if obj["kind"] == "Pod":
            obj["metadata"]["labels"] = {}
            obj["metadata"]["creationTimestamp"] = "2020-01-01T00:00:00Z"  # queued for years
            obj["spec"]["schedulingGates"] = [{"name": TOPOLOGY}, {"name": DRACO_GATE}]
        if obj["kind"] == "ResourceClaim":
            obj["status"] = {"allocation": allocated_on("node-1", "whole"),
                             "reservedFor": [{"resource": "pods", "name": "p-0", "uid": "uid-p-0"}]}
    c = Cluster(objs)
    run(c.settle())
    stored = c.api.pod(NS, "p-0")
    assert [g["name"] for g in stored["spec"]["schedulingGates"]] == [TOPOLOGY, DRACO_GATE]
    assert "affinity" not in stored["spec"]
    _remove_gate(c, "p-0", TOPOLOGY)
    run(c.settle())
    stored = c.api.pod(NS, "p-0")
    assert not stored["spec"].get("schedulingGates"), "narrowed and ungated once the gate went"
    assert stored["spec"]["affinity"]["nodeAffinity"]
    assert not [e for e in c.api.events if e["reason"] == "ClaimsNotAllocated"]


def test_a_member_whose_chosen_nodes_have_no_device_names_its_choice() -> None:
    """Kueue's topology ungater (or a user) put member p-1 on node-9, which has no devices:
    the gang is not placed anywhere else, and p-1's condition and Event name the selector."""
    objs = halves_world()
    for obj in objs:
        if obj["kind"] == "Pod" and obj["metadata"]["name"] == "p-1":
            obj["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "node-9"}
    c = Cluster(objs)
    run(c.settle())
    assert c.allocated("p-0-claim", "p-1-claim") == [False, False]
    cond = _condition(c, "p-1")
    assert cond is not None and cond["reason"] == "GangUnschedulable"
    assert "excluded by the pod's node selector or affinity" in cond["message"]
    assert "this member's node choice: nodeSelector kubernetes.io/hostname=node-9" in cond["message"]
    events = [e["message"] for e in c.api.events
              if e["involvedObject"]["name"] == "p-1" and e["reason"] == "GangUnschedulable"]
    assert events and "kubernetes.io/hostname=node-9" in events[0]
    other = _condition(c, "p-0")
    assert other is not None and "this member's node choice" not in other["message"]
