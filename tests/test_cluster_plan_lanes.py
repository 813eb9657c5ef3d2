"""hack/cluster build-all's lanes: CI's background build runs two steps at once, so a
cold run spends less time waiting on downloads and single-threaded links; a step whose
packages another one compiles waits for it; a failure stops the run with its reason."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

HACK = Path(__file__).resolve().parents[1] / "hack"
if str(HACK) not in sys.path:
    sys.path.append(str(HACK))
import cluster_plan  # noqa: E402  (a script's module, stdlib only)
from cluster_plan import Step  # noqa: E402


class Recorder:
    """Fake builds that take a while and note what ran beside what."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running: set[str] = set()
        self.together: set[frozenset[str]] = set()
        self.order: list[str] = []
        self.stamped: set[tuple[str, str]] = set()

    def step(self, stage: str, name: str, after: tuple[str, str] | None = None,
             fails: bool = False) -> Step:
        def build() -> Path:
            with self.lock:
                self.order.append(name)
                for other in self.running:
                    self.together.add(frozenset((name, other)))
                self.running.add(name)
            time.sleep(0.05)
            with self.lock:
                self.running.discard(name)
                if fails:
                    raise RuntimeError(f"{name} failed to build")
                self.stamped.add((name, "v1"))
            return Path("/nonexistent")
        return Step(stage, name, "v1", build, after=after)


def use(monkeypatch: pytest.MonkeyPatch, rec: Recorder, steps: list[Step]) -> None:
    monkeypatch.setattr(cluster_plan, "plan", lambda real_node=True, helm=True: steps)
    monkeypatch.setattr(cluster_plan, "stamp_of",
                        lambda step: {"seconds": 1} if step.key in rec.stamped else None)


def test_two_lanes_build_two_steps_at_once_and_report_in_plan_order(monkeypatch: pytest.MonkeyPatch) -> None:
    rec = Recorder()
    steps = [rec.step("1.34", "etcd"), rec.step("1.34", "kwok"), rec.step("1.37", "kubernetes")]
    use(monkeypatch, rec, steps)
    rows = cluster_plan.build_all(lanes=2)
    assert [row["component"] for row in rows] == ["etcd", "kwok", "kubernetes"]
    assert frozenset(("etcd", "kwok")) in rec.together
    assert all(row["cached"] is False and row["seconds"] == 1 for row in rows)


def test_one_lane_builds_in_plan_order_one_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    rec = Recorder()
    steps = [rec.step("1.34", "etcd"), rec.step("1.34", "kwok"), rec.step("1.37", "kubernetes")]
    use(monkeypatch, rec, steps)
    cluster_plan.build_all(lanes=1)
    assert rec.order == ["etcd", "kwok", "kubernetes"] and not rec.together


def test_a_step_after_another_never_runs_beside_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real node's kubelet compiles most of 1.37's packages: built beside 1.37 they
    would be compiled twice; after it they come from the Go build cache."""
    rec = Recorder()
    steps = [rec.step("1.37", "kubernetes"),
             rec.step("node", "kubernetes-node", after=("kubernetes", "v1")),
             rec.step("node", "containerd")]
    use(monkeypatch, rec, steps)
    cluster_plan.build_all(lanes=2)
    assert frozenset(("kubernetes", "kubernetes-node")) not in rec.together
    assert rec.order.index("kubernetes-node") > rec.order.index("kubernetes")
    assert frozenset(("kubernetes", "containerd")) in rec.together  # the lane did not idle


def test_a_failed_step_fails_the_run_and_starts_nothing_new(monkeypatch: pytest.MonkeyPatch) -> None:
    rec = Recorder()
    steps = [rec.step("1.34", "etcd", fails=True), rec.step("1.34", "kwok"),
             rec.step("1.37", "kubernetes"), rec.step("stack", "kueue")]
    use(monkeypatch, rec, steps)
    with pytest.raises(RuntimeError, match="etcd failed to build"):
        cluster_plan.build_all(lanes=2)
    assert "kueue" not in rec.order
