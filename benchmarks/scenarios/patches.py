"""ResourceSlicePatch merging: 10,000 devices of 20 models, 50 patches with CEL filters.

draco: the tracker with `SlicePatchOverlay`, CEL results cached by the attribute values
each filter reads, re-evaluation limited to what an event touches. Baseline: the same
overlay with the CEL result cache off (`use_cel_cache=False`), i.e. every filter
evaluated for every candidate device.

Targets: full evaluation under 3 s; one 128-device slice update under 50 ms.
"""

from __future__ import annotations

import copy
import time
from typing import Any

from benchmarks.generate import DRIVER, MODELS, cluster
from operators.cel import clear_caches
from operators.tracker import Tracker
from operators.tracker.slice_patches import SlicePatchOverlay

PER_SLICE = 128
PATCHES = 50


def patches(count: int = PATCHES) -> list[dict[str, Any]]:
    """Filters shaped like real admin patches: by model, model family, driver version."""
    out = []
    for i in range(count):
        model = MODELS[i % len(MODELS)][0]
        family = model.split("-")[0]
        kind = i % 5
        if kind == 0:
            expr = f'device.attributes["{DRIVER}"].model == "{model}"'
        elif kind == 1:
            expr = f'device.attributes["{DRIVER}"].model.startsWith("{family}")'
        elif kind == 2:
            expr = (f'device.attributes["{DRIVER}"].model == "{model}" && '
                    f'device.attributes["{DRIVER}"].driverVersion.isGreaterThan(semver("550.0.0"))')
        elif kind == 3:
            expr = (f'device.attributes["{DRIVER}"].model in ["{model}", "H100-SXM"] && '
                    f'device.capacity["{DRIVER}"].memory.compareTo(quantity("32Gi")) >= 0')
        else:
            expr = f'device.attributes["{DRIVER}"].model.matches("^{family}")'
        out.append({
            "apiVersion": "resource.draco.dev/v1alpha1",
            "kind": "ResourceSlicePatch",
            "metadata": {"name": f"patch-{i:02d}", "generation": 1,
                         "creationTimestamp": f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}Z"},
            "spec": {"devices": {
                "filter": {"driver": DRIVER, "selectors": [{"cel": {"expression": expr}}]},
                "priority": i % 3,
                "attributes": {
                    "example.com/family": {"string": family},
                    f"example.com/p{i:02d}": {"bool": True},
                },
                "capacity": {f"{DRIVER}/memory": {"value": f"{(i % 4 + 1) * 10}Gi"}},
            }},
        })
    return out


def _slices(devices: int) -> list[dict[str, Any]]:
    full, rest = divmod(devices, PER_SLICE)
    slices = cluster(full, PER_SLICE)
    if rest:
        slices += cluster(1, rest, seed=2)[:1]
        slices[-1]["metadata"]["name"] = "node-tail-" + DRIVER
        slices[-1]["spec"]["pool"]["name"] = "node-tail"
    return slices


def _build(slices: list[dict[str, Any]], objs: list[dict[str, Any]], cached: bool
           ) -> tuple[Tracker, SlicePatchOverlay, float, float]:
    """(tracker, overlay, seconds to load slices, seconds to evaluate all patches)."""
    clear_caches()
    tracker = Tracker()
    overlay = SlicePatchOverlay(use_cel_cache=cached)
    tracker.register_overlay(overlay)
    started = time.perf_counter()
    with tracker.batch():
        for s in slices:
            tracker.apply({"type": "ADDED", "object": s})
    loaded = time.perf_counter()
    with tracker.batch():
        for p in objs:
            tracker.apply({"type": "ADDED", "object": p})
    return tracker, overlay, loaded - started, time.perf_counter() - loaded


def _updated(s: dict[str, Any]) -> dict[str, Any]:
    """The driver republishes the slice: new generation, a new model on half the devices."""
    new = copy.deepcopy(s)
    new["spec"]["pool"]["generation"] += 1
    for i, d in enumerate(new["spec"]["devices"]):
        if i % 2:
            d["attributes"]["model"] = {"string": MODELS[(i // 2) % len(MODELS)][0]}
    return new


def _update(tracker: Tracker, s: dict[str, Any]) -> float:
    started = time.perf_counter()
    tracker.apply({"type": "MODIFIED", "object": s})
    return time.perf_counter() - started


def run(quick: bool) -> list[dict[str, Any]]:
    devices = 2_000 if quick else 10_000
    slices = _slices(devices)
    objs = patches()
    rows: list[dict[str, Any]] = []

    tracker, overlay, load_s, eval_s = _build(slices, objs, cached=True)
    matched = sum(r.matched_devices for r in overlay.reports())
    patched = sum(1 for v in tracker.devices() if v.patched_by)
    assert patched and not overlay.error_records()
    victim = slices[len(slices) // 2]
    update_s = _update(tracker, _updated(victim))

    # Baseline: same work without the CEL result cache; the full evaluation is timed on
    # a fifth of the devices in the full run (scaled, see note) to keep the run short.
    base_devices = devices if quick else devices // 5
    base_slices = slices if quick else _slices(base_devices)
    b_tracker, b_overlay, _, b_eval_s = _build(base_slices, objs, cached=False)
    scale = devices / base_devices
    b_update_s = _update(b_tracker, _updated(base_slices[len(base_slices) // 2]))
    if not quick:
        b_matched = sum(r.matched_devices for r in b_overlay.reports())
        assert b_matched > 0

    rows.append({
        "scenario": f"patches: evaluate {PATCHES} patches over {devices} devices",
        "draco_s": eval_s,
        "baseline_s": b_eval_s * scale,
        "ratio": b_eval_s * scale / eval_s if eval_s else None,
        "note": f"target < 3 s; {matched} matches, {patched} devices patched; loading the "
                f"slices took {load_s:.2f} s; baseline uncached"
                + ("" if scale == 1 else f", measured on {base_devices} devices x{scale:g}"),
    })
    rows.append({
        "scenario": f"patches: re-evaluate one {PER_SLICE}-device slice update",
        "draco_s": update_s,
        "baseline_s": b_update_s,
        "ratio": b_update_s / update_s if update_s else None,
        "note": "target < 50 ms; new pool generation, half the devices change model; "
                "baseline uncached",
    })
    return rows
