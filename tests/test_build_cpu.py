"""The build table's CPU column: on a machine shared with other work a build step's wall
time says as much about the others as about the step, so each step also records the CPU
seconds its processes used (the go command and every compile and link it waited for),
counted per build lane."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

HACK = Path(__file__).resolve().parents[1] / "hack"
if str(HACK) not in sys.path:
    sys.path.append(str(HACK))
import cluster_build  # noqa: E402  (a script's module, stdlib only)
import cluster_plan  # noqa: E402

# about 0.4 s of CPU in a process the child waits for, as the go command waits for compile
BUSY = [sys.executable, "-c",
        "import subprocess, sys; subprocess.run([sys.executable, '-c', "
        "'import time\\nend = time.process_time() + 0.4\\nwhile time.process_time() < end: pass'],"
        " check=True); print('done'); sys.exit(3)"]


def test_a_run_is_charged_with_its_own_and_its_childrens_cpu() -> None:
    before = cluster_build.cpu_charged()
    returncode, output = cluster_build.run_counted(BUSY, None, None, subprocess.PIPE)
    assert returncode == 3 and output == b"done\n"
    assert cluster_build.cpu_charged() - before >= 0.35


def test_another_lanes_run_is_not_charged_to_this_one() -> None:
    before = cluster_build.cpu_charged()
    other: list[float] = []

    def lane() -> None:
        cluster_build.run_counted(BUSY, None, None, subprocess.DEVNULL)
        other.append(cluster_build.cpu_charged())

    thread = threading.Thread(target=lane)
    thread.start()
    thread.join()
    assert other[0] >= 0.35 and cluster_build.cpu_charged() == before


def test_a_built_step_reports_its_cpu_and_the_total(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DRACO_CLUSTER_CACHE", str(tmp_path))

    def build(work: Path, out: Path, log: Path) -> None:
        with open(log, "a") as handle:
            cluster_build.run_counted(BUSY, work, None, handle)

    cluster_build.build_component("busy", "v1", build)
    step = cluster_plan.Step("1.34", "busy", "v1", lambda: Path())
    stamp = cluster_plan.stamp_of(step)
    assert stamp is not None and stamp["cpu_seconds"] in (0, 1)  # 0.4 s of CPU, rounded
    rows = [{"stage": "1.34", "component": "busy", "version": "v1", "cached": False,
             "seconds": 9, "cpu_seconds": 14, "ready_at": 9},
            {"stage": "1.37", "component": "old", "version": "v2", "cached": False,
             "seconds": 5, "cpu_seconds": None, "ready_at": 14},
            {"stage": "1.36", "component": "warm", "version": "v3", "cached": True,
             "seconds": 0, "cpu_seconds": 0, "ready_at": 0}]
    table = cluster_plan.report(rows).splitlines()
    assert table[0].split() == ["stage", "component", "version", "build", "s", "CPU", "s", "ready", "at", "s"]
    assert table[1].split() == ["1.34", "busy", "v1", "9", "14", "9"]
    assert table[2].split() == ["1.37", "old", "v2", "5", "-", "14"]  # stamped before the count
    assert table[3].split() == ["1.36", "warm", "v3", "cached", "0"]
    assert "2 of 3 built in this run (14 s of builds, 14 CPU-s)" in table[4]
