"""Gang placement in process (`--only gangs`): 2,000 nodes x 8 GPUs (16,000 devices).

Topology: node label `rack` (62 racks of 32 nodes and one of 16) and device attribute
`clique` (126 cliques of 16 nodes, offset by 8 from the racks). A gang must fit in one domain; every domain but
one has one GPU taken, so each gang below fits in exactly one.
- 32 pods x 8 GPUs by rack: a whole 32-node rack (256 GPUs). A 16-node domain holds
  128 GPUs, so a 32 x 8 gang cannot be the one-clique case; that one is
- 32 pods x 4 GPUs by clique (128 GPUs: the whole clique, two pods per node);
- 64 pods x 8 GPUs by rack: fits nowhere; the verdict and its explanation;
- 100 gangs of 4 pods x 2 GPUs (by rack) and 1,000 single pods of one GPU arriving
  together, decided in the allocator's order (gangs first, then pods by age): all
  placed, no device in two claims.
- tight fits (issue 48), each gang fitting in exactly one way, one member per node:
  16 nodes with 16, 15, ..., 1 free GPUs and members asking 1, 2, ..., 16 (by name:
  the worst order for a search that goes by name and takes the first node that fits);
  and issue 48's own shape, 18 members (one asking 1 GPU, 17 asking 2) on 17 nodes x
  2 GPUs where one node has 3.
Targets (issue #32): CPU to a placement < 1 s; the infeasible explanation < 2 s; a
tight fit decided (placed) < 1 s.

Baseline: the same pods placed one by one (`nodes.place`, kube-scheduler's pod-group
cycle in effect: first fit per pod, no domain), whose placement may straddle domains.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from operators.allocator import in_use_from_tracker, inventory_from_tracker
from operators.allocator.nodes import NodeIndex, PodFit, candidate_nodes, place
from operators.cli.allocate import nodes_from
from operators.cli.allocate_gang import member_of
from operators.cli.state import build_tracker
from operators.gangs.gang import Member, place_gang
from operators.model import DeviceID, NamespacedName
from operators.model.gangs import Gang, parse_gang
from operators.tracker import Tracker

DRIVER = "gpu.example.com"
NODES, PER_NODE = 2000, 8
NS = "bench"


def _rack(n: int) -> str:
    return f"rack-{n // 32:02d}"


def _clique(n: int) -> int:
    """Cliques straddle racks (offset by 8 nodes), so only the one clique inside the free
    rack is free too."""
    return (n + 8) // 16


def cluster(free_rack: str, free_clique: int) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [{
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}]
    taken_racks: set[str] = set()
    taken_cliques: set[int] = set()
    for n in range(NODES):
        name = f"node-{n:04d}"
        objs.append({"apiVersion": "v1", "kind": "Node",
                     "metadata": {"name": name, "labels": {"rack": _rack(n)}}})
        objs.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                     "metadata": {"name": f"{name}-gpu"},
                     "spec": {"driver": DRIVER, "nodeName": name,
                              "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                              "devices": [{"name": f"gpu-{i}", "attributes": {
                                  "clique": {"int": _clique(n)}}} for i in range(PER_NODE)]}})
        # one GPU taken in every rack and clique but the free ones
        rack, clique = _rack(n), _clique(n)
        fresh = rack not in taken_racks or clique not in taken_cliques
        if fresh and rack != free_rack and clique != free_clique:
            taken_racks.add(rack)
            taken_cliques.add(clique)
            objs.append(_claim(f"held-{name}", 1, {"devices": {"results": [
                {"request": "gpu", "driver": DRIVER, "pool": name, "device": "gpu-7"}]}}))
    return objs


def _claim(name: str, count: int, allocation: dict[str, Any] | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                         "metadata": {"name": name, "namespace": NS, "uid": f"u-{name}"},
                         "spec": {"devices": {"requests": [
                             {"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": count}}]}}}
    if allocation is not None:
        c["status"] = {"allocation": allocation}
    return c


def gang_objects(name: str, pods: int, gpus: int, **topology: str) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [{
        "apiVersion": "resource.draco.dev/v1alpha1", "kind": "Gang",
        "metadata": {"name": name, "namespace": NS}, "spec": {"minCount": pods, "topology": topology}}]
    for i in range(pods):
        pod = f"{name}-{i:03d}"
        objs.append(_claim(pod, gpus))
        objs.append({"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": pod, "namespace": NS, "uid": f"u-{pod}",
                                  "labels": {"resource.draco.dev/gang": name}},
                     "spec": {"schedulingGates": [{"name": "resource.draco.dev/allocation"}],
                              "resourceClaims": [{"name": "gpu", "resourceClaimName": pod}],
                              "containers": [{"name": "c", "image": "i"}]}})
    return objs


def members(tracker: Tracker, name: str) -> list[Member]:
    out = []
    for pod in sorted(tracker.pods(), key=lambda p: p.meta.name):
        if pod.meta.labels.get("resource.draco.dev/gang") == name:
            m = member_of(tracker, pod)
            assert isinstance(m, Member)
            out.append(m)
    return out


def _cpu(fn: Any) -> tuple[Any, float]:
    start = time.process_time()
    result = fn()
    return result, time.process_time() - start


def _one_by_one(ms: Iterable[Member], index: NodeIndex, classes: Any, in_use: set[DeviceID]) -> int:
    placed = 0
    for m in ms:
        allowed, refused = candidate_nodes(index.nodes, [PodFit(m.pod)])
        p = place(m.pending, index, classes, in_use, 10.0, refused=refused, with_explain=False)
        if p.allocated:
            placed += 1
            in_use.update(r.id for a in p.outcome.allocations for r in a.results)
    return placed


def run(quick: bool) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    objs = cluster("rack-41", 83)
    gangs = {"rack": gang_objects("by-rack", 32, 8, nodeLabel="rack"),
             "clique": gang_objects("by-clique", 32, 4, deviceAttribute=f"{DRIVER}/clique"),
             "huge": gang_objects("huge", 64, 8, nodeLabel="rack")}
    tracker = build_tracker(objs + [o for g in gangs.values() for o in g])
    index = NodeIndex(inventory_from_tracker(tracker), nodes_from(objs, tracker))
    classes = {c.name: c for c in tracker.device_classes()}
    in_use = set(in_use_from_tracker(tracker))
    index.view(index.nodes[0])  # warm nothing in particular: each case pays its own views
    for key, name, topo in (("rack", "by-rack", "rack"), ("clique", "by-clique", "clique")):
        gang: Gang = parse_gang(gangs[key][0] | {"metadata": {"name": name, "namespace": NS}})
        ms = members(tracker, name)
        out, cpu = _cpu(lambda g=gang, ms=ms: place_gang(g, ms, index, classes, in_use, 10.0))
        _, base = _cpu(lambda ms=ms: _one_by_one(ms, index, classes, set(in_use)))
        assert out.allocated and out.searched == 1, out.reason  # one domain fits, by count
        rows.append({"scenario": f"gang 32 pods x {8 if key == 'rack' else 4} GPUs, one {topo} fits",
                     "draco_s": cpu, "baseline_s": base, "ratio": cpu / base if base else None,
                     "note": f"placed in {out.domain}, 1 of {out.domains} domains searched; "
                             f"target < 1 s CPU ({out.steps} search steps)"})
    huge = parse_gang(gangs["huge"][0])
    ms = members(tracker, "huge")
    out, cpu = _cpu(lambda: place_gang(huge, ms, index, classes, in_use, 10.0))
    assert not out.allocated
    rows.append({"scenario": "gang 64 pods x 8 GPUs, infeasible", "draco_s": cpu,
                 "baseline_s": None, "ratio": None,
                 "note": f"target < 2 s; reason: {(out.reason or '')[:90]}"})
    rows += _tight()
    rows.append(_mixed(quick))
    return rows


def _tight_objects(name: str, sizes: list[int], asks: list[int]) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [{
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}]
    for n, size in enumerate(sizes):
        node = f"{name}-node-{n:02d}"
        objs.append({"apiVersion": "v1", "kind": "Node",
                     "metadata": {"name": node, "labels": {"rack": "rack-t"}}})
        objs.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                     "metadata": {"name": f"{node}-gpu"},
                     "spec": {"driver": DRIVER, "nodeName": node,
                              "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                              "devices": [{"name": f"gpu-{i}"} for i in range(size)]}})
    gang = gang_objects(name, len(asks), 1, nodeLabel="rack")
    for i, ask in enumerate(asks):  # gang_objects gives every pod 1 GPU: set each one's ask
        claim = next(o for o in gang if o["kind"] == "ResourceClaim" and o["metadata"]["name"] == f"{name}-{i:03d}")
        claim["spec"]["devices"]["requests"][0]["exactly"]["count"] = ask
    return objs + gang


def _tight() -> list[dict[str, Any]]:
    rows = []
    issue = [2] * 17
    issue.insert(0, 1)
    for name, sizes, asks, what in (
            ("stairs", list(range(16, 0, -1)), list(range(1, 17)),
             "16 nodes with 16..1 GPUs, members asking 1..16"),
            ("issue48", [2] * 16 + [3], issue, "issue 48: 18 members (1 x 1, 17 x 2 GPUs) on 17 nodes")):
        objs = _tight_objects(name, sizes, asks)
        tracker = build_tracker(objs)
        index = NodeIndex(inventory_from_tracker(tracker), nodes_from(objs, tracker))
        classes = {c.name: c for c in tracker.device_classes()}
        gang = parse_gang(next(o for o in objs if o["kind"] == "Gang"))
        ms = members(tracker, name)
        out, cpu = _cpu(lambda g=gang, ms=ms, i=index, c=classes: place_gang(g, ms, i, c, set(), 10.0))
        base_placed, base = _cpu(lambda ms=ms, i=index, c=classes: _one_by_one(ms, i, c, set()))
        assert out.allocated, out.reason
        rows.append({"scenario": f"gang tight fit: {what}", "draco_s": cpu, "baseline_s": base,
                     "ratio": cpu / base if base else None,
                     "note": f"fits one way: placed ({out.steps} search steps); target < 1 s CPU; "
                             f"one by one places {base_placed} of {len(ms)}"})
    return rows


def _mixed(quick: bool) -> dict[str, Any]:
    n_gangs, n_pods = (20, 200) if quick else (100, 1000)
    objs = cluster("rack-41", 83)
    extra: list[dict[str, Any]] = []
    for g in range(n_gangs):
        extra += gang_objects(f"g{g:03d}", 4, 2, nodeLabel="rack")
    for p in range(n_pods):
        extra.append(_claim(f"single-{p:04d}", 1))
        extra.append({"apiVersion": "v1", "kind": "Pod",
                      "metadata": {"name": f"single-{p:04d}", "namespace": NS, "uid": f"u-s{p}"},
                      "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": f"single-{p:04d}"}],
                               "containers": [{"name": "c", "image": "i"}]}})
    tracker = build_tracker(objs + extra)
    index = NodeIndex(inventory_from_tracker(tracker), nodes_from(objs, tracker))
    classes = {c.name: c for c in tracker.device_classes()}
    in_use = set(in_use_from_tracker(tracker))
    claimed: dict[DeviceID, str] = {}

    def decide() -> int:
        placed = 0
        for g in range(n_gangs):
            name = f"g{g:03d}"
            gang = parse_gang(next(o for o in extra if o["kind"] == "Gang" and o["metadata"]["name"] == name))
            out = place_gang(gang, members(tracker, name), index, classes, in_use, 10.0)
            for p in out.placed:
                for claim, allocation in p.allocations:
                    for r in allocation.results:
                        assert r.id not in claimed, "one device in two claims"
                        claimed[r.id] = claim.name
                        in_use.add(r.id)
            placed += len(out.placed)
        for p in range(n_pods):
            key = NamespacedName(NS, f"single-{p:04d}")
            claim = tracker.claim(key)
            assert claim is not None
            out1 = place([claim], index, classes, in_use, 10.0, with_explain=False)
            if out1.allocated:
                placed += 1
                for r in out1.outcome.allocations[0].results:
                    assert r.id not in claimed, "one device in two claims"
                    claimed[r.id] = claim.name
                    in_use.add(r.id)
        return placed

    placed, cpu = _cpu(decide)
    assert placed == n_gangs * 4 + n_pods, placed
    return {"scenario": f"{n_gangs} gangs of 4 x 2 GPUs + {n_pods} single pods", "draco_s": cpu,
            "baseline_s": None, "ratio": None,
            "note": f"all {placed} pods placed, {len(claimed)} devices, none in two claims"}
