"""A brute force for gang placement on small worlds, independent of draco's search.

A world: nodes in racks (the node label `rack`), each with a few GPUs (driver-a) that
are partitions of one node counter (`mem`), some held by claims outside the gang, each
with a model and maybe a clique (the device attribute `driver-a/clique`); a fabric pool
of NICs (driver-b) every node reaches; and the gang's members: each with its own claim
(count or All, a model selector, a same-model constraint) or none, and maybe the
shared `nic` claim (one NIC for all who name it) or the shared `accel` claim (one GPU,
node-local, so everyone naming it sits on its node). A member with no claim at all is
a launcher: placed from the start, it counts towards minCount.

`feasible(world)` enumerates, domain by domain, every node and every set of devices for
each member of the core, in name order, exactly as the rules read (the docs and
upstream's allocator): it shares no code with draco's search. `check(world, doc)` holds
a placement draco returned against the same rules.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from tests.allocator.build import resource_slice_api
from tests.gangs.world import allocated_on, classes, gang, member, node, node_slice, shared_claim

FABRIC = "fabric"


@dataclass(frozen=True)
class Dev:
    name: str
    model: str
    clique: int | None  # the device attribute; None: the device has none
    held: bool  # allocated to a claim outside the gang
    mem: int = 1  # what it consumes of its node's counter (NICs: nothing)


@dataclass(frozen=True)
class Node:
    name: str
    rack: str
    devices: tuple[Dev, ...]
    memory: int  # the node's counter


@dataclass(frozen=True)
class Ask:
    count: int  # ignored in All mode
    model: str | None  # a selector on the model
    same_model: bool = False  # a matchAttribute constraint on the model
    all_mode: bool = False


@dataclass(frozen=True)
class Pod:
    own: Ask | None  # its own claim `p-<i>-claim`, or none
    nic: bool = False  # names the shared claim `nic`
    accel: bool = False  # names the shared claim `accel`

    @property
    def launcher(self) -> bool:
        return self.own is None and not self.nic and not self.accel


@dataclass(frozen=True)
class World:
    nodes: tuple[Node, ...]
    nics: tuple[Dev, ...]
    accel: Ask  # the shared accelerator claim's request (count 1 or 2)
    pods: tuple[Pod, ...]
    min_count: int
    topology: str  # "", "rack", "clique", "rack+clique"

    @property
    def node_label(self) -> str | None:
        return "rack" if "rack" in self.topology else None

    @property
    def attribute(self) -> str | None:
        return "driver-a/clique" if "clique" in self.topology else None


def label(i: int) -> str:
    return f"default/p-{i}"


# -- the world as API objects ------------------------------------------------------

def _request(a: Ask, klass: str = "class-a") -> dict[str, Any]:
    r: dict[str, Any] = {"name": "gpu", "class": klass}
    if a.all_mode:
        r["mode"] = "All"
    else:
        r["count"] = a.count
    if a.model:
        r["selectors"] = [f'device.attributes["driver-a"].model == "{a.model}"']
    return r


def _attributes(d: Dev, driver: str = "driver-a") -> dict[str, Any]:
    attrs: dict[str, Any] = {"model": {"string": d.model}}
    if d.clique is not None:
        # the domain is a qualified name: the GPUs' attribute is `driver-a/clique`;
        # a NIC carries it under that fully qualified name too
        key = "clique" if driver == "driver-a" else "driver-a/clique"
        attrs[key] = {"int": d.clique}
    return attrs


def objects(w: World) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [*classes(), gang("g", w.min_count, node_label=w.node_label,
                                                    device_attribute=w.attribute)]
    for n in w.nodes:
        objs.append(node(n.name, rack=n.rack))
        objs += node_slice(n.name, [
            {"name": d.name, "attributes": _attributes(d),
             "consumesCounters": [{"counterSet": "mem", "counters": {"mem": {"value": str(d.mem)}}}]}
            for d in n.devices], counters=[{"name": "mem", "counters": {"mem": {"value": str(n.memory)}}}])
        for d in n.devices:
            if d.held:
                objs += member(f"held-{n.name}-{d.name}", "other", [{"name": "gpu", "class": "class-a"}],
                               allocation=allocated_on(n.name, d.name), node_name=n.name)
    if w.nics:
        objs.append(resource_slice_api({"driver": "driver-b", "pool": FABRIC, "allNodes": True,
                                        "name": FABRIC, "devices": [
                                            {"name": d.name, "attributes": _attributes(d, "driver-b")}
                                            for d in w.nics]}, 0))
        for d in w.nics:
            if d.held:
                held = member(f"held-{d.name}", "other", [{"name": "nic", "class": "class-b"}])
                held[0]["status"] = {"allocation": {"devices": {"results": [
                    {"request": "nic", "driver": "driver-b", "pool": FABRIC, "device": d.name}]}}}
                objs.append(held[0])
    if any(p.nic for p in w.pods):
        objs.append(shared_claim("nic", [{"name": "nic", "class": "class-b"}]))
    if any(p.accel for p in w.pods):
        objs.append(shared_claim("accel", [_request(w.accel)]))
    for i, p in enumerate(w.pods):
        own = [_request(p.own)] if p.own is not None else []
        constraints = [{"matchAttribute": "driver-a/model"}] if p.own is not None and p.own.same_model else []
        objs += member(f"p-{i}", "g", own, constraints=constraints,
                       shared=[n for n, on in (("nic", p.nic), ("accel", p.accel)) if on])
    return objs


# -- the brute force ---------------------------------------------------------------

@dataclass(frozen=True)
class Domain:
    rack: str | None
    clique: int | None
    nodes: frozenset[str]


def domains(w: World) -> list[Domain]:
    """Every domain of the cluster, as the gang's docs define them."""
    names = frozenset(n.name for n in w.nodes)
    if not w.topology:
        return [Domain(None, None, names)]
    racks = sorted({n.rack for n in w.nodes})
    if w.topology == "rack":
        return [Domain(r, None, frozenset(n.name for n in w.nodes if n.rack == r)) for r in racks]
    out = []
    for n in w.nodes:
        reach = {d.clique for d in (*n.devices, *w.nics) if d.clique is not None}
        for c in reach:
            out.append((n.rack if w.node_label else None, c))
    result = []
    for rack, c in sorted(set(out), key=str):
        nodes = frozenset(n.name for n in w.nodes if (rack is None or n.rack == rack) and any(
            d.clique == c for d in (*n.devices, *w.nics)))
        result.append(Domain(rack, c, nodes))
    return result


def core(w: World) -> list[int] | None:
    """The members placed jointly (None: too few members, the gang waits)."""
    if len(w.pods) < w.min_count:
        return None
    launchers = sum(1 for p in w.pods if p.launcher)
    need = max(0, w.min_count - launchers)
    return [i for i, p in enumerate(w.pods) if not p.launcher][:need]


@dataclass
class _State:
    taken: set[tuple[str, str]]  # (pool, device)
    left: dict[str, int]  # node -> counter left
    shared: dict[str, tuple[str, tuple[str, ...]]]  # claim -> (pool, devices)


def _matches(d: Dev, a: Ask) -> bool:
    return a.model is None or d.model == a.model


def _gpu_sets(w: World, n: Node, a: Ask, dom: Domain, st: _State,
              exclude: frozenset[str]) -> Iterator[tuple[Dev, ...]]:
    """Every set of N's GPUs that could serve A (inside the domain, free, counters
    within what is left), EXCLUDE taken by the member's other claim."""
    def usable(d: Dev) -> bool:
        return (not d.held and (n.name, d.name) not in st.taken and d.name not in exclude
                and (dom.clique is None or d.clique == dom.clique))
    if a.all_mode:
        every = tuple(d for d in n.devices if _matches(d, a))
        if every and all(usable(d) for d in every) and sum(d.mem for d in every) <= st.left[n.name] \
                and (not a.same_model or len({d.model for d in every}) == 1):
            yield every
        return
    free = [d for d in n.devices if usable(d) and _matches(d, a)]
    for combo in itertools.combinations(free, a.count):
        if a.same_model and len({d.model for d in combo}) != 1:
            continue
        if sum(d.mem for d in combo) <= st.left[n.name]:
            yield combo


def _place(w: World, members: Sequence[int], dom: Domain, st: _State) -> bool:
    if not members:
        return True
    p = w.pods[members[0]]
    rest = members[1:]
    for n in w.nodes:
        if n.name not in dom.nodes:
            continue
        if p.accel and "accel" in st.shared and st.shared["accel"][0] != n.name:
            continue  # the accelerator it shares is on another node
        owns: list[tuple[Dev, ...]] = [()] if p.own is None else list(
            _gpu_sets(w, n, p.own, dom, st, frozenset()))
        for own in owns:
            accels: list[tuple[Dev, ...]] = [()]
            if p.accel and "accel" not in st.shared:
                used = frozenset(d.name for d in own)
                mem_own = sum(d.mem for d in own)
                st.left[n.name] -= mem_own
                accels = list(_gpu_sets(w, n, w.accel, dom, st, used))
                st.left[n.name] += mem_own
            for accel in accels:
                nics: list[tuple[Dev, ...]] = [()]
                if p.nic and "nic" not in st.shared:
                    nics = [(d,) for d in w.nics if not d.held and (FABRIC, d.name) not in st.taken
                            and (dom.clique is None or d.clique == dom.clique)]
                for nic in nics:
                    picks = [(n.name, d) for d in (*own, *accel)] + [(FABRIC, d) for d in nic]
                    mem = sum(d.mem for d in (*own, *accel))
                    if mem > st.left[n.name]:
                        continue
                    for pool, d in picks:
                        st.taken.add((pool, d.name))
                    st.left[n.name] -= mem
                    new = []
                    if accel:
                        st.shared["accel"] = (n.name, tuple(d.name for d in accel))
                        new.append("accel")
                    if nic:
                        st.shared["nic"] = (FABRIC, tuple(d.name for d in nic))
                        new.append("nic")
                    ok = _place(w, rest, dom, st)
                    for k in new:
                        del st.shared[k]
                    st.left[n.name] += mem
                    for pool, d in picks:
                        st.taken.discard((pool, d.name))
                    if ok:
                        return True
    return False


def feasible(w: World) -> bool:
    """Whether the gang's core can be placed in some domain."""
    members = core(w)
    if members is None:
        return False
    doms = domains(w)
    if all(p.launcher for p in w.pods):
        return True  # nothing to place
    if not members:
        return bool(doms)  # only extras: placed where they fit, in any domain there is
    for dom in doms:
        st = _State(set(), {n.name: n.memory - sum(d.mem for d in n.devices if d.held)
                            for n in w.nodes}, {})
        if _place(w, members, dom, st):
            return True
    return False


# -- holding a placement against the rules -------------------------------------------

def check(w: World, doc: dict[str, Any]) -> None:
    """Every rule a placement must keep; raises AssertionError naming the broken one."""
    nodes = {n.name: n for n in w.nodes}
    nics = {d.name: d for d in w.nics}
    members = core(w)
    assert members is not None
    for i in members:
        assert label(i) in doc["nodes"], f"core member {label(i)} not placed"
    claims: dict[str, tuple[tuple[str, str], ...]] = {}
    racks: set[str] = set()
    cliques: set[int | None] = set()
    used_mem = {n.name: sum(d.mem for d in n.devices if d.held) for n in w.nodes}
    for i, p in enumerate(w.pods):
        if label(i) not in doc["members"] or p.launcher:
            continue
        where = doc["nodes"][label(i)]
        racks.add(nodes[where].rack)
        got = doc["members"][label(i)]
        names = ([f"p-{i}-claim"] if p.own else []) + (["nic"] if p.nic else []) \
            + (["accel"] if p.accel else [])
        assert sorted(got) == sorted(names), (label(i), sorted(got))
        for name in names:
            results = tuple((r["pool"], r["device"]) for r in got[name])
            if name in claims:
                assert claims[name] == results, f"shared claim {name} differs between members"
                if name == "accel":
                    assert all(pool == where for pool, _ in results), "a shared GPU off the node"
                continue
            claims[name] = results
            if name == "nic":
                assert len(results) == 1 and results[0][0] == FABRIC
                d = nics[results[0][1]]
                assert not d.held, "a held NIC"
                cliques.add(d.clique)
                continue
            ask = p.own if name != "accel" else w.accel
            assert ask is not None
            devs = []
            for pool, dname in results:
                assert pool == where, f"{name}: a device off the member's node"
                d = next(x for x in nodes[where].devices if x.name == dname)
                assert not d.held and _matches(d, ask), (name, d)
                devs.append(d)
                used_mem[where] += d.mem
                cliques.add(d.clique)
            if ask.all_mode:
                assert sorted(d.name for d in devs) == sorted(
                    d.name for d in nodes[where].devices if _matches(d, ask)), "All is not all"
            else:
                assert len(devs) == ask.count
            if ask.same_model:
                assert len({d.model for d in devs}) == 1, "the same-model constraint"
    seen: set[tuple[str, str]] = set()
    for results in claims.values():
        for r in results:
            assert r not in seen, f"device {r} in two claims"
            seen.add(r)
    held = {n.name: sum(d.mem for d in n.devices if d.held) for n in w.nodes}
    for name, used in used_mem.items():
        if used > held[name]:  # the gang took some: within the counter
            assert used <= nodes[name].memory, f"node {name}'s counter exceeded"
    if w.node_label:
        assert len(racks) <= 1, f"members in racks {racks}"
    if w.attribute:
        assert len(cliques) <= 1 and None not in cliques, f"devices in cliques {cliques}"
