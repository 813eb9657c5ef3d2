"""The chaos run, long (`python -m benchmarks --only chaos`; the short one is
tests/e2e/test_chaos_real.py): a 1.37 cluster of its own with 4 kwok nodes x 8 GPUs,
two `draco run --leader-elect` replicas with every controller and preemption, four
minutes of work (20 gangs of 2-8 members with node-label and device-attribute topology,
40 single gated pods, 10 preemptors, NoExecute rules, health signals, jobs ending),
the leader SIGKILLed 8 times at random moments and the kube-apiserver restarted once.
Reports the decisions draco made, the kills, the recoveries (kill -> a new leader ready)
at P50/P99 and every invariant that broke (tests/chaos/invariants.py).

`DRACO_CHAOS_SEED=N` replays a plan; `--quick` runs the short size on 2 nodes.
"""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.scenarios.cluster import start_cluster
from tests.chaos import invariants as inv
from tests.chaos.harness import Chaos
from tests.chaos.workload import Size
from tests.e2e.backends import RealBackend

EXPLICIT_ONLY = True
LONG = Size(duration=240, gangs=20, singles=40, preemptors=10, rules=5, signals=5, kills=8,
            apiserver_restarts=1, finish_every=6)
QUICK = Size(duration=36, gangs=5, singles=8, preemptors=3, rules=1, signals=1, kills=3,
             apiserver_restarts=1, finish_every=6)


def run(quick: bool) -> list[dict[str, Any]]:
    seed = int(os.environ.get("DRACO_CHAOS_SEED") or random.randrange(1 << 30))
    print(f"chaos seed {seed}", file=sys.stderr)
    size, nodes = (QUICK, 2) if quick else (LONG, 4)
    workdir = Path(tempfile.mkdtemp(prefix="draco-bench-chaos-"))
    cluster = start_cluster("1.37", nodes, workdir).install_crds()
    try:
        backend = RealBackend(cluster, workdir)
        try:
            report = Chaos(backend, cluster.dir, workdir, seed, size, settle=90).run()
        finally:
            backend.cleanup()
    finally:
        cluster.stop()
    summary = json.loads(report.summary())
    print(report.summary(), file=sys.stderr)
    for line in report.self_exits + report.violations:
        print(line, file=sys.stderr)
    rec = report.recoveries
    return [{
        "scenario": f"chaos: {size.gangs} gangs, {size.singles} pods, {size.preemptors} preemptors, "
                    f"{report.kills} leader kills, {report.apiserver_restarts} apiserver restart",
        "draco_s": inv.percentile(rec, 50) if rec else None, "baseline_s": None, "ratio": None,
        "note": (f"seed {seed}; recover P50 {summary['recover_p50_s']} s P99 {summary['recover_p99_s']} s; "
                 f"decisions {summary['decisions']}; violations {len(report.violations)}; logs {workdir}"),
        "report": summary, "violations": report.violations}]
