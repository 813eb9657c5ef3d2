"""A brute-force oracle for preemption on small worlds, and the worlds.

A world: a few nodes in two racks, each with plain GPUs (attribute `clique` x or y)
and maybe a partitionable GPU (`whole`, no clique, or two halves in clique x, sharing
one counter set); a network-attached pool of NICs every node reaches; running pods
holding devices, some in running gangs (with minCount, and maybe a launcher holding
nothing), some sharing one claim, some under a PodDisruptionBudget; and a preemptor:
one pod, or a gang (no topology, by rack, or by clique) whose members may share a NIC
claim.

The oracle knows nothing of draco's victim search. It enumerates the victim sets the
rules allow (lower priority than the preemptor, never the preemptor's own gang, each
running gang keeps minCount or goes whole) that are maximal, and asks the allocator
whether the preemptor fits with them gone (fit is monotone: freeing more never
hurts, so some valid set works exactly when a maximal one does). It then judges a
`draco allocate --preempt` document: the verdict, the victims' validity, the fit on
the chosen node or domain, minimality in upstream's sense (no single victim, nor a
whole victim gang, could stay and the preemptor still fit there), and no device
nominated twice.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from operators.allocator import in_use_from_tracker, inventory_from_tracker, shares_from_tracker
from operators.allocator.nodes import NodeIndex
from operators.cli.allocate_gang import find_gang, member_of, member_pods
from operators.cli.allocate_preempt import preempt_document
from operators.cli.allocation_records import nodes_from
from operators.cli.state import build_tracker
from operators.gangs.gang import Member, place_gang
from operators.model import NamespacedName
from tests.gangs.world import NS, classes, gang, node, node_slice

PREEMPTOR_PRIORITY = 2
GPU = 'device.attributes["driver-a"].kind == "gpu"'
HALF = 'device.attributes["driver-a"].size == "half"'
NIC = 'device.attributes["driver-a"].kind == "nic"'


@dataclass(frozen=True)
class Pod:
    name: str
    node: str
    devices: tuple[tuple[str, str], ...]  # (pool, device)
    priority: int
    day: int
    gang: str | None = None
    guarded: bool = False
    uses: str | None = None  # the running pod whose claim it uses (shares) instead of its own


@dataclass(frozen=True)
class World:
    nodes: tuple[tuple[str, str, int, bool, tuple[str, ...]], ...]  # name, rack, GPUs, partitioned, cliques
    nics: int
    pods: tuple[Pod, ...]
    gangs: tuple[tuple[str, int], ...]  # running gang, minCount
    pdb_allowed: int
    # the preemptor: None (a pod) or the gang's topology ("", "rack", "clique")
    topology: str | None
    asks: tuple[tuple[int, int], ...]  # per member (one for a pod): GPUs, halves
    nic: bool  # the preemptor (each member, through one shared claim) wants a NIC
    member_priorities: tuple[int, ...] = field(default=())
    min_count: int = 0  # a gang preemptor's minCount (its members placed already included)

    @property
    def preemptor(self) -> str:
        return "vip" if self.topology is None else "m-0"


def _devices(w: World) -> dict[str, list[tuple[str, str]]]:
    out: dict[str, list[tuple[str, str]]] = {}
    for name, _, n_gpus, parts, _ in w.nodes:
        devs = [(name, f"gpu-{i}") for i in range(n_gpus)]
        if parts:
            devs += [(name, "whole"), (name, "half-a"), (name, "half-b")]
        out[name] = devs
    return out


@st.composite
def worlds(draw: st.DrawFn, gang_preemptor: bool) -> World:
    nodes = []
    for i in range(draw(st.integers(1, 3))):
        n_gpus = draw(st.integers(0, 2))
        nodes.append((f"n{i}", draw(st.sampled_from(["r1", "r2"])), n_gpus, draw(st.booleans()),
                      tuple(draw(st.sampled_from("xy")) for _ in range(n_gpus))))
    nics = draw(st.integers(0, 2))
    w0 = World(tuple(nodes), nics, (), (), 0, None, (), False)
    free = {n: list(d) for n, d in _devices(w0).items()}
    fabric = [("fabric", f"nic-{i}") for i in range(nics)]
    pods: list[Pod] = []
    gangs: list[tuple[str, int]] = []
    for g in range(draw(st.integers(0, 2))):
        name = f"team{g}"
        prio = draw(st.integers(0, 3))
        size = draw(st.integers(1, 3))
        members = []
        for k in range(size):
            members.append(_holder(draw, f"t{g}-{k}", free, fabric, prio, name, allow_none=False))
        if draw(st.booleans()):  # a launcher, usually of the gang's priority
            members.append(Pod(f"t{g}-launcher", draw(st.sampled_from([n[0] for n in nodes])), (),
                               draw(st.sampled_from([prio, prio, prio, 3])), 1, name))
        members = [m for m in members if m is not None]
        if members:
            pods += members
            gangs.append((name, draw(st.integers(1, len(members)))))
    for k in range(draw(st.integers(0, 4))):
        p = _holder(draw, f"p{k}", free, fabric, draw(st.integers(0, 3)), None, allow_none=False)
        if p is not None:
            pods.append(p)
    holders = [p for p in pods if p.devices and p.uses is None]
    if holders and draw(st.booleans()):  # a second pod using one holder's claim
        owner = draw(st.sampled_from(holders))
        pods.append(Pod("sharer", owner.node, owner.devices, draw(st.integers(0, 3)), 2, uses=owner.name))
    pods = [Pod(p.name, p.node, p.devices, p.priority, p.day, p.gang, draw(st.booleans()), p.uses)
            if p.devices else p for p in pods]
    if gang_preemptor:
        n = draw(st.integers(1, 3))
        asks = tuple((draw(st.integers(0, 2)), draw(st.integers(0, 1))) for _ in range(n))
        topology: str | None = draw(st.sampled_from(["", "rack", "clique"]))
        prios = tuple(draw(st.sampled_from([PREEMPTOR_PRIORITY, PREEMPTOR_PRIORITY, 3])) for _ in range(n))
        placed = 0
        spots = [(name, d) for name, devs in sorted(free.items()) for d in devs if d[1].startswith("gpu")]
        if spots and draw(st.booleans()):  # a member placed already, on a GPU: it fixes the domain
            node_name, device = draw(st.sampled_from(spots))
            pods.append(Pod("m-placed", node_name, (device,), PREEMPTOR_PRIORITY, 1, "vip"))
            placed = 1
        min_count = draw(st.integers(1, n + placed))
    else:
        asks = ((draw(st.integers(0, 2)), draw(st.integers(0, 1))),)
        topology, prios, min_count = None, (), 0
    nic = draw(st.booleans()) if nics else False
    if not nic and not any(g or h for g, h in asks):
        asks = ((1, 0), *asks[1:])
    return World(tuple(nodes), nics, tuple(pods), tuple(gangs), draw(st.integers(0, 1)), topology, asks,
                 nic, prios, min_count)


def _holder(draw: st.DrawFn, name: str, free: dict[str, list[tuple[str, str]]],
            fabric: list[tuple[str, str]], prio: int, gang_name: str | None,
            allow_none: bool = False) -> Pod | None:
    node_name = draw(st.sampled_from(sorted(free)))
    here = free[node_name]
    options = here + fabric
    if not options:
        return None
    wanted = draw(st.lists(st.sampled_from(options), min_size=1, max_size=2, unique=True))
    picked = []
    for pool, dev in wanted:
        if (pool, dev) not in here and (pool, dev) not in fabric:
            continue  # a partition the first pick's counters rule out
        picked.append((pool, dev))
        if pool == "fabric":
            fabric.remove((pool, dev))
        else:
            here.remove((pool, dev))
            if dev == "whole":  # the halves' counters are used up
                here[:] = [d for d in here if d[1] not in ("half-a", "half-b")]
            elif dev.startswith("half"):
                here[:] = [d for d in here if d[1] != "whole"]
    return Pod(name, node_name, tuple(picked), prio, draw(st.integers(1, 4)), gang_name)


# -- the world as API objects --------------------------------------------------------------

def objects(w: World, gone: Iterable[str] = (), only_node: str | None = None) -> list[dict[str, Any]]:
    """The world with the pods GONE removed (a claim goes when no pod using it is left);
    ONLY_NODE: the preemptor pod limited to that node, preempting nothing."""
    away = set(gone)
    objs: list[dict[str, Any]] = [*classes()]
    for name, rack, n_gpus, parts, cliques in w.nodes:
        objs.append(node(name, rack=rack, host=name))
        devs: list[dict[str, Any]] = [{"name": f"gpu-{i}", "attributes": {
            "kind": {"string": "gpu"}, "size": {"string": "whole"}, "clique": {"string": cliques[i]}}} for i in range(n_gpus)]
        counters: list[dict[str, Any]] = []
        if parts:
            full = {"counterSet": "gpu-p", "counters": {"mem": {"value": "40Gi"}}}
            half = {"counterSet": "gpu-p", "counters": {"mem": {"value": "20Gi"}}}
            hattr = {"kind": {"string": "part"}, "size": {"string": "half"}, "clique": {"string": "x"}}
            devs += [{"name": "whole", "attributes": {"kind": {"string": "part"}, "size": {"string": "whole"}},
                      "consumesCounters": [full]},
                     {"name": "half-a", "attributes": hattr, "consumesCounters": [half]},
                     {"name": "half-b", "attributes": hattr, "consumesCounters": [half]}]
            counters = [{"name": "gpu-p", "counters": {"mem": {"value": "40Gi"}}}]
        objs += node_slice(name, devs, counters=counters)
    if w.nics:
        objs.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                     "metadata": {"name": "fabric"},
                     "spec": {"driver": "driver-a", "allNodes": True,
                              "pool": {"name": "fabric", "generation": 1, "resourceSliceCount": 1},
                              "devices": [{"name": f"nic-{i}", "attributes": {"kind": {"string": "nic"},
                                                                                  "size": {"string": "whole"}}}
                                          for i in range(w.nics)]}})
    for name, min_count in w.gangs:
        objs.append(gang(name, min_count))
    objs.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                 "metadata": {"name": "guard", "namespace": NS},
                 "spec": {"selector": {"matchLabels": {"guarded": "yes"}}},
                 "status": {"disruptionsAllowed": w.pdb_allowed}})
    users: dict[str, list[str]] = {}
    for p in w.pods:
        if p.devices and p.name not in away:
            users.setdefault(p.uses or p.name, []).append(p.name)
    for p in w.pods:
        if p.name not in away:
            objs.append(_running_pod(p))
        if p.devices and p.uses is None and users.get(p.name):  # kept while a user is left
            objs.append(_claim(p, users[p.name]))
    objs += _preemptor(w, only_node)
    return objs


def _claim(p: Pod, users: Sequence[str]) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": f"{p.name}-claim", "namespace": NS, "uid": f"uid-{p.name}-claim"},
            "spec": {"devices": {"requests": [{"name": "dev", "exactly": {
                "deviceClassName": "class-a", "count": len(p.devices)}}]}},
            "status": {"allocation": {
                "devices": {"results": [{"request": "dev", "driver": "driver-a", "pool": pool, "device": d}
                                        for pool, d in p.devices]},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [p.node]}]}]}},
                "reservedFor": [{"resource": "pods", "name": u, "uid": f"uid-{u}"} for u in users]}}


def _running_pod(p: Pod) -> dict[str, Any]:
    labels = {"resource.draco.dev/gang": p.gang} if p.gang else {}
    if p.guarded:
        labels["guarded"] = "yes"
    claims = [{"name": "dev", "resourceClaimName": f"{p.uses or p.name}-claim"}] if p.devices else []
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": p.name, "namespace": NS, "uid": f"uid-{p.name}", "labels": labels},
            "spec": {"nodeName": p.node, "priority": p.priority, "resourceClaims": claims,
                     "containers": [{"name": "c", "image": "busybox"}]},
            "status": {"phase": "Running", "startTime": f"2026-01-0{p.day}T00:00:00Z"}}


def _requests(gpus: int, halves: int) -> list[dict[str, Any]]:
    out = []
    if gpus:
        out.append({"name": "gpu", "exactly": {"deviceClassName": "class-a", "count": gpus,
                                               "selectors": [{"cel": {"expression": GPU}}]}})
    if halves:
        out.append({"name": "half", "exactly": {"deviceClassName": "class-a", "count": halves,
                                                "selectors": [{"cel": {"expression": HALF}}]}})
    return out


def _preemptor(w: World, only_node: str | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    names = ["vip"] if w.topology is None else [f"m-{i}" for i in range(len(w.asks))]
    if w.topology is not None:
        spec: dict[str, Any] = {"minCount": w.min_count or len(names)}
        if w.topology == "rack":
            spec["topology"] = {"nodeLabel": "rack"}
        elif w.topology == "clique":
            spec["topology"] = {"deviceAttribute": "driver-a/clique"}
        out.append({"apiVersion": "resource.draco.dev/v1alpha1", "kind": "Gang",
                    "metadata": {"name": "vip", "namespace": NS, "uid": "uid-gang-vip",
                                 "creationTimestamp": "2026-01-01T00:00:00Z"}, "spec": spec})
    nic_needed = w.nic
    if nic_needed:
        out.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                    "metadata": {"name": "vip-nic", "namespace": NS, "uid": "uid-vip-nic"},
                    "spec": {"devices": {"requests": [{"name": "nic", "exactly": {
                        "deviceClassName": "class-a", "selectors": [{"cel": {"expression": NIC}}]}}]}}})
    for i, name in enumerate(names):
        gpus, halves = w.asks[i]
        claims = []
        if gpus or halves:
            out.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                        "metadata": {"name": f"{name}-claim", "namespace": NS, "uid": f"uid-{name}-claim"},
                        "spec": {"devices": {"requests": _requests(gpus, halves)}}})
            claims.append({"name": "dev", "resourceClaimName": f"{name}-claim"})
        if nic_needed:
            claims.append({"name": "nic", "resourceClaimName": "vip-nic"})
        prio = w.member_priorities[i] if w.member_priorities else PREEMPTOR_PRIORITY
        spec = {"priority": prio, "resourceClaims": claims,
                "schedulingGates": [{"name": "resource.draco.dev/allocation"}],
                "containers": [{"name": "c", "image": "busybox"}]}
        if only_node is not None:
            spec["nodeSelector"] = {"host": only_node}
            spec["preemptionPolicy"] = "Never"
        labels = {"resource.draco.dev/gang": "vip"} if w.topology is not None else {}
        out.append({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}", "labels": labels},
                    "spec": spec, "status": {"phase": "Pending"}})
    return out


# -- the oracle ------------------------------------------------------------------------------

def decide(w: World) -> dict[str, Any]:
    objs = objects(w)
    return preempt_document(build_tracker(objs), objs, NamespacedName(NS, w.preemptor))


def preemptor_priority(w: World) -> int:
    """A gang preempts with the lowest priority among the members that get devices (a
    member asking none, a launcher, is placed already)."""
    if not w.member_priorities:
        return PREEMPTOR_PRIORITY
    asking = [p for p, (gpus, halves) in zip(w.member_priorities, w.asks, strict=True)
              if gpus or halves or w.nic]
    return min(asking or w.member_priorities)


def running_gangs(w: World) -> dict[str, tuple[list[str], int]]:
    """Running gang -> (its running members, minCount)."""
    return {g: ([p.name for p in w.pods if p.gang == g], m) for g, m in w.gangs}


def valid(w: World, victims: Iterable[str]) -> bool:
    """Every running gang keeps minCount or goes whole; only lower-priority pods go."""
    chosen = set(victims)
    prio = {p.name: p.priority for p in w.pods}
    if any(prio[v] >= preemptor_priority(w) for v in chosen):
        return False
    for members, min_count in running_gangs(w).values():
        n = sum(1 for m in members if m in chosen)
        if 0 < n < len(members) and len(members) - n < min_count:
            return False
    return True


def maximal_sets(w: World) -> list[frozenset[str]]:
    """The maximal valid victim sets (one per way to cut gangs that cannot go whole)."""
    low = preemptor_priority(w)
    free = [p.name for p in w.pods if p.gang is None and p.priority < low]
    choices: list[list[tuple[str, ...]]] = []
    for members, min_count in running_gangs(w).values():
        lower = [m for m in members if next(p for p in w.pods if p.name == m).priority < low]
        if len(lower) == len(members):
            choices.append([tuple(members)])
        else:
            spare = max(0, len(members) - min_count)
            k = min(spare, len(lower))
            choices.append([tuple(c) for c in itertools.combinations(lower, k)])
    return [frozenset(free).union(*combo) for combo in itertools.product(*choices)]


def fits_anywhere(w: World, gone: Iterable[str]) -> bool:
    """The preemptor placed with GONE removed, preempting nothing."""
    objs = objects(w, gone)
    for o in objs:
        if o["kind"] == "Pod" and o["metadata"]["name"] in _preemptor_names(w):
            o["spec"]["preemptionPolicy"] = "Never"
    doc = preempt_document(build_tracker(objs), objs, NamespacedName(NS, w.preemptor))
    return bool(doc["status"] == "fits")


def _preemptor_names(w: World) -> set[str]:
    return {"vip"} if w.topology is None else {"m-placed", *(f"m-{i}" for i in range(len(w.asks)))}


def fits_there(w: World, gone: Iterable[str], doc: Mapping[str, Any]) -> bool:
    """The preemptor placed with GONE removed on the document's node (a pod) or in its
    topology domain (a gang)."""
    if w.topology is None:
        objs = objects(w, gone, only_node=doc["node"])
        d = preempt_document(build_tracker(objs), objs, NamespacedName(NS, "vip"))
        return bool(d["status"] == "fits")
    objs = objects(w, gone)
    tracker = build_tracker(objs)
    g = find_gang(objs, NamespacedName(NS, "vip"))
    members = [m for p in member_pods(objs, tracker, g) if isinstance(m := member_of(tracker, p), Member)]
    index = NodeIndex(inventory_from_tracker(tracker), nodes_from(objs, tracker))
    out = place_gang(g, members, index, {c.name: c for c in tracker.device_classes()},
                     set(in_use_from_tracker(tracker)), 10.0, shares=shares_from_tracker(tracker),
                     only_domain=doc["domain"] or "", explain=False)
    return out.allocated


def judge(w: World, doc: Mapping[str, Any]) -> str:
    """Checks DOC against the oracle (an AssertionError says what is wrong); returns the
    verdict for the statistics."""
    status = doc["status"]
    if status == "fits":
        assert fits_anywhere(w, ()), "draco says it fits, but it does not"
        return status
    feasible = any(fits_anywhere(w, s) for s in maximal_sets(w) if s)
    if status == "impossible":
        assert not feasible, \
            f"draco says impossible ({doc['reason']}), but a valid victim set works"
        return status
    assert status == "preempt", status
    victims = [v.split("/", 1)[1] for v in doc["victims"]]
    assert victims and valid(w, victims), f"victims {victims} break a rule"
    assert set(victims).isdisjoint(_preemptor_names(w))
    assert len(doc["devices"]) == len(set(doc["devices"])), "a device nominated twice"
    held = {f"driver-a/{pool}/{d}" for p in w.pods if p.name not in victims for pool, d in p.devices}
    assert not held & set(doc["devices"]), "a nominated device stays held"
    assert fits_there(w, victims, doc), "the preemptor does not fit with the victims gone"
    for v in victims:  # upstream's minimality: no single victim could stay
        rest = [x for x in victims if x != v]
        if valid(w, rest):
            assert not fits_there(w, rest, doc), f"{v} need not go"
    for members, _ in running_gangs(w).values():
        if members and set(members) <= set(victims):
            rest = [x for x in victims if x not in members]
            if rest:
                assert not fits_there(w, rest, doc), f"gang {members} need not go"
    return status


__all__ = ["World", "decide", "fits_anywhere", "judge", "maximal_sets", "objects", "worlds"]
