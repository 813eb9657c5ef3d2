"""The narrowing controller and nodes: a pod whose allocated node refuses it (untolerated
NoSchedule/NoExecute taint, or a cordon) keeps draco's gate with a Warning Event and the
DracoNarrowing condition, and is looked at again when the node changes."""

from __future__ import annotations

from typing import Any

from test_narrowing_loop import PIN_0, ZONE_A, Scenario, claim, pod, run

TAINT = {"key": "example.com/maintenance", "value": "true", "effect": "NoSchedule"}


def node(name: str, *, taints: list[dict[str, Any]] | None = None, cordoned: bool = False,
         labels: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if cordoned:
        spec["unschedulable"] = True
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels or {}},
            "spec": spec}


def warnings(s: Scenario) -> list[str]:
    return [e["reason"] for e in s.api.events if e.get("type") == "Warning"]


def test_an_untolerated_taint_holds_the_pod_until_the_node_update_removes_it() -> None:
    s = Scenario([pod("a"), claim("c", node_selector=PIN_0, reserved_for="u-a")])
    s.controller.on_node("ADDED", node("node-0", taints=[TAINT]))

    async def go() -> None:
        await s.step()
        assert s.api.puts() == []
        assert warnings(s) == ["UntoleratedNodeTaint"]
        cond = s.condition("a")
        assert cond is not None and (cond["status"], cond["reason"]) == ("False", "UntoleratedNodeTaint")
        assert "example.com/maintenance=true:NoSchedule" in cond["message"]
        await s.step()  # nothing changed: no second report, no write
        assert s.api.puts() == [] and warnings(s) == ["UntoleratedNodeTaint"]
        s.controller.on_node("MODIFIED", node("node-0"))
        await s.step()

    run(go())
    (_, body), = s.api.puts()
    assert "schedulingGates" not in body["spec"]
    cond = s.condition("a")
    assert cond is not None and (cond["status"], cond["reason"]) == ("True", "Narrowed")


def test_a_cordoned_node_holds_the_pod_unless_it_tolerates_the_cordon() -> None:
    tolerant = pod("b", claims=("d",))
    tolerant["spec"]["tolerations"] = [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
                                        "effect": "NoSchedule"}]
    s = Scenario([pod("a"), claim("c", node_selector=PIN_0, reserved_for="u-a"),
                  tolerant, claim("d", node_selector=PIN_0, reserved_for="u-b")])
    s.controller.on_node("ADDED", node("node-0", cordoned=True))
    run(s.step())
    assert [p.rsplit("/", 1)[1] for p, _ in s.api.puts()] == ["b"]
    cond = s.condition("a")
    assert cond is not None and cond["reason"] == "NodeUnschedulable"
    assert "cordoned" in cond["message"]


def test_one_node_of_several_that_takes_the_pod_is_enough() -> None:
    s = Scenario([pod("a"), claim("c", node_selector=ZONE_A, reserved_for="u-a")])
    s.controller.on_node("ADDED", node("n1", labels={"zone": "a"}, taints=[TAINT]))
    s.controller.on_node("ADDED", node("n2", labels={"zone": "a"}))
    s.controller.on_node("ADDED", node("n3", labels={"zone": "b"}))
    run(s.step())
    assert len(s.api.puts()) == 1 and warnings(s) == []


def test_a_new_node_that_takes_the_pod_releases_it() -> None:
    s = Scenario([pod("a"), claim("c", node_selector=ZONE_A, reserved_for="u-a")])
    s.controller.on_node("ADDED", node("n1", labels={"zone": "a"},
                                       taints=[{"key": "x", "effect": "NoExecute"}]))

    async def go() -> None:
        await s.step()
        assert s.api.puts() == [] and warnings(s) == ["UntoleratedNodeTaint"]
        s.controller.on_node("ADDED", node("n2", labels={"zone": "a"}))
        await s.step()

    run(go())
    assert len(s.api.puts()) == 1


def test_node_events_that_change_nothing_cost_no_work() -> None:
    s = Scenario([pod("a"), claim("c", node_selector=PIN_0, reserved_for="u-a")])
    s.controller.on_node("ADDED", node("node-0", taints=[TAINT]))

    async def go() -> int:
        await s.step()
        before = s.controller.considered
        s.controller.on_node("MODIFIED", node("node-0", taints=[TAINT]))  # a heartbeat
        s.controller.on_node("ADDED", node("node-7", labels={"zone": "z"}))
        await s.step()
        after_unrelated = s.controller.considered - before
        return after_unrelated

    # a new node may take a held pod: held pods (only) are looked at again
    assert run(go()) == 1
    assert s.api.puts() == []


def test_the_first_listing_fills_the_cache_and_watch_events_win() -> None:
    s = Scenario([pod("a"), claim("c", node_selector=PIN_0, reserved_for="u-a")])
    s.api.nodes = {"node-0": node("node-0", taints=[TAINT]), "node-1": node("node-1", taints=[TAINT])}
    s.controller.on_node("ADDED", node("node-1"))  # arrived before the listing answered: newer

    async def go() -> None:
        await s.controller.load_nodes()
        await s.step()

    run(go())
    assert s.controller.nodes["node-1"].taints == ()
    assert s.api.puts() == [] and warnings(s) == ["UntoleratedNodeTaint"]
