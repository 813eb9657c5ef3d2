"""CI's end-of-run time split per stage (`tests.timing` writes it, `.ci/budget.py` prints
it beside each stage's build): where the next person looks when a cold run runs long."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from tests.timing import Timings, stage_of

ROOT = Path(__file__).resolve().parents[1]


def test_a_test_belongs_to_the_stage_of_its_group() -> None:
    assert stage_of("tests/e2e/test_x.py::test_a@real-1.37") == "real-1.37"
    assert stage_of("tests/e2e/test_x.py::test_b[v@1]") == "no cluster"  # an id with @ inside
    assert stage_of("tests/cli/test_y.py::test_c") == "no cluster"


def test_each_stage_spans_its_first_start_to_its_last_end() -> None:
    t = Timings()
    t.epoch = 1000.0
    for nodeid, start, stop in [("a::x@real-1.34", 1010, 1020), ("a::y@real-1.34", 1005, 1030),
                                ("b::z@real-node", 1100, 1400), ("c::w", 1000.5, 1003)]:
        t.add(SimpleNamespace(nodeid=nodeid, duration=stop - start, start=start, stop=stop))  # type: ignore[arg-type]
    assert t.stage_windows() == {"no cluster": (0.5, 3.0), "real-1.34": (5.0, 30.0),
                                 "real-node": (100.0, 400.0)}


def test_the_budget_prints_each_stage_beside_its_build(tmp_path: Path) -> None:
    build = [{"stage": "1.34", "component": "kubernetes", "seconds": 800, "ready_at": 1086},
             {"stage": "1.34", "component": "etcd", "seconds": 150, "ready_at": 152},
             {"stage": "node", "component": "runc", "seconds": 55, "ready_at": 2000}]
    tests = {"stage_windows": {"no cluster": [0.5, 300.0], "real-1.34": [900.0, 1500.0],
                               "real-node": [1700.0, 2400.0]}}
    (tmp_path / "build.json").write_text(json.dumps(build))
    (tmp_path / "tests.json").write_text(json.dumps(tests))
    out = subprocess.run(
        [sys.executable, str(ROOT / ".ci" / "budget.py"), "--budget", "5400", "--whole", "2800",
         "--setup", "250", "--static", "110", "--suite", "2400", "--build", str(tmp_path / "build.json"),
         "--tests", str(tmp_path / "tests.json")], capture_output=True, text=True, check=True).stdout
    assert "  real-1.34    built  1086 s, tests  1260 –  1860 s" in out
    assert "  real-node    built  2000 s, tests  2060 –  2760 s" in out
    assert "  no cluster   built     - s, tests   360 –   660 s" in out
