"""Where the suite's time goes: a closing section with the time per test directory, the
30 slowest tests (setup, call and teardown together, so a cluster's start counts for
the first test that needs it), how long the workers waited for builds still running in
the background (`.ci/run`; outside the tests' own times) and every cluster `hack/cluster
up` started.

`DRACO_TEST_TIMINGS=FILE` also writes the figures as JSON, which `.ci/run` reads for its
budget line. The cluster starts come from `DRACO_CLUSTER_STARTS`, a file `hack/cluster
up` appends to; the suite points it at a file of its own when it is not set.
"""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

SLOWEST = 30


def stage_of(nodeid: str) -> str:
    """The test's xdist group (`…@real-1.37` -> `real-1.37`): one per stage of the build."""
    _, at, group = nodeid.rpartition("@")
    return group if at and group.startswith("real-") else "no cluster"


class Timings:
    def __init__(self) -> None:
        self.per_test: dict[str, float] = defaultdict(float)
        self.started = time.monotonic()
        self.epoch = time.time()
        self.windows: dict[str, list[float]] = {}  # stage -> [first start, last stop] (epoch)

    def add(self, report: pytest.TestReport) -> None:
        self.per_test[report.nodeid] += report.duration
        start, stop = float(getattr(report, "start", 0) or 0), float(getattr(report, "stop", 0) or 0)
        if start and stop:
            window = self.windows.setdefault(stage_of(report.nodeid), [start, stop])
            window[0], window[1] = min(window[0], start), max(window[1], stop)

    def stage_windows(self) -> dict[str, tuple[float, float]]:
        """Per stage, when its first test started and its last ended, in seconds from the
        suite's start, in the order the stages ran."""
        out = {stage: (round(a - self.epoch, 1), round(b - self.epoch, 1))
               for stage, (a, b) in self.windows.items()}
        return dict(sorted(out.items(), key=lambda kv: kv[1]))

    def per_directory(self) -> dict[str, float]:
        totals: dict[str, float] = defaultdict(float)
        for nodeid, seconds in self.per_test.items():
            path = nodeid.split("::", 1)[0]
            parts = path.split("/")
            totals["/".join(parts[:2]) if len(parts) > 2 else path] += seconds
        return dict(sorted(totals.items(), key=lambda kv: -kv[1]))

    def slowest(self) -> list[tuple[str, float]]:
        return sorted(self.per_test.items(), key=lambda kv: -kv[1])[:SLOWEST]


def _records() -> list[dict[str, Any]]:
    path = os.environ.get("DRACO_CLUSTER_STARTS")
    if not path:
        return []
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        return []
    return [json.loads(line) for line in lines if line.strip()]


def cluster_starts() -> list[dict[str, Any]]:
    """What each `hack/cluster up` of the run recorded."""
    return [r for r in _records() if r.get("kind") != "build-wait"]


def build_waits() -> list[dict[str, Any]]:
    """How long each worker waited for the builds of a stage before its first test."""
    return [r for r in _records() if r.get("kind") == "build-wait"]


def record_build_wait(stage: str, seconds: float) -> None:
    path = os.environ.get("DRACO_CLUSTER_STARTS")
    if path:
        with open(path, "a") as out:  # one short line: appends of workers do not interleave
            out.write(json.dumps({"kind": "build-wait", "stage": stage,
                                  "seconds": round(seconds, 1)}) + "\n")


def configure(config: pytest.Config) -> None:
    if not os.environ.get("DRACO_CLUSTER_STARTS"):
        # hack/cluster up runs in subprocesses (and xdist workers inherit it too).
        base = Path(os.environ.get("TMPDIR", "/tmp"))
        os.environ["DRACO_CLUSTER_STARTS"] = str(base / f"draco-cluster-starts-{os.getpid()}.jsonl")
    global _current
    _current = Timings()


_current: Timings | None = None


def record(report: pytest.TestReport) -> None:
    if _current is not None:
        _current.add(report)


def summary(terminalreporter: Any, config: pytest.Config) -> None:
    timings = _current
    if timings is None or not timings.per_test or hasattr(config, "workerinput"):
        return
    write = terminalreporter.write_line
    terminalreporter.section("where the time went")
    write("time per test directory (setup + call + teardown):")
    for directory, seconds in timings.per_directory().items():
        write(f"  {seconds:8.1f} s  {directory}")
    write(f"the {SLOWEST} slowest tests:")
    for nodeid, seconds in timings.slowest():
        write(f"  {seconds:8.1f} s  {nodeid}")
    write("when each stage's tests ran (seconds from the suite's start):")
    for stage, (first, last) in timings.stage_windows().items():
        write(f"  {first:7.0f} – {last:7.0f} s  {stage}")
    starts = cluster_starts()
    waits = build_waits()
    waited = sum(float(w["seconds"]) for w in waits)
    each = ", ".join(f"{w['stage']} {w['seconds']:.0f} s" for w in waits if w["seconds"] >= 1)
    write(f"waited for the test bed's builds: {waited:.0f} s in all" + (f" ({each})" if each else ""))
    write(f"clusters started: {len(starts)} ({sum(float(s.get('start', 0)) for s in starts):.0f} s "
          "starting)")
    for start in starts:
        write(f"  {start['k8s']}{' + real node' if start.get('real_node') else ''}: "
              f"{start['start']} s  {start['dir']}")
    out = os.environ.get("DRACO_TEST_TIMINGS")
    if out:
        Path(out).write_text(json.dumps({
            "wall": round(time.monotonic() - timings.started, 1),
            "per_directory": timings.per_directory(), "slowest": timings.slowest(),
            "cluster_starts": starts, "build_waits": waits, "stage_windows": timings.stage_windows(),
        }, indent=1) + "\n")
