"""The end of `.ci/run`: the run's time against CI's budget, and where it went.

Prints the phases (setup, static checks, the suite, with the background build beside
them), the build table of `hack/cluster build-all`, the time per test directory and the
cluster starts the suite made. Past WARN_WARM seconds on a warm cache (nothing was
built) it warns and names the slowest parts; it never fails the run, since a noisy
machine must not block a landing. Standard library only.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

WARN_WARM = 30 * 60


def load(path: str) -> Any:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def main() -> int:
    parser = argparse.ArgumentParser()
    for name in ("budget", "whole", "setup", "static", "suite"):
        parser.add_argument(f"--{name}", type=int, required=True)
    parser.add_argument("--build", required=True, help="hack/cluster build-all --json's file")
    parser.add_argument("--tests", required=True, help="the suite's DRACO_TEST_TIMINGS file")
    args = parser.parse_args()

    build = load(args.build) or []
    tests = load(args.tests) or {}
    built = [row for row in build if not row.get("cached")]
    warm = bool(build) and not built
    build_ready = max((int(row.get("ready_at", 0)) for row in build), default=0)
    print("\n==> time against the budget")
    print(f"setup {args.setup} s, static checks {args.static} s, suite {args.suite} s "
          f"(the test bed's build ran beside them: {sum(int(r['seconds']) for r in built)} s "
          f"of builds using {sum(int(r.get('cpu_seconds') or 0) for r in built)} CPU-s, "
          f"all ready {build_ready} s after the start; cache "
          f"{'warm' if warm else 'cold' if len(built) == len(build) else 'partly warm'})")
    starts = tests.get("cluster_starts") or []
    waited = sum(float(w.get("seconds", 0)) for w in tests.get("build_waits") or [])
    print(f"clusters started by the suite: {len(starts)}, "
          f"{sum(float(s.get('start', 0)) for s in starts):.0f} s starting; the suite's workers "
          f"waited {waited:.0f} s in all for builds")
    windows = tests.get("stage_windows") or {}
    if windows:
        # the suite starts after setup and the static checks; the build, at the run's start
        offset = args.setup + args.static
        ready: dict[str, int] = {}
        for row in build:
            stage = str(row.get("stage", ""))
            ready[stage] = max(ready.get(stage, 0), int(row.get("ready_at", 0)))
        print("each stage, from the run's start: its builds ready, its tests' first start and "
              "last end")
        for stage, (first, last) in windows.items():
            built_at = ready.get(stage.removeprefix("real-"))
            shown = f"{built_at:5d}" if built_at is not None else "    -"
            print(f"  {stage:<12} built {shown} s, tests {offset + first:5.0f} – {offset + last:5.0f} s")
    share = 100 * args.whole / args.budget
    print(f"whole run: {args.whole} s = {minutes(args.whole)} of the {minutes(args.budget)} "
          f"budget ({share:.0f} %)")
    if warm and args.whole > WARN_WARM:
        print(f"WARNING: a warm run took {minutes(args.whole)}, past {minutes(WARN_WARM)}; "
              "the next addition may push a cold run over the budget. The slowest parts:")
        for directory, seconds in list((tests.get("per_directory") or {}).items())[:5]:
            print(f"  {seconds:7.0f} s  {directory}")
        for nodeid, seconds in (tests.get("slowest") or [])[:10]:
            print(f"  {seconds:7.0f} s  {nodeid}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
