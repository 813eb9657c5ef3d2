"""CEL selection: 10,000 devices of 20 models, selected by model.

draco: compiled selector with its result cache keyed by the attribute values the
expression reads (20 evaluations). Baseline: the same compiled selector evaluated for
every device (`use_cache=False`), i.e. what evaluating per device costs.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from operators.cel import clear_caches, compile_selector, stats
from operators.model.values import Attribute

DRIVER = "gpu.example.com"


@dataclass(frozen=True)
class _Device:
    driver: str
    attributes: Mapping[str, Attribute] = field(default_factory=dict)
    capacity: Mapping[str, str] = field(default_factory=dict)
    allow_multiple_allocations: bool = False


def _devices(count: int, models: int) -> list[_Device]:
    return [
        _Device(
            driver=DRIVER,
            attributes={
                f"{DRIVER}/model": Attribute("string", f"model-{i % models}"),
                f"{DRIVER}/uuid": Attribute("string", f"GPU-{i:08d}"),
                f"{DRIVER}/index": Attribute("int", i % 8),
                f"{DRIVER}/driverVersion": Attribute("version", f"1.{i % models}.0"),
                f"{DRIVER}/pcieRoot": Attribute("string", f"pci{i % 4}"),
                "numa.example.com/node": Attribute("int", i % 2),
            },
            capacity={f"{DRIVER}/memory": "80Gi", f"{DRIVER}/cores": "108"},
        )
        for i in range(count)
    ]


def _select(expression: str, devices: list[_Device], use_cache: bool) -> tuple[float, int]:
    clear_caches()
    stats.reset()
    started = time.perf_counter()
    selector = compile_selector(expression)
    matched = sum(1 for d in devices if selector.evaluate(d, use_cache=use_cache).matched)
    return time.perf_counter() - started, matched


def run(quick: bool) -> list[dict[str, Any]]:
    count = 2_000 if quick else 10_000
    devices = _devices(count, models=20)
    rows: list[dict[str, Any]] = []
    for label, expression in (
        ("by model", f'device.attributes["{DRIVER}"].model == "model-7"'),
        ("model + memory", f'device.attributes["{DRIVER}"].model == "model-7" && '
                           f'device.capacity["{DRIVER}"].memory.isGreaterThan(quantity("40Gi"))'),
    ):
        cached_s, cached_matches = _select(expression, devices, use_cache=True)
        evaluations = stats.evaluations
        uncached_s, uncached_matches = _select(expression, devices, use_cache=False)
        assert cached_matches == uncached_matches == count // 20
        rows.append({
            "scenario": f"cel: select {count} devices of 20 models {label}",
            "draco_s": cached_s,
            "baseline_s": uncached_s,
            "ratio": uncached_s / cached_s if cached_s else float("inf"),
            "note": f"cached: {evaluations} evaluations; baseline: {count} "
                    f"({uncached_s / count * 1e6:.0f} us each)",
        })
    return rows
