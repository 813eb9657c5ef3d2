"""A claim several members of a gang name is one claim: counted once, allocated once,
reserved once (issue 48, item 1).

The realistic shapes: the members share one network-attached NIC (a pool of the
fabric driver reachable from every node), or one accelerator claim (node-local: the
members that share it land on its node). Each row is a small cluster read through
`draco allocate --gang`'s document, as an admin would read it.
"""

from __future__ import annotations

from typing import Any

import pytest

from operators.allocator import in_use_from_tracker, inventory_from_tracker
from operators.allocator.nodes import NodeIndex
from operators.cli.allocate_gang import find_gang, member_of, member_pods
from operators.cli.allocation_records import nodes_from
from operators.cli.state import build_tracker
from operators.gangs.gang import Demand, gang_requests
from operators.model import NamespacedName
from tests.allocator.build import resource_slice_api
from tests.gangs.world import NS, classes, gang, gpus, member, node, node_slice, place, shared_claim

NIC = [{"name": "nic", "class": "class-b"}]


def gpu(count: int) -> list[dict[str, Any]]:
    return [{"name": "gpu", "class": "class-a", "count": count}]


def fabric(nics: int) -> dict[str, Any]:
    """A network-attached pool: its NICs are reachable from every node."""
    return resource_slice_api({"driver": "driver-b", "pool": "fabric", "allNodes": True,
                               "devices": [f"nic-{i}" for i in range(nics)],
                               "name": "fabric"}, 0)


def gpu_nodes(*sizes: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, n in enumerate(sizes):
        out += [node(f"n-{i}"), *node_slice(f"n-{i}", gpus(n))]
    return out


def shared_results(doc: dict[str, Any], claim: str) -> dict[str, list[tuple[str, str]]]:
    """Per member, the devices the shared CLAIM holds as its record shows them."""
    return {m: [(r["pool"], r["device"]) for r in claims[claim]]
            for m, claims in doc["members"].items() if claim in claims}


# (name, objects, members, status, nodes (member -> node) or None, reason fragment)
CASES: list[tuple[str, list[dict[str, Any]], int, str, dict[str, str] | None, str | None]] = [
    ("four members on four nodes share the one NIC of the fabric",
     [*gpu_nodes(1, 1, 1, 1), fabric(1), shared_claim("nic", NIC)], 4, "allocated", None, None),
    ("the NIC is counted once: a fabric of one NIC is enough for eight members",
     [*gpu_nodes(2, 2, 2, 2), fabric(1), shared_claim("nic", NIC)], 8, "allocated", None, None),
    ("no NIC at all: short by count, one NIC asked (not one per member)",
     [*gpu_nodes(1, 1), fabric(0), shared_claim("nic", NIC)], 2, "unsatisfiable", None,
     "request nic (class class-b) needs 1 free devices across the gang, the domain has 0"),
    ("GPUs short by count while the NIC fits: the GPU is named",
     [*gpu_nodes(1, 1), fabric(1), shared_claim("nic", NIC)], 3, "unsatisfiable", None,
     "request gpu (class class-a) needs 3 free devices across the gang, the domain has 2"),
]


@pytest.mark.parametrize(("name", "world", "n", "status", "nodes", "reason"), CASES,
                         ids=[c[0] for c in CASES])
def test_members_sharing_a_nic_claim(name: str, world: list[dict[str, Any]], n: int, status: str,
                                     nodes: dict[str, str] | None, reason: str | None) -> None:
    objs = [*classes(), gang("g", n), *world]
    for i in range(n):
        objs += member(f"p-{i}", "g", gpu(1), shared=["nic"])
    doc = place(objs)
    assert doc["status"] == status, doc["reason"]
    if status != "allocated":
        assert doc["members"] == {}
        assert reason is not None and reason in doc["reason"], doc["reason"]
        return
    nics = shared_results(doc, "nic")
    assert sorted(nics) == [f"{NS}/p-{i}" for i in range(n)]
    assert {tuple(v) for v in nics.values()} == {(("fabric", "nic-0"),)}, nics
    gpus_taken = [(r["pool"], r["device"]) for m in doc["members"].values()
                  for c, rs in m.items() if c != "nic" for r in rs]
    assert len(gpus_taken) == len(set(gpus_taken)) == n


# Accelerator claims: node-local devices, so every member naming the claim is on its node.
ACCEL = [
    # (name, node sizes, members: (own GPUs, shares the accelerator), status, nodes)
    ("two members share one accelerator: one GPU, both on its node",
     (1,), ((0, True), (0, True)), "allocated", {"p-0": "n-0", "p-1": "n-0"}),
    ("each has its own GPU besides the shared one: all three on one node",
     (2, 3), ((1, True), (1, True)), "allocated", {"p-0": "n-1", "p-1": "n-1"}),
    ("enough GPUs by count (4 for 3) but no node holds the three together",
     (2, 2), ((1, True), (1, True)), "unsatisfiable", None),
    ("a member without the shared claim may go elsewhere",
     (2, 1), ((1, True), (0, True), (1, False)), "allocated",
     {"p-0": "n-0", "p-1": "n-0", "p-2": "n-1"}),
]


@pytest.mark.parametrize(("name", "sizes", "members", "status", "nodes"), ACCEL,
                         ids=[c[0] for c in ACCEL])
def test_members_sharing_an_accelerator_claim(
        name: str, sizes: tuple[int, ...], members: tuple[tuple[int, bool], ...], status: str,
        nodes: dict[str, str] | None) -> None:
    objs = [*classes(), gang("g", len(members)), *gpu_nodes(*sizes),
            shared_claim("accel", gpu(1))]
    for i, (own, shares) in enumerate(members):
        objs += member(f"p-{i}", "g", gpu(own) if own else [], shared=["accel"] if shares else [])
    doc = place(objs)
    assert doc["status"] == status, doc["reason"]
    if nodes is None:
        assert doc["members"] == {} and "at best" in doc["reason"], doc["reason"]
        return
    assert doc["nodes"] == {f"{NS}/{k}": v for k, v in nodes.items()}
    accel = shared_results(doc, "accel")
    assert len({tuple(v) for v in accel.values()}) == 1, accel
    assert len(accel) == sum(1 for _, s in members if s)
    taken = [(r["pool"], r["device"]) for m in doc["members"].values()
             for c, rs in m.items() if c != "accel" for r in rs]
    (shared_device,) = next(iter(accel.values()))
    assert shared_device not in taken and len(taken) == len(set(taken))


def test_the_shared_claim_is_allocated_by_one_member_only() -> None:
    """What the controller holds and writes: the claim's allocation once, with the
    first member that names it; the others only reach it from their node."""
    from operators.gangs.gang import place_gang
    objs = [*classes(), gang("g", 3), *gpu_nodes(1, 1, 1), fabric(1), shared_claim("nic", NIC)]
    for i in range(3):
        objs += member(f"p-{i}", "g", gpu(1), shared=["nic"])
    tracker = build_tracker(objs)
    g = find_gang(objs, NamespacedName(NS, "g"))
    members = [m for p in member_pods(objs, tracker, g) if not isinstance(m := member_of(tracker, p), str)]
    index = NodeIndex(inventory_from_tracker(tracker), nodes_from(objs, tracker))
    klasses = {c.name: c for c in tracker.device_classes()}
    outcome = place_gang(g, members, index, klasses, in_use_from_tracker(tracker), 10.0)
    assert outcome.allocated
    written = [c.name for p in outcome.placed for c, _ in p.allocations]
    assert sorted(written) == ["nic", "p-0-claim", "p-1-claim", "p-2-claim"]
    # the count check asks one NIC and three GPUs
    demand = Demand(gang_requests(members, klasses))
    assert sorted(demand.need.values()) == [1, 3]
