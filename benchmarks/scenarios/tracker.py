"""Tracker scenarios: full build, one-slice update, and memory of the tracked state.

Baseline: a naive tracker that re-derives the whole device view from every stored
slice on each event, which is what an operator without incremental indexes does.
"""

from __future__ import annotations

import copy
import gc
import resource
import statistics
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

    # Memory: devices plus one claim and one running pod per device.
    gc.collect()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    full = Tracker()
    with full.batch():
        for e in events:
            full.apply(e)
        for obj in generate.claims_and_pods(slices):
            full.apply({"type": "ADDED", "object": obj})
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
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
         "note": f"peak RSS {after / 1024:.0f} MB (grew {max(after - before, 0) / 1024:.0f} MB); target < 200 MB"},
    ]
