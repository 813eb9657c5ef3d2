"""Kueue's devices check in process (`--only admission`): 2,000 nodes x 8 GPUs (16,000
devices, racks of 16 nodes), 200 pending Workloads of 4-32 pods x 2 GPUs, decided one
after another as the admission controller decides them (each `ready` verdict's devices
reserved before the next Workload is looked at).

Figures: the check latency per Workload (P50, P99, max; target P99 < 200 ms), how the
queue ended (ready / retry / rejected) and how many devices were reserved; a device
reserved for two Workloads fails the run. No baseline: Kueue itself never matches
devices (its DRA support counts them against quota).
"""

from __future__ import annotations

import random
import time
from typing import Any

from operators.admission.decide import decide, empty_view
from operators.admission.workload import parse_workload
from operators.allocator import inventory_from_tracker
from operators.allocator.nodes import NodeIndex
from operators.allocator.reserved import Reserved
from operators.cli.allocation_records import nodes_from
from operators.cli.state import build_tracker
from operators.model import DeviceID
from tests.admission.kueue import gpu_template, pod_set, workload
from tests.gangs.world import classes, gpus, node, node_slice


def _percentile(sorted_s: list[float], q: float) -> float:
    return sorted_s[min(len(sorted_s) - 1, int(q * len(sorted_s)))]


def run(quick: bool) -> list[dict[str, Any]]:
    n_nodes, n_workloads = (200, 20) if quick else (2000, 200)
    rng = random.Random(7)
    template = gpu_template(count=2)
    objs: list[dict[str, Any]] = [*classes(), template]
    for i in range(n_nodes):
        name = f"n-{i:04d}"
        objs += [node(name, **{"example.com/rack": f"r{i // 16}"}), *node_slice(name, gpus(8))]
    tracker = build_tracker(objs)
    index = NodeIndex(inventory_from_tracker(tracker), nodes_from(objs, tracker))
    empty = empty_view(index)
    device_classes = {c.name: c for c in tracker.device_classes()}
    reserved: set[DeviceID] = set()
    latencies: list[float] = []
    states: dict[str, int] = {}
    cpu_started = time.process_time()
    for w in range(n_workloads):
        wl = parse_workload(workload(f"w{w}", [pod_set("workers", rng.randint(4, 32),
                                                        templates={"gpu": "gpu"})]))
        started = time.perf_counter()
        verdict = decide(wl, index, device_classes, Reserved(frozenset(), frozenset(reserved)),
                         templates={"gpu": template}, claims=tracker.claim,
                         gangs=lambda ns, name: None, empty=empty)
        latencies.append(time.perf_counter() - started)
        states[verdict.status] = states.get(verdict.status, 0) + 1
        if verdict.status == "ready":
            twice = verdict.devices & reserved
            if twice:
                raise AssertionError(f"devices reserved for two Workloads: {sorted(map(str, twice))[:5]}")
            reserved |= verdict.devices
    cpu = time.process_time() - cpu_started
    latencies.sort()
    p50, p99 = _percentile(latencies, 0.5), _percentile(latencies, 0.99)
    verdicts = ", ".join(f"{n} {s}" for s, n in sorted(states.items()))
    return [{
        "scenario": f"admission check: {n_workloads} Workloads of 4-32 pods x 2 GPUs, "
                    f"{n_nodes} nodes x 8 GPUs",
        "draco_s": p99, "baseline_s": None, "ratio": None,
        "note": (f"P99 per Workload (target < 200 ms); P50 {p50 * 1000:.0f} ms, max "
                 f"{latencies[-1] * 1000:.0f} ms; {verdicts}; {len(reserved)} devices reserved, "
                 f"none twice; whole queue {cpu:.1f} s CPU"),
    }]
