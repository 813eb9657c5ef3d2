"""Victim search in process (`--only preemption`): 2,000 nodes x 8 GPUs (16,000 devices),
10,000 running pods holding one GPU each (priorities 0 to 9), every node partly full.

A high-priority gated pod asks for 8 GPUs (a whole node): victims must be found on
one node, upstream's order picks the node. Timed per preemptor, over 50 preemptors
(each against the same state); target (issue #34): P99 under 100 ms.
A second row: a gang of 4 such pods (minCount 4, one rack of 16 nodes as the topology
domain: the nodes carry `rack`), the whole gang's victim search, against the same state.
Baseline: the same search without the per-node counting check, without the
candidate limit (every node searched) and without the shared preparation.
"""

from __future__ import annotations

import time
from typing import Any

from operators.allocator import in_use_from_tracker, inventory_from_tracker
from operators.allocator.nodes import NodeIndex
from operators.cli.allocate_gang import find_gang, member_of, member_pods
from operators.cli.allocation_records import nodes_from
from operators.cli.state import build_tracker
from operators.model import NamespacedName
from operators.preemption import gang_preemption as gp
from operators.preemption import preemption as pre
from operators.preemption.gang_preemption import select_gang_victims
from operators.preemption.preemption_inputs import gang_units, running_pods

DRIVER = "gpu.example.com"
NS = "bench"


def world(nodes: int, pods: int, preemptors: int) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [{
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}]
    for n in range(nodes):
        name = f"node-{n:04d}"
        objs.append({"apiVersion": "v1", "kind": "Node",
                     "metadata": {"name": name, "labels": {"rack": f"rack-{n // 16:03d}"}}})
        objs.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                     "metadata": {"name": f"{name}-gpu"},
                     "spec": {"driver": DRIVER, "nodeName": name,
                              "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                              "devices": [{"name": f"gpu-{i}"} for i in range(8)]}})
    for p in range(pods):
        n, i = p % nodes, p // nodes
        node, pod = f"node-{n:04d}", f"run-{p:05d}"
        objs.append(_claim(pod, 1, {"devices": {"results": [
            {"request": "gpu", "driver": DRIVER, "pool": node, "device": f"gpu-{i}"}]}}, pod))
        objs.append(_pod(pod, p % 10, node))
    for k in range(preemptors):
        objs.append(_claim(f"vip-{k}", 8))
        objs.append(_pod(f"vip-{k}", 100, ""))
    objs.append({"apiVersion": "resource.draco.dev/v1alpha1", "kind": "Gang",
                 "metadata": {"name": "team", "namespace": NS, "uid": "u-team"},
                 "spec": {"minCount": 4, "topology": {"nodeLabel": "rack"}}})
    for k in range(4):
        objs.append(_claim(f"team-{k}", 8))
        objs.append(_pod(f"team-{k}", 100, ""))
        objs[-1]["metadata"]["labels"] = {"resource.draco.dev/gang": "team"}
    return objs


def _claim(name: str, count: int, allocation: dict[str, Any] | None = None,
           pod: str = "") -> dict[str, Any]:
    c: dict[str, Any] = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                         "metadata": {"name": name, "namespace": NS, "uid": f"c-{name}"},
                         "spec": {"devices": {"requests": [
                             {"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": count}}]}}}
    if allocation is not None:
        c["status"] = {"allocation": allocation,
                       "reservedFor": [{"resource": "pods", "name": pod, "uid": f"u-{pod}"}]}
    return c


def _pod(name: str, priority: int, node: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"priority": priority, "containers": [{"name": "c", "image": "i"}],
                            "resourceClaims": [{"name": "gpu", "resourceClaimName": name}]}
    if node:
        spec["nodeName"] = node
    else:
        spec["schedulingGates"] = [{"name": "resource.draco.dev/allocation"}]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "uid": f"u-{name}"}, "spec": spec,
            "status": {"phase": "Running" if node else "Pending",
                       "startTime": "2026-01-01T00:00:00Z"}}


def run(quick: bool) -> list[dict[str, Any]]:
    nodes, pods, preemptors = (250, 1250, 10) if quick else (2000, 10000, 50)
    objs = world(nodes, pods, preemptors)
    tracker = build_tracker(objs)
    index = NodeIndex(inventory_from_tracker(tracker), nodes_from(objs, tracker))
    classes = {c.name: c for c in tracker.device_classes()}
    in_use = set(in_use_from_tracker(tracker))
    running = running_pods(tracker)
    units = gang_units(tracker)
    claims = list(tracker.claims())
    started = time.process_time()
    ready = pre.prepare(running, claims)  # once per state, shared by every preemptor
    prepare_s = time.process_time() - started

    def search(k: int, prepared: pre.Prepared | None = ready) -> pre.Preemption:
        pod = tracker.pod(NamespacedName(NS, f"vip-{k}"))
        assert pod is not None
        m = member_of(tracker, pod)
        assert not isinstance(m, str)
        return pre.select_victims(pod, m.pending, m.allocated, running, index, classes, in_use,
                                  claims, (), units, prepared=prepared)

    times = []
    for k in range(preemptors):
        start = time.process_time()
        out = search(k)
        times.append(time.process_time() - start)
        assert out.verdict == "preempt" and len(out.devices) == 8, out.reason
    times.sort()
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
    # baseline: every node searched, no counting check (one preemptor)
    saved = (pre.MIN_CANDIDATES, pre._could_fit)
    pre.MIN_CANDIDATES = 1 << 30
    pre._could_fit = lambda *a: True  # type: ignore[assignment]
    try:
        start = time.process_time()
        search(0, None)
        base = time.process_time() - start
    finally:
        pre.MIN_CANDIDATES, pre._could_fit = saved  # type: ignore[assignment]
    gang_s, gang_out = _gang(objs, tracker, index, classes, in_use, ready, units)
    # baseline: every domain searched and every reprieve by a search
    saved_gang = (gp.CANDIDATE_DOMAINS, gp._Trial.untouched)
    gp.CANDIDATE_DOMAINS = 1 << 30
    gp._Trial.untouched = lambda *a: False  # type: ignore[method-assign]
    try:
        gang_base, _ = _gang(objs, tracker, index, classes, in_use, ready, units)
    finally:
        gp.CANDIDATE_DOMAINS, gp._Trial.untouched = saved_gang  # type: ignore[method-assign]
    return [{"scenario": f"victim search, {nodes * 8} devices, {pods} running claims",
             "draco_s": p99, "baseline_s": base, "ratio": base / p99 if p99 else None,
             "note": f"P99 over {preemptors} preemptors (median {times[len(times) // 2] * 1000:.1f} "
                     f"ms); 8 victims on one node; target P99 < 100 ms; the state's "
                     f"preparation {prepare_s * 1000:.0f} ms, once per state"},
            {"scenario": f"gang victim search (4 x 8 GPUs in one rack), {nodes * 8} devices",
             "draco_s": gang_s, "baseline_s": gang_base, "ratio": gang_base / gang_s if gang_s else None,
             "note": f"{len(gang_out.victims)} victims in {gang_out.domain}; baseline: every rack "
                     "searched, every reprieve a search (no upstream component preempts for a gang)"}]


def _gang(objs: list[dict[str, Any]], tracker: Any, index: NodeIndex, classes: Any,
          in_use: set[Any], ready: pre.Prepared, units: Any) -> tuple[float, pre.Preemption]:
    gang = find_gang(objs, NamespacedName(NS, "team"))
    members = [m for p in member_pods(objs, tracker, gang)
               if not isinstance(m := member_of(tracker, p), str)]
    start = time.process_time()
    out = select_gang_victims(gang, members, index, classes, in_use, ready, (), units, budget_s=120.0)
    took = time.process_time() - start
    assert out.verdict == "preempt" and len(out.devices) == 32, out.reason
    return took, out
