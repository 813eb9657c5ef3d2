"""One request per narrowed pod when the tracker's copy is current: a merge PATCH with the
copy's resourceVersion and UID as preconditions; a stale copy falls back to the GET+PUT
that recomputes from the fresh pod."""

from __future__ import annotations

import copy

from test_narrowing_loop import NS, PIN_0, Scenario, claim, pod, run
from test_narrowing_nodes_loop import TAINT, node

from operators.narrowing import DRACO_GATE
from tests.fake_api import PODS

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def synced(s: Scenario) -> Scenario:
    """The tracker sees the pods as stored, resourceVersions included (as the watch does)."""
    for stored in s.api.objects.values():
        s.feed(copy.deepcopy(stored))
    return s


def pod_calls(s: Scenario, name: str) -> list[str]:
    path = f"{PODS}{NS}/pods/{name}"
    return [m for m, p, _ in s.api.calls if p == path]


def test_a_current_copy_narrows_and_ungates_in_one_patch() -> None:
    s = synced(Scenario([pod("a", gates=("example.com/quota", DRACO_GATE)),
                         claim("c", node_selector=PIN_0, reserved_for="u-a")],
                        act_beside=frozenset({"example.com/quota"})))
    run(s.step())
    assert pod_calls(s, "a") == ["PATCH"]
    patch = next(b for m, p, b in s.api.calls if m == "PATCH")
    assert patch["metadata"] == {"uid": "u-a", "resourceVersion": "101"}
    final = s.stored("a")
    assert final["spec"]["schedulingGates"] == [{"name": "example.com/quota"}]
    assert final["spec"]["affinity"]["nodeAffinity"][REQUIRED] == PIN_0
    assert [e["reason"] for e in s.api.events] == ["Narrowed"]


def test_the_last_gate_goes_entirely() -> None:
    s = synced(Scenario([pod("a"), claim("c", node_selector=PIN_0, reserved_for="u-a")]))
    run(s.step())
    assert pod_calls(s, "a") == ["PATCH"]
    assert "schedulingGates" not in s.stored("a")["spec"]


def test_a_stale_copy_gets_a_409_and_the_fresh_pod_decides() -> None:
    s = synced(Scenario([pod("a"), claim("c", node_selector=PIN_0, reserved_for="u-a")]))
    s.api.touch(f"{PODS}{NS}/pods/a",
                lambda p: p["spec"]["schedulingGates"].append({"name": "example.com/late"}))
    run(s.step())
    assert pod_calls(s, "a") == ["PATCH", "GET", "PUT"]
    assert s.stored("a")["spec"]["schedulingGates"] == [{"name": "example.com/late"}]
    assert s.controller.narrowed_total == 1


def test_tolerations_against_a_tainted_node_are_read_from_the_fresh_pod() -> None:
    tolerant = pod("a")
    tolerant["spec"]["tolerations"] = [{"key": TAINT["key"], "operator": "Exists"}]
    s = synced(Scenario([tolerant, claim("c", node_selector=PIN_0, reserved_for="u-a")]))
    s.controller.on_node("ADDED", node("node-0", taints=[TAINT]))
    run(s.step())
    assert pod_calls(s, "a") == ["GET", "PUT"]
    assert "schedulingGates" not in s.stored("a")["spec"]


def test_a_false_condition_from_before_a_restart_turns_true() -> None:
    held = pod("a")
    held["status"]["conditions"] = [{"type": "DracoNarrowing", "status": "False",
                                     "reason": "UntoleratedNodeTaint", "message": "m",
                                     "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    s = synced(Scenario([held, claim("c", node_selector=PIN_0, reserved_for="u-a")]))
    run(s.step())
    assert pod_calls(s, "a")[0] == "PATCH"
    cond = s.condition("a")
    assert cond is not None and (cond["status"], cond["reason"]) == ("True", "Narrowed")
