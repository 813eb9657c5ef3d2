"""The devices check against a brute force on small worlds (as tests/gangs/oracle.py
does for gangs): nodes in racks with a few GPUs of two models, some held by others; a
Workload of one or two PodSets whose pods each ask for GPUs of a model; maybe a Gang
label with the rack as topology, maybe a TAS assignment pinning the first PodSet's pods
to nodes. The brute force enumerates every node and device set per pod, sharing no code
with draco's search; the verdict must be:
- ready when the pods fit now (and the placement keeps every rule),
- retry when they do not, but fit elsewhere than TAS's nodes now, or an empty cluster,
- rejected when not even an empty cluster (nothing held) can host them.
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.admission.kueue import claim_template, decide_doc, pod_set, workload
from tests.gangs.world import allocated_on, classes, gang, member, node, node_slice

RACK = "example.com/rack"


@dataclass(frozen=True)
class Gpu:
    name: str
    model: str
    held: bool


@dataclass(frozen=True)
class Node:
    name: str
    rack: str
    gpus: tuple[Gpu, ...]


@dataclass(frozen=True)
class Ask:
    count: int
    model: str | None


@dataclass(frozen=True)
class World:
    nodes: tuple[Node, ...]
    sets: tuple[tuple[int, Ask], ...]  # (count, what each pod asks), per PodSet
    rack: bool
    tas: tuple[str, ...] | None  # the first PodSet's pods' nodes, by index


@st.composite
def worlds(draw: Any) -> World:
    nodes = []
    for i in range(draw(st.integers(1, 3))):
        gpus = tuple(Gpu(f"gpu-{j}", draw(st.sampled_from("ab")), draw(st.booleans()) and draw(st.booleans()))
                     for j in range(draw(st.integers(0, 4))))
        nodes.append(Node(f"n-{i}", draw(st.sampled_from(("r0", "r1"))), gpus))
    sets = tuple((draw(st.integers(1, 2)), Ask(draw(st.integers(1, 2)), draw(st.sampled_from((None, "a", "b")))))
                 for _ in range(draw(st.integers(1, 2))))
    tas = None
    if draw(st.booleans()):
        tas = tuple(draw(st.sampled_from([n.name for n in nodes])) for _ in range(sets[0][0]))
    return World(tuple(nodes), sets, draw(st.booleans()) and tas is None, tas)


def objects(w: World) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [*classes()]
    if w.rack:
        objs.append(gang("g", 1, node_label=RACK))
    for n in w.nodes:
        objs += [node(n.name, **{RACK: n.rack}),
                 *node_slice(n.name, [{"name": g.name, "attributes": {"model": {"string": g.model}}}
                                      for g in n.gpus])]
        for g in n.gpus:
            if g.held:
                objs += member(f"held-{n.name}-{g.name}", "other", [{"name": "gpu", "class": "class-a"}],
                               allocation=allocated_on(n.name, g.name), node_name=n.name)
    sets = []
    for i, (count, ask) in enumerate(w.sets):
        req: dict[str, Any] = {"name": "gpu", "class": "class-a", "count": ask.count}
        if ask.model:
            req["selectors"] = [f'device.attributes["driver-a"].model == "{ask.model}"']
        objs.append(claim_template(f"t-{i}", [req]))
        sets.append(pod_set(f"s{i}", count, templates={"gpu": f"t-{i}"},
                            labels={"resource.draco.dev/gang": "g"} if w.rack else None))
    assignments = {}
    if w.tas is not None:
        per = Counter(w.tas)
        names = sorted(per)
        assignments["s0"] = {"topologyAssignment": {"levels": ["kubernetes.io/hostname"], "slices": [
            {"domainCount": len(names), "valuesPerLevel": [{"individual": {"roots": names}}],
             "podCounts": {"individual": [per[n] for n in names]}}]}}
    objs.append(workload("w", sets, assignments=assignments))
    return objs


def _pods(w: World, tas: bool) -> list[tuple[Ask, frozenset[str] | None]]:
    out: list[tuple[Ask, frozenset[str] | None]] = []
    for si, (count, ask) in enumerate(w.sets):
        for i in range(count):
            pin = None
            if tas and si == 0 and w.tas is not None:
                pin = frozenset({sorted(w.tas)[i]})  # pods of a PodSet are alike: any order
            out.append((ask, pin))
    return out


def feasible(w: World, *, held: bool = True, tas: bool = True) -> bool:
    pods = _pods(w, tas)
    domains = [frozenset(n.name for n in w.nodes if n.rack == r) for r in ("r0", "r1")] if w.rack \
        else [frozenset(n.name for n in w.nodes)]
    taken: set[tuple[str, str]] = set()

    def place(k: int, domain: frozenset[str]) -> bool:
        if k == len(pods):
            return True
        ask, pin = pods[k]
        for n in w.nodes:
            if n.name not in domain or (pin is not None and n.name not in pin):
                continue
            free = [g for g in n.gpus if not (held and g.held) and (n.name, g.name) not in taken
                    and (ask.model is None or g.model == ask.model)]
            for combo in itertools.combinations(free, ask.count):
                for g in combo:
                    taken.add((n.name, g.name))
                ok = place(k + 1, domain)
                for g in combo:
                    taken.discard((n.name, g.name))
                if ok:
                    return True
        return False

    return any(place(0, d) for d in domains)


def expected(w: World) -> str:
    if feasible(w):
        return "ready"
    if w.tas is not None and feasible(w, tas=False):
        return "retry"
    if feasible(w, held=False, tas=False):
        return "retry"
    return "rejected"


def check(w: World, doc: dict[str, Any]) -> None:
    nodes = {n.name: n for n in w.nodes}
    used: set[tuple[str, str]] = set()
    racks = set()
    for si, (count, ask) in enumerate(w.sets):
        pods = doc["members"][f"s{si}"]
        assert sorted(pods, key=int) == [str(i) for i in range(count)]
        where = []
        for claims in pods.values():
            results = claims["gpu"]
            assert len(results) == ask.count
            (pool,) = {r["pool"] for r in results}
            where.append(pool)
            racks.add(nodes[pool].rack)
            for r in results:
                g = next(x for x in nodes[pool].gpus if x.name == r["device"])
                assert not g.held and (ask.model is None or g.model == ask.model), (pool, g)
                assert (pool, g.name) not in used, "a device for two pods"
                used.add((pool, g.name))
        if si == 0 and w.tas is not None:
            assert Counter(where) == Counter(w.tas), "TAS's pods per node"
    if w.rack:
        assert len(racks) == 1


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds())
def test_the_verdict_matches_the_brute_force(w: World) -> None:
    doc = decide_doc(objects(w))
    assert doc["status"] == expected(w), (w, doc["message"])
    if doc["status"] == "ready":
        check(w, doc)
