"""The order the suite runs in: the tests that need no cluster first, then the real-cluster
modules in the order `hack/cluster build-all` builds what they start (STAGES).

In `.ci/run` the test bed is still being built in the background while the suite starts:
this order lets the unit and embedded-server tests run beside the Go builds, and each
real cluster's tests run as soon as its build is stamped while the next one builds.
A module with a module-scoped fixture moves as a whole (by the latest stage any of its
tests needs), so that fixture is set up once; inside a stage the collection order is kept.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests import timing

HACK = Path(__file__).resolve().parents[1] / "hack"


if str(HACK) not in sys.path:
    sys.path.append(str(HACK))
import cluster_plan  # noqa: E402  (a script's module, stdlib only)

STAGES = tuple(cluster_plan.STAGES)
# The fixtures that start (a namespace of) one release's cluster.
RELEASE_FIXTURES = {
    "1.34": ("real_cluster", "real"),
    "1.35": ("real_cluster_135", "real_135"),
    "1.36": ("real_cluster_136", "real_136", "private_136"),
    "1.37": ("real_cluster_137", "real_137", "private_137", "private_137_workloads"),
    "1.38": ("real_cluster_138", "real_138"),
}
# What a test needs, read from the fixtures it requests (their closure): a release's
# while the plan builds it (the on-request releases' fixtures build theirs themselves).
FIXTURE_STAGE = {
    **{fixture: k8s for k8s, fixtures in RELEASE_FIXTURES.items() if k8s in STAGES
       for fixture in fixtures},
    "draco_image": "node",
    "stack_cluster_137": "stack", "stack_137": "stack",  # Kueue and JobSet on a 1.37 of their own
}
# An on-request release's fixture -> the marker its tests carry (deselected by default).
ON_REQUEST_MARK = {fixture: mark for k8s, mark in cluster_plan.ON_REQUEST.items()
                   for fixture in RELEASE_FIXTURES[k8s]}
# Modules that start clusters through hack/cluster themselves, not through a fixture.
MODULE_STAGE = {"test_real_node.py": "node", "test_real_node_lifecycle.py": "node",
                "test_hack_cluster.py": "1.34", "test_upstream_suite.py": "upstream"}


def _uses_helm(item: pytest.Item) -> bool:
    module = getattr(item, "module", None)
    return module is not None and any(
        getattr(value, "__module__", None) == "tests.chart.helm" for value in vars(module).values())


def needed_stage(item: pytest.Item) -> str | None:
    """The latest build stage ITEM needs (None: no build at all)."""
    needed = ["helm"] if _uses_helm(item) else []
    if item.get_closest_marker("real") is not None:
        needed += [FIXTURE_STAGE[name] for name in getattr(item, "fixturenames", ())
                   if name in FIXTURE_STAGE]
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("backend") == "real":
            needed.append("1.34")  # the `backend` fixture asks for real_cluster at run time
        if callspec is not None:  # a fixture parametrized by the cluster fixture it asks for
            needed += [FIXTURE_STAGE[v] for v in callspec.params.values()
                       if isinstance(v, str) and v.startswith("real_") and v in FIXTURE_STAGE]
        needed.append(MODULE_STAGE.get(item.path.name, "1.34"))
    return max(needed, key=STAGES.index, default=None)


def mark_on_request(items: list[pytest.Item]) -> None:
    """Give a real-cluster test on an on-request release (`cluster_plan.ON_REQUEST`)
    that release's marker, so the default run (`addopts`) leaves it out and `pytest -m
    MARKER` runs it: read from its fixtures, so a new 1.36 test is never built for in
    every run by accident."""
    for item in items:
        if item.get_closest_marker("real") is None:
            continue
        names = set(getattr(item, "fixturenames", ()))
        callspec = getattr(item, "callspec", None)
        if callspec is not None:
            names |= {v for v in callspec.params.values() if isinstance(v, str)}
        for mark in sorted({ON_REQUEST_MARK[n] for n in names if n in ON_REQUEST_MARK}):
            if item.get_closest_marker(mark) is None:
                item.add_marker(getattr(pytest.mark, mark))


def item_stage(item: pytest.Item) -> int:
    """0 for a test that needs no cluster, else 1 + the index of its latest stage."""
    if item.get_closest_marker("real") is None:
        return 0
    return 1 + STAGES.index(needed_stage(item) or "1.34")


def _module_scoped(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    definitions = info.name2fixturedefs.values() if info is not None else ()
    return any(d.scope == "module" for defs in definitions for d in defs)


def order(items: list[pytest.Item]) -> None:
    """Sort ITEMS in place by stage (stable: collection order within a stage), and put
    each stage's real-cluster tests in one xdist group: with `-n 2 --dist loadgroup` one
    worker runs a stage's tests one after another on that stage's clusters (started
    once per worker), while the other runs the tests that need no cluster, or the next
    stage; the real node's stage (one per machine) is never split."""
    stage = {id(item): item_stage(item) for item in items}
    together: dict[Path, int] = {}
    for item in items:
        if _module_scoped(item):
            together[item.path] = max(together.get(item.path, 0), stage[id(item)])
    for item in items:
        key = together.get(item.path, stage[id(item)])
        stage[id(item)] = key
        if key > 0:
            item.add_marker(pytest.mark.xdist_group(f"real-{STAGES[key - 1]}"))
    items.sort(key=lambda item: stage[id(item)])


_ready = -1  # the index in STAGES up to which the builds are known to be done
_failed: set[str] = set()


def wait_for_builds(item: pytest.Item, say: Callable[[str], None]) -> None:
    """Build, or wait for the background build of, what ITEM needs: before the test's
    timeout starts, since a cold build takes longer than any one test may. A failed build
    is said once; the cluster fixture then fails the tests with its reason."""
    global _ready
    stage = needed_stage(item)
    if stage is None or STAGES.index(stage) <= _ready or stage in _failed:
        return
    started = time.monotonic()
    proc = subprocess.run([sys.executable, str(HACK / "cluster"), "build-all", "--upto", stage],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    took = time.monotonic() - started
    if proc.returncode != 0:
        _failed.add(stage)
        say(f"hack/cluster build-all --upto {stage} failed ({took:.0f} s):\n{proc.stderr[-3000:]}")
        return
    _ready = STAGES.index(stage)
    timing.record_build_wait(stage, took)
    if took >= 5:
        say(f"waited {took:.0f} s for the test bed's builds up to {stage}")


def schedule(config: pytest.Config) -> None:
    """With a cold cache, keep xdist from starting the biggest groups first (its default):
    the real-cluster groups would then wait for their builds while the tests that need
    no cluster, which could run beside the build, wait behind them. With everything
    built, biggest first is the shorter run."""
    if config.getoption("dist", "no") == "loadgroup" and not hasattr(config, "workerinput"):
        real_node = os.geteuid() == 0  # the real node's tests need root; so does its build
        if not cluster_plan.all_built(real_node=real_node):
            config.option.loadscopereorder = False
