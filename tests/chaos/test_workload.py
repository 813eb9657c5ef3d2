"""The chaos stream as data: a seed gives one plan; what it asks for fits the world it is
made for (a gang never larger than its largest domain), every undo follows its action,
and the objects carry what draco acts on (its gate, the gang label, a priority)."""

from __future__ import annotations

from collections import Counter

from tests.chaos import workload as wl

W = wl.World(ns="ns", driver="gpu.t", nodes=("node-0", "node-1"), per_node=8)
SIZE = wl.Size(duration=60, gangs=20, singles=10, preemptors=6, rules=2, signals=2, kills=5)


def test_one_seed_one_plan() -> None:
    assert wl.plan(7, SIZE, W) == wl.plan(7, SIZE, W)
    assert wl.plan(7, SIZE, W) != wl.plan(8, SIZE, W)


def test_the_plan_holds_what_was_asked_in_time_order() -> None:
    actions = wl.plan(3, SIZE, W)
    assert [a.at for a in actions] == sorted(a.at for a in actions)
    kinds = Counter(a.kind for a in actions)
    assert kinds["kill"] == 5 and kinds["apiserver"] == 1
    assert kinds["gang"] >= 20 and kinds["gang"] + kinds["single"] == 20 + 10 + 6
    assert kinds["rule"] == kinds["unrule"] == 2 and kinds["signal"] == kinds["recover"] == 2
    for undo, do in (("unrule", "rule"), ("recover", "signal")):
        for a in actions:
            if a.kind == undo:
                assert any(b.kind == do and b.name == a.name and b.at < a.at for b in actions)
    kills = [a.at for a in actions if a.kind == "kill"]
    assert all(b - a > 1 for a, b in zip(kills, kills[1:], strict=False))  # room for a failover


def test_every_gang_fits_its_largest_domain() -> None:
    for seed in range(30):
        for a in wl.plan(seed, SIZE, W):
            if a.kind != "gang":
                continue
            p = a.params
            assert 2 <= p["members"] <= 8 and 2 <= p["min_count"] <= p["members"]
            largest = {"node": 8, "clique": 8, "both": 4, "none": 16}[p["topology"]]
            assert p["members"] * p["count"] <= largest, a


def test_gang_objects_carry_the_gate_label_priority_and_topology() -> None:
    action = wl.Action(0, "gang", "g01", {"members": 3, "min_count": 2, "count": 2, "topology": "both",
                                          "priority": 100})
    objects = wl.gang_objects(W, action)
    kinds = [o["kind"] for _, o in objects]
    assert kinds == ["Gang"] + ["ResourceClaim", "Pod"] * 3
    gang = objects[0][1]
    assert gang["spec"] == {"minCount": 2, "waitSeconds": wl.GANG_WAIT_S, "topology": {
        "nodeLabel": "kubernetes.io/hostname", "deviceAttribute": "gpu.t/clique"}}
    pod = objects[2][1]
    assert pod["metadata"] == {"name": "g01-0", "labels": {wl.GANG_LABEL: "g01"}}
    assert pod["spec"]["schedulingGates"] == [{"name": wl.GATE}]
    assert pod["spec"]["priorityClassName"] == "ns-p100"
    assert objects[1][1]["spec"]["devices"]["requests"][0]["exactly"] == {
        "deviceClassName": "chaos-ns", "count": 2}


def test_a_health_signal_is_a_noschedule_slice_taint_on_one_device() -> None:
    slice_ = wl.slice_object(W, "node-1", {"gpu-5": "79"})
    devices = {d["name"]: d for d in slice_["spec"]["devices"]}
    assert devices["gpu-5"]["taints"] == [{"key": wl.SIGNAL_KEY, "value": "79", "effect": "NoSchedule"}]
    assert all("taints" not in d for n, d in devices.items() if n != "gpu-5")
    assert [devices[f"gpu-{i}"]["attributes"]["clique"]["string"] for i in range(8)] == ["x"] * 4 + ["y"] * 4
    policy = next(o for p, o in wl.setup_objects(W) if o["kind"] == "DeviceHealthPolicy")
    assert policy["spec"]["signals"] == [{"sliceTaint": {"key": wl.SIGNAL_KEY}}]
    assert policy["spec"]["taint"]["effect"] == "NoExecute"
