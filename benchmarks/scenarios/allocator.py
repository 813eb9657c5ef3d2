"""Claim allocation in process: 10,000 devices (1,250 nodes x 8), 1,000 claims.

Each claim is placed as `draco allocate` places it without --claim: candidate nodes
tried, all of the claim's requests allocated on one node, KEP-4816 scoring, and the
devices of every earlier claim taken. Three workloads (targets from issue #11):
- one request, one device: >= 200 claims/s;
- `firstAvailable` of 3 whose first subrequest no device satisfies: >= 100 claims/s;
- two requests bound by a `matchAttribute` constraint (NUMA node alternates per
  device, so the first pair on a node fails the constraint): >= 50 claims/s;
- one partition of 1,000 GPUs published as 8 partitions each (8,000 devices, 1,000
  counter sets, issue #22): >= 500 claims/s;
- capacity requests on 1,000 shared devices (rounded to 1Gi steps): >= 300 claims/s.

draco: one device view (inventory + node index + CEL result cache) shared by all claims.
Baseline: the uncached path: the inventory and node index rebuilt and the CEL caches
cleared for every claim (timed on a subset, scaled).
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable
from typing import Any

from operators.allocator import DEFAULT_BUDGET_S, NodeInfo, Shares, inventory_from_tracker
from operators.allocator.nodes import NodeIndex, place
from operators.cel import clear_caches
from operators.cli.state import build_tracker
from operators.model import DeviceClass, DeviceID, ResourceClaim, parse_resource_claim
from operators.tracker import Tracker

DRIVER = "gpu.example.com"
PER_NODE = 8


def node_slice(node: str, name: str, body: dict[str, Any], count: int = 1) -> dict[str, Any]:
    """A ResourceSlice of NODE's pool (named after the node); BODY: its devices or
    sharedCounters."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
            "spec": {"driver": DRIVER, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": count}, **body}}


def cluster(nodes: int) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [{
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}]
    for n in range(nodes):
        name = f"node-{n:04d}"
        objs.append(node_slice(name, f"{name}-gpu", {"devices": [
            {"name": f"gpu-{i}", "attributes": {
                "model": {"string": "A100"}, "index": {"int": i}, "numa": {"int": i % 2}},
             "capacity": {"memory": {"value": "80Gi"}}} for i in range(PER_NODE)]}))
    return objs


def partitioned(nodes: int) -> list[dict[str, Any]]:
    """KEP-4815: per node 8 GPUs of 80Gi, each a counter set, published as 8 partitions
    of 10Gi each (one slice of counter sets, one of 64 partitions)."""
    objs = cluster(0)
    for n in range(nodes):
        name = f"node-{n:04d}"
        objs.append(node_slice(name, f"{name}-counters", {"sharedCounters": [
            {"name": f"gpu-{g}", "counters": {"memory": {"value": "80Gi"}}} for g in range(PER_NODE)]},
            count=2))
        objs.append(node_slice(name, f"{name}-partitions", {"devices": [
            {"name": f"gpu-{g}-part-{p}", "attributes": {"model": {"string": "A100"}},
             "consumesCounters": [{"counterSet": f"gpu-{g}", "counters": {"memory": {"value": "10Gi"}}}]}
            for g in range(PER_NODE) for p in range(PER_NODE)]}, count=2))
    return objs


def shared(nodes: int) -> list[dict[str, Any]]:
    """KEP-5075: per node 8 GPUs of 80Gi that allow multiple allocations, 1Gi steps."""
    objs = cluster(0)
    for n in range(nodes):
        name = f"node-{n:04d}"
        objs.append(node_slice(name, f"{name}-gpu", {"devices": [
            {"name": f"gpu-{i}", "allowMultipleAllocations": True, "attributes": {"model": {"string": "A100"}},
             "capacity": {"memory": {"value": "80Gi", "requestPolicy": {
                 "default": "8Gi", "validRange": {"min": "1Gi", "max": "80Gi", "step": "1Gi"}}}}}
            for i in range(PER_NODE)]}))
    return objs


def capacity_request(i: int) -> ResourceClaim:
    return _claim(i, {"requests": [{"name": "gpu", "exactly": {
        "deviceClassName": "gpu", "capacity": {"requests": {"memory": "9500Mi"}}}}]})


def _sel(expr: str) -> list[dict[str, Any]]:
    return [{"cel": {"expression": expr}}]


def _claim(i: int, devices: dict[str, Any]) -> ResourceClaim:
    return parse_resource_claim({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": f"claim-{i}", "namespace": "bench"}, "spec": {"devices": devices}})


def single(i: int) -> ResourceClaim:
    return _claim(i, {"requests": [{"name": "gpu", "exactly": {
        "deviceClassName": "gpu", "selectors": _sel(f'device.attributes["{DRIVER}"].model == "A100"')}}]})


def first_available(i: int) -> ResourceClaim:
    return _claim(i, {"requests": [{"name": "gpu", "firstAvailable": [
        {"name": "h200", "deviceClassName": "gpu",
         "selectors": _sel(f'device.attributes["{DRIVER}"].model == "H200"')},
        {"name": "a100", "deviceClassName": "gpu",
         "selectors": _sel(f'device.attributes["{DRIVER}"].model == "A100"')},
        {"name": "any", "deviceClassName": "gpu"}]}]})


def match_attribute(i: int) -> ResourceClaim:
    return _claim(i, {
        "requests": [{"name": "a", "exactly": {"deviceClassName": "gpu"}},
                     {"name": "b", "exactly": {"deviceClassName": "gpu"}}],
        "constraints": [{"requests": ["a", "b"], "matchAttribute": f"{DRIVER}/numa"}]})


def nodes_of(count: int) -> list[NodeInfo]:
    return [NodeInfo(f"node-{n:04d}") for n in range(count)]


def allocate_all(tracker: Tracker, nodes: list[NodeInfo], claims: list[ResourceClaim],
                 *, cached: bool) -> int:
    """Place every claim in turn; returns how many were allocated."""
    classes: dict[str, DeviceClass] = {c.name: c for c in tracker.device_classes()}
    in_use: set[DeviceID] = set()
    shares = Shares()
    index = NodeIndex(inventory_from_tracker(tracker), nodes)
    done = 0
    for claim in claims:
        if not cached:
            clear_caches()
            index = NodeIndex(inventory_from_tracker(tracker), nodes)
        placed = place([claim], index, classes, in_use, DEFAULT_BUDGET_S, with_explain=False,
                       shares=shares)
        if placed.allocated:
            done += 1
            for r in placed.outcome.allocations[0].results:
                if r.share_id:
                    shares.add(r.id, r.consumed_capacity.items())
                else:
                    in_use.add(r.id)
    return done


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(quick: bool) -> list[dict[str, Any]]:
    node_count = 250 if quick else 1250
    count = 200 if quick else 1000
    subset = 10 if quick else 20
    plain = build_tracker(cluster(node_count))
    gpu_nodes = count // PER_NODE  # 1,000 GPUs (8,000 partitions) at full size, as issue #22 asks
    parts, sharing = build_tracker(partitioned(gpu_nodes)), build_tracker(shared(gpu_nodes))
    workloads: list[tuple[str, Callable[[int], ResourceClaim], int, int, Tracker, int]] = [
        ("one request", single, 200, 1, plain, node_count),
        ("firstAvailable of 3, first unsatisfiable", first_available, 100, 1, plain, node_count),
        ("matchAttribute across two requests", match_attribute, 50, 2, plain, node_count),
        ("one partition (8 of 10Gi per 80Gi GPU, counter sets)", single, 500, 1, parts, gpu_nodes),
        ("9500Mi shares of 80Gi GPUs (1Gi steps)", capacity_request, 300, 1, sharing, gpu_nodes),
    ]
    rows = []
    for label, make, target, per_claim, tracker, n_nodes in workloads:
        nodes = nodes_of(n_nodes)
        devices = sum(len(v.devices) for v in inventory_from_tracker(tracker) for v in v.slices)
        claims = [make(i) for i in range(count)]
        clear_caches()
        started = time.perf_counter()
        done = allocate_all(tracker, nodes, claims, cached=True)
        draco_s = time.perf_counter() - started
        if done != count:
            raise AssertionError(f"{label}: only {done} of {count} claims allocated")
        started = time.perf_counter()
        allocate_all(tracker, nodes, claims[:subset], cached=False)
        baseline_s = (time.perf_counter() - started) * count / subset
        rate = count / draco_s
        rows.append({
            "scenario": f"allocate {count} claims, {label} ({devices} devices)",
            "draco_s": draco_s, "baseline_s": baseline_s, "ratio": baseline_s / draco_s,
            "claims_per_s": rate, "rss_mb": rss_mb(),
            "note": f"{rate:.0f} claims/s (target >= {target}); {done * per_claim} devices "
                    f"taken; RSS {rss_mb():.0f} MB (target < 300); baseline: inventory, node "
                    f"index and CEL caches rebuilt per claim (timed on {subset}, scaled)"})
    return rows
