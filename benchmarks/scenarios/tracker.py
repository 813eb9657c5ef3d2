"""Tracker scenarios: full build, one-slice update, and memory of the tracked state.

Baseline: a naive tracker that re-derives the whole device view from every stored
slice on each event, which is what an operator without incremental indexes does.
"""

from __future__ import annotations

import copy
import json
import statistics
import subprocess
import sys
import time
from typing import Any

from benchmarks import generate
from operators.model import parse_object
from operators.tracker import Tracker


def _naive_view(slices: dict[str, dict[str, Any]]) -> dict[tuple[str, str, str], Any]:
    view = {}
    for s in slices.values():
        parsed = parse_object(s)
        for dev in parsed.devices:  # type: ignore[attr-defined]
            view[(dev.id.driver, dev.id.pool, dev.id.device)] = dev
    return view


def _timed(fn: Any, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


_MEMORY_PROBE = """
import gc, json, os, sys, tracemalloc
from benchmarks import generate
from operators.tracker import Tracker
nodes, per_node = int(sys.argv[1]), int(sys.argv[2])
slices = generate.cluster(nodes, per_node)
events = [{"type": "ADDED", "object": o} for o in [*slices, *generate.claims_and_pods(slices)]]
gc.collect()
tracemalloc.start()
tracker = Tracker()
with tracker.batch():
    for e in events:
        tracker.apply(e)
del events, slices
gc.collect()
held = tracemalloc.get_traced_memory()[0]
tracemalloc.stop()
rss = int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
print(json.dumps({"grew_mb": held / 2**20, "peak_mb": rss / 2**20}))
"""


def _memory(nodes: int, per_node: int) -> tuple[float, float]:
    """Tracked state of devices + one claim and one running pod per device, measured in
    a fresh interpreter so earlier scenarios do not inflate the peak."""
    out = subprocess.run([sys.executable, "-c", _MEMORY_PROBE, str(nodes), str(per_node)],
                         capture_output=True, text=True, check=True)
    data = json.loads(out.stdout)
    return float(data["grew_mb"]), float(data["peak_mb"])


def run(quick: bool) -> list[dict[str, Any]]:
    nodes, per_node = (20, 128) if quick else (79, 128)  # 79 x 128 = 10,112 devices
    slices = generate.cluster(nodes, per_node)
    events = [{"type": "ADDED", "object": s} for s in slices]

    def build() -> Tracker:
        t = Tracker()
        with t.batch():
            for e in events:
                t.apply(e)
        return t

    stored = {s["metadata"]["name"]: s for s in slices}
    build_s = _timed(build, 3)
    naive_build_s = _timed(lambda: _naive_view(stored), 3)

    tracker = build()
    updated = copy.deepcopy(slices[nodes // 2])
    updates = []
    for i in range(10):
        u = copy.deepcopy(updated)
        u["spec"]["devices"][i]["attributes"]["model"] = {"string": f"patched-{i}"}
        updates.append({"type": "MODIFIED", "object": u})
    it = iter(updates * 3)
    update_s = _timed(lambda: tracker.apply(next(it)), 10)

    def naive_update() -> None:
        stored[updated["metadata"]["name"]] = updated
        _naive_view(stored)

    naive_update_s = _timed(naive_update, 3)

    grew_mb, peak_mb = _memory(nodes, per_node)
    devices = nodes * per_node
    return [
        {"scenario": f"tracker full build, {devices} devices", "draco_s": build_s,
         "baseline_s": naive_build_s, "ratio": naive_build_s / build_s,
         "note": "target < 2 s; baseline: parse every slice into a flat view"},
        {"scenario": f"tracker one 128-device slice update of {devices}", "draco_s": update_s,
         "baseline_s": naive_update_s, "ratio": naive_update_s / update_s,
         "note": "target < 10 ms; baseline: rebuild the whole view"},
        {"scenario": f"tracker state, {devices} devices + claims + pods", "draco_s": None,
         "baseline_s": None, "ratio": None,
         "note": f"tracked state {grew_mb:.0f} MB (tracemalloc); process RSS {peak_mb:.0f} MB "
                 "after dropping the inputs; target < 200 MB"},
    ]
