"""Run draco's benchmark scenarios: `python -m benchmarks [--quick] [--only NAME…]`.

Every scenario times draco's path and a naive baseline in the same run and reports the
ratio, so figures from different machines compare as ratios rather than seconds.
"""

from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
import platform
import sys
import time
from pathlib import Path
from typing import Any

import benchmarks.scenarios as scenarios_pkg


def discover() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(scenarios_pkg.__path__))


def explicit_only(name: str) -> bool:
    """Scenarios that build and start real clusters run only when named with --only."""
    return bool(getattr(importlib.import_module(f"benchmarks.scenarios.{name}"),
                        "EXPLICIT_ONLY", False))


def format_table(rows: list[dict[str, Any]]) -> str:
    headers = ("scenario", "draco", "baseline", "ratio", "note")
    cells = [list(headers)] + [
        [
            str(r["scenario"]),
            "-" if r.get("draco_s") is None else f"{r['draco_s'] * 1000:.1f} ms",
            "-" if r.get("baseline_s") is None else f"{r['baseline_s'] * 1000:.1f} ms",
            "-" if r.get("ratio") is None else f"{r['ratio']:.1f}x",
            str(r.get("note", "")),
        ]
        for r in rows
    ]
    widths = [max(len(c[i]) for c in cells) for i in range(len(headers))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
                     for row in cells)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    parser.add_argument("--only", action="append", default=[], metavar="NAME",
                        help=f"run only this scenario module (repeatable): {', '.join(discover())}")
    parser.add_argument("--json", default="benchmarks/results/latest.json", metavar="PATH",
                        help="where to write the JSON results")
    args = parser.parse_args(argv)
    names = args.only or [n for n in discover() if not explicit_only(n)]
    unknown = sorted(set(names) - set(discover()))
    if unknown:
        parser.error(f"unknown scenario module(s): {', '.join(unknown)}")
    rows: list[dict[str, Any]] = []
    for name in names:
        module = importlib.import_module(f"benchmarks.scenarios.{name}")
        started = time.perf_counter()
        for row in module.run(args.quick):
            row.setdefault("module", name)
            rows.append(row)
        print(f"# {name}: {time.perf_counter() - started:.1f} s", file=sys.stderr)
    print(format_table(rows))
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "python": platform.python_version(), "machine": platform.machine(),
        "quick": args.quick, "rows": rows,
    }, indent=2) + "\n")
    print(f"\nwrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
