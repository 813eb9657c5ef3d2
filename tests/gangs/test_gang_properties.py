"""Generated small worlds: the gang search places a gang exactly when a brute force can,
and what it places keeps every rule (devices free and distinct, on the member's node,
matching its selectors, its claim's constraint, one topology domain, and each node's
shared counter: every device is a partition consuming 1 or 2 of its node's memory).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.gangs.world import allocated_on, classes, gang, member, node, node_slice, place


@dataclass(frozen=True)
class Dev:
    name: str
    model: str
    clique: int
    held: bool  # allocated to a claim outside the gang
    mem: int  # what it consumes of its node's counter


@dataclass(frozen=True)
class Pod:
    count: int
    model: str | None  # a selector on the model, or none
    same_model: bool  # a matchAttribute constraint on the model


@dataclass(frozen=True)
class World:
    nodes: tuple[tuple[str, str, tuple[Dev, ...]], ...]  # (name, rack, devices)
    memory: tuple[int, ...]  # each node's counter
    pods: tuple[Pod, ...]
    topology: str  # "", "rack", "clique"


@st.composite
def worlds(draw: st.DrawFn) -> World:
    nodes = []
    memory = []
    for n in range(draw(st.integers(1, 3))):
        devs = tuple(Dev(f"d{i}", draw(st.sampled_from("xy")), draw(st.integers(1, 2)),
                         draw(st.booleans()) and draw(st.booleans()), draw(st.integers(1, 2)))
                     for i in range(draw(st.integers(0, 3))))
        nodes.append((f"n{n}", draw(st.sampled_from("ab")), devs))
        memory.append(draw(st.integers(1, 5)))
    pods = tuple(Pod(draw(st.integers(1, 2)), draw(st.sampled_from([None, "x", "y"])),
                     draw(st.booleans())) for _ in range(draw(st.integers(1, 3))))
    return World(tuple(nodes), tuple(memory), pods, draw(st.sampled_from(["", "rack", "clique"])))


def objects(w: World) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [*classes()]
    label = "rack" if w.topology == "rack" else None
    attr = "driver-a/clique" if w.topology == "clique" else None
    objs.append(gang("g", len(w.pods), node_label=label, device_attribute=attr))
    for (name, rack, devs), memory in zip(w.nodes, w.memory, strict=True):
        objs.append(node(name, rack=rack))
        objs += node_slice(name, [{"name": d.name, "attributes": {
            "model": {"string": d.model}, "clique": {"int": d.clique}},
            "consumesCounters": [{"counterSet": "mem", "counters": {"mem": {"value": str(d.mem)}}}]}
            for d in devs], counters=[{"name": "mem", "counters": {"mem": {"value": str(memory)}}}])
        for d in devs:
            if d.held:
                objs += member(f"held-{name}-{d.name}", "other", [{"name": "gpu", "class": "class-a"}],
                               allocation=allocated_on(name, d.name), node_name=name)
    for i, p in enumerate(w.pods):
        request: dict[str, Any] = {"name": "gpu", "class": "class-a", "count": p.count}
        if p.model:
            request["selectors"] = [f'device.attributes["driver-a"].model == "{p.model}"']
        objs += member(f"p-{i}", "g", [request],
                       constraints=[{"matchAttribute": "driver-a/model"}] if p.same_model else ())
    return objs


def _fits(p: Pod, devs: Sequence[Dev]) -> bool:
    return (len(devs) == p.count and all(not d.held for d in devs)
            and all(p.model is None or d.model == p.model for d in devs)
            and (not p.same_model or len({d.model for d in devs}) == 1))


def brute_force(w: World) -> bool:
    domains: list[tuple[set[str] | None, int | None]]
    if w.topology == "rack":
        domains = [({n for n, r, _ in w.nodes if r == rack}, None) for rack in "ab"]
    elif w.topology == "clique":
        domains = [(None, c) for c in (1, 2)]
    else:
        domains = [(None, None)]
    left = {n: memory - sum(d.mem for d in devs if d.held)
            for (n, _, devs), memory in zip(w.nodes, w.memory, strict=True)}
    for names, clique in domains:
        nodes = [(n, [d for d in devs if clique is None or d.clique == clique])
                 for n, _, devs in w.nodes if names is None or n in names]
        if _assign(w.pods, nodes, set(), dict(left)):
            return True
    return False


def _assign(pods: Sequence[Pod], nodes: Sequence[tuple[str, Sequence[Dev]]],
            taken: set[tuple[str, str]], left: dict[str, int]) -> bool:
    if not pods:
        return True
    p = pods[0]
    for name, devs in nodes:
        free = [d for d in devs if (name, d.name) not in taken]
        for combo in itertools.combinations(free, p.count):
            use = sum(d.mem for d in combo)
            if _fits(p, combo) and left[name] >= use:
                more = {(name, d.name) for d in combo}
                if _assign(pods[1:], nodes, taken | more, {**left, name: left[name] - use}):
                    return True
    return False


def check_rules(w: World, doc: dict[str, Any]) -> None:
    by_node = {n: (rack, {d.name: d for d in devs}) for n, rack, devs in w.nodes}
    used = {n: memory - sum(d.mem for d in devs if d.held)
            for (n, _, devs), memory in zip(w.nodes, w.memory, strict=True)}
    seen: set[tuple[str, str]] = set()
    racks, cliques = set(), set()
    for i, p in enumerate(w.pods):
        label = f"default/p-{i}"
        node_name = doc["nodes"][label]
        results = doc["members"][label][f"p-{i}-claim"]
        devs = []
        for r in results:
            assert r["pool"] == node_name, "a device off the member's node"
            key = (r["pool"], r["device"])
            assert key not in seen, "one device in two claims"
            seen.add(key)
            devs.append(by_node[node_name][1][r["device"]])
            used[node_name] -= devs[-1].mem
            assert used[node_name] >= 0, "a node's counter exceeded"
        assert _fits(p, devs), (p, devs)
        racks.add(by_node[node_name][0])
        cliques.update(d.clique for d in devs)
    if w.topology == "rack":
        assert len(racks) == 1
    if w.topology == "clique":
        assert len(cliques) == 1


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds())
def test_the_search_places_exactly_when_a_brute_force_can(w: World) -> None:
    doc = place(objects(w))
    assert (doc["status"] == "allocated") == brute_force(w), (doc["reason"], w)
    if doc["status"] == "allocated":
        check_rules(w, doc)
    else:
        assert doc["members"] == {} and doc["reason"]
