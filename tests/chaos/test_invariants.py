"""The chaos run's invariant checkers on hand-made states: each must catch what it is for
and pass what is legitimate (a gang that started and then lost a member, a device that
moved to another claim after its first claim let it go, a fence of a waiting preemptor)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from tests.chaos import invariants as inv
from tests.chaos.workload import GANG_LABEL, HOSTNAME, World

W = World(ns="ns", driver="gpu.t", nodes=("n0", "n1"), per_node=4)


def claim(name: str, *devices: tuple[str, int], count: int = 1) -> dict[str, Any]:
    c: dict[str, Any] = {"metadata": {"name": name, "namespace": "ns", "resourceVersion": "1"},
                         "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"count": count}}]}}}
    if devices:
        c["status"] = {"allocation": {"devices": {"results": [
            {"driver": "gpu.t", "pool": W.pool(n), "device": W.device(i)} for n, i in devices]}}}
    return c


def pod(name: str, *, gated: bool = True, gang: str | None = None, uid: str = "",
        nominated: bool = False, node: str | None = None, deleting: bool = False) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name, "namespace": "ns", "uid": uid or f"uid-{name}"}
    if gang:
        md["labels"] = {GANG_LABEL: gang}
    if nominated:
        md["annotations"] = {inv.NOMINATION: "{}"}
    if deleting:
        md["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": md, "spec": {"schedulingGates": [{"name": "g"}] if gated else [],
                                     "resourceClaims": [{"name": "gpu", "resourceClaimName": f"{name}-gpu"}]},
            "status": {"nominatedNodeName": node} if node else {}}


def gang(name: str, min_count: int, **topology: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"minCount": min_count}
    if topology:
        spec["topology"] = topology
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": spec}


def claims(*cs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return inv.by_name(cs)


def test_a_device_in_two_claims_is_caught_in_a_listing() -> None:
    assert inv.double_allocations([claim("a", ("n0", 0)), claim("b", ("n0", 1))]) == []
    found = inv.double_allocations([claim("a", ("n0", 0)), claim("b", ("n0", 0), ("n1", 1))])
    assert found == ["device gpu.t/ns-n0/gpu-0 allocated to ns/a and ns/b"]


def test_the_ledger_lets_a_device_move_only_after_its_claim_let_it_go() -> None:
    ledger = inv.ClaimLedger()
    assert ledger.apply("ADDED", claim("a", ("n0", 0))) == []
    # b gets the device while a still holds it: caught at that event
    assert ledger.apply("MODIFIED", claim("b", ("n0", 0))) != []
    ledger = inv.ClaimLedger()
    ledger.apply("ADDED", claim("a", ("n0", 0)))
    assert ledger.apply("MODIFIED", claim("a")) == []  # deallocated
    assert ledger.apply("MODIFIED", claim("b", ("n0", 0))) == []
    assert ledger.apply("DELETED", claim("b", ("n0", 0))) == []
    assert ledger.apply("ADDED", claim("c", ("n0", 0))) == []
    assert ledger.allocations == 3


@pytest.mark.parametrize("state, half", [
    # one of two allocated, both gated: half-written
    ((["a", "b"], {"a"}, set()), True),
    # both allocated: complete (ungating follows)
    ((["a", "b"], {"a", "b"}, set()), False),
    # none allocated: waiting
    ((["a", "b"], set(), set()), False),
    # started (one ungated), then the other lost: a disruption, not a half placement
    ((["a"], {"a"}, {"a"}), False),
])
def test_a_half_written_gang(state: tuple[list[str], set[str], set[str]], half: bool) -> None:
    names, done, ungated = state
    pods = [pod(n, gang="g", gated=n not in ungated) for n in names]
    cs = claims(*[claim(f"{n}-gpu", ("n0", i)) if n in done else claim(f"{n}-gpu") for i, n in enumerate(names)])
    found = inv.incomplete_gangs([gang("g", 2)], pods, cs)
    assert bool(found) == half, found


def test_stale_nominations_and_fences() -> None:
    fence = {"metadata": {"name": "draco-nominated-1", "labels": {inv.FENCE_LABEL: "uid-vip"}}}
    waiting = [pod("vip", nominated=True, node="n0")]
    assert inv.stale_preemption(waiting, claims(claim("vip-gpu")), [fence]) == {}
    placed = [pod("vip", gated=False, nominated=True)]
    found = inv.stale_preemption(placed, claims(claim("vip-gpu", ("n0", 0))), [fence])
    assert set(found) == {"nomination ns/vip", "fence draco-nominated-1"}
    assert inv.stale_preemption([], {}, [fence]) == {"fence draco-nominated-1": "its preemptor (uid uid-vip) is gone"}
    node_left = [pod("vip", gated=False, node="n0")]
    assert "nominatedNodeName n0" in inv.stale_preemption(node_left, claims(claim("vip-gpu", ("n0", 0))), [])[
        "nomination ns/vip"]


def test_persistence_counts_runs_without_the_outages() -> None:
    p = inv.Persistence()
    for t in (0.0, 1.0, 2.0):
        p.observe(t, {"gang ns/g": "half"})
    p.observe(3.0, {})
    p.observe(10.0, {"gang ns/g": "half"})
    p.observe(30.0, {"gang ns/g": "half"})
    assert p.longest() == 20.0
    assert p.exceeded(25) == []
    assert p.exceeded(15) == ["gang ns/g lasted 20.0 s (limit 15 s): half"]
    assert p.exceeded(15, outages=[(12.0, 20.0)]) == []  # 8 s of it the server was down


def test_deletions_by_draco_from_the_audit_log() -> None:
    def event(verb: str, name: str, user: str = "draco", code: int = 200, sub: str | None = None) -> dict[str, Any]:
        ref = {"resource": "pods", "namespace": "ns", "name": name, **({"subresource": sub} if sub else {})}
        return {"verb": verb, "user": {"username": user}, "objectRef": ref, "responseStatus": {"code": code}}

    events = [event("delete", "a"), event("create", "a", sub="eviction"), event("delete", "b"),
              event("delete", "b", code=404), event("delete", "c", user="admin"), event("patch", "d")]
    found = inv.draco_deletions(events, {"draco"}, "ns")
    assert found == Counter({"a": 2, "b": 1})
    assert inv.deleted_twice(found) == ["pod a deleted or evicted 2 times by draco"]


def slices(taints: dict[tuple[str, int], str] | None = None) -> list[dict[str, Any]]:
    out = []
    for node in W.nodes:
        devices = []
        for i in range(W.per_node):
            d: dict[str, Any] = {"name": W.device(i)}
            if taints and (node, i) in taints:
                d["taints"] = [{"key": "k", "effect": taints[(node, i)]}]
            devices.append(d)
        out.append({"spec": {"driver": "gpu.t", "pool": {"name": W.pool(node)}, "devices": devices}})
    return out


def test_a_waiting_pod_that_fits_is_reported_and_one_that_does_not_is_not() -> None:
    # n0 full (4 held), n1 has 3 held and one free
    held = [claim(f"h{i}-gpu", ("n0", i)) for i in range(4)] + [claim(f"k{i}-gpu", ("n1", i)) for i in range(3)]
    one, two = claim("one-gpu"), claim("two-gpu", count=2)
    pods = [pod("one"), pod("two")]
    found = inv.unplaced_that_fit(W, pods, claims(*held, one, two), [], slices(), [])
    assert found == ["pod ns/one: 1 GPU(s) are free on one node and it waits"]
    # the free GPU tainted (by its slice, or by a rule): nothing fits
    assert inv.unplaced_that_fit(W, pods, claims(*held, one, two), [], slices({("n1", 3): "NoSchedule"}), []) == []
    rule = {"spec": {"deviceSelector": {"driver": "gpu.t", "pool": W.pool("n1")},
                     "taint": {"key": "k", "effect": "NoExecute"}}}
    assert inv.unplaced_that_fit(W, pods, claims(*held, one, two), [], slices(), [rule]) == []
    none_effect = {"spec": {"deviceSelector": {"driver": "gpu.t"}, "taint": {"key": "k", "effect": "None"}}}
    assert len(inv.unplaced_that_fit(W, pods, claims(*held, one, two), [], slices(), [none_effect])) == 1


def test_a_waiting_gang_fits_only_in_one_domain() -> None:
    # cliques: gpu-0, gpu-1 are x, gpu-2, gpu-3 are y; two x GPUs free on each node
    held = [claim(f"h{n}-gpu", (n, 2), (n, 3)) for n in W.nodes]
    members = [pod(f"m{i}", gang="g") for i in range(3)]
    cs = claims(*held, *[claim(f"m{i}-gpu") for i in range(3)])
    by_node = gang("g", 3, nodeLabel=HOSTNAME)  # 3 on one node: only 2 free on each
    assert inv.unplaced_that_fit(W, members, cs, [by_node], slices(), []) == []
    by_clique = gang("g", 3, deviceAttribute=W.attribute)  # clique x has 4 free across nodes
    assert inv.unplaced_that_fit(W, members, cs, [by_clique], slices(), []) == [
        "gang ns/g: 3 members of 1 GPU(s) fit in n0+n1/x and wait"]
    # fewer live members than minCount: it waits by design
    assert inv.unplaced_that_fit(W, members[:2], cs, [by_clique], slices(), []) == []


def test_a_placed_gangs_extra_member_waits_only_when_its_domain_is_full() -> None:
    placed = [pod(f"m{i}", gang="g", gated=False) for i in range(2)]
    extra = pod("m2", gang="g")
    g = gang("g", 2, nodeLabel=HOSTNAME)
    full = claims(claim("m0-gpu", ("n0", 0)), claim("m1-gpu", ("n0", 1)), claim("m2-gpu"),
                  claim("x-gpu", ("n0", 2), ("n0", 3)))
    assert inv.unplaced_that_fit(W, [*placed, extra], full, [g], slices(), []) == []  # n1 is not its domain
    room = claims(claim("m0-gpu", ("n0", 0)), claim("m1-gpu", ("n0", 1)), claim("m2-gpu"))
    assert inv.unplaced_that_fit(W, [*placed, extra], room, [g], slices(), []) == [
        "gang ns/g: member m2 waits, and its domain has room"]


def test_leaders_seen_in_the_lease_must_have_said_so() -> None:
    scrapes = [(1.0, "draco-a-1", 1.0), (1.0, "draco-b-1", 0.0), (9.0, "draco-b-1", 1.0)]
    assert inv.unobserved_leaders(["draco-a-1_ab", "draco-a-1_ab", "", "draco-b-1_cd"], scrapes) == []
    assert inv.unobserved_leaders(["draco-a-2_ef"], scrapes) == [
        "draco-a-2_ef held the Lease but its draco_leader was never seen at 1"]
    assert inv.both_leading([(1.0, {"a": 1.0, "b": 0.0}), (2.0, {"a": 1.0, "b": 1.0})]) == [
        "at 2.0 s a, b all said draco_leader 1"]


def test_percentiles_by_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert (inv.percentile(values, 50), inv.percentile(values, 99)) == (50.0, 99.0)
    assert inv.percentile([4.0, 1.0], 99) == 4.0


def test_a_gang_at_min_count_left_gated_is_reported() -> None:
    members = [pod(f"m{i}", gang="g") for i in range(2)]
    cs = claims(claim("m0-gpu", ("n0", 0)), claim("m1-gpu", ("n0", 1)))
    assert inv.unplaced_that_fit(W, members, cs, [gang("g", 2)], slices(), []) == [
        "gang ns/g: m0, m1 allocated, minCount reached, still gated"]


def test_a_gang_started_before_min_count_had_devices() -> None:
    ok = [pod("m0", gang="g", gated=False), pod("m1", gang="g", gated=False)]
    cs = claims(claim("m0-gpu", ("n0", 0)), claim("m1-gpu", ("n0", 1)))
    assert inv.started_gangs([gang("g", 2)], ok, cs) == {"gang ns/g": ""}
    early = [pod("m0", gang="g", gated=False), pod("m1", gang="g")]
    half = claims(claim("m0-gpu", ("n0", 0)), claim("m1-gpu"))
    assert inv.started_gangs([gang("g", 2)], early, half) == {
        "gang ns/g": "members ungated while 1 of minCount 2 had their devices"}
    assert inv.started_gangs([gang("g", 2)], [pod("m0", gang="g")], half) == {}
