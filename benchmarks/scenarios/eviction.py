"""Eviction scenarios: decisions for 10,000 claims, and 1,000 pods evicted end to end.

Baselines: the decisions of a stateless run (parse everything, then decide), and the
end-to-end eviction with a single worker instead of the default pool.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from benchmarks import generate
from operators.cli.state import build_tracker
from operators.eviction.decisions import plan

RULE = {"apiVersion": "resource.draco.dev/v1alpha1", "kind": "DeviceTaintRule",
        "metadata": {"name": "drain", "creationTimestamp": "2026-01-01T00:00:00Z", "generation": 1},
        "spec": {"deviceSelector": {"all": True}, "taint": {"key": "example.com/drain", "effect": "NoExecute"}}}


def decisions(quick: bool) -> dict[str, Any]:
    nodes = 10 if quick else 79
    slices = generate.cluster(nodes, 128)
    objects = [*slices, *generate.claims_and_pods(slices), RULE]
    tracker = build_tracker(objects)
    started = time.perf_counter()
    result = plan(tracker)
    draco_s = time.perf_counter() - started
    started = time.perf_counter()
    plan(build_tracker(objects))
    baseline_s = time.perf_counter() - started
    claims = nodes * 128
    return {"scenario": f"eviction decisions, {claims} claims", "draco_s": draco_s,
            "baseline_s": baseline_s, "ratio": baseline_s / draco_s,
            "note": f"{len(result.pods)} pods due; target < 0.5 s; baseline: stateless parse + decide"}


def end_to_end(pods: int, workers: int) -> float:
    from operators.apiserver.runner import ServerThread, kubeconfig
    from operators.cli.operator_thread import OperatorThread
    from tests.apiserver.http import call

    server = ServerThread().start()
    workdir = Path(tempfile.mkdtemp(prefix="draco-bench-"))
    (workdir / "kubeconfig").write_text(kubeconfig(server.url))
    os.environ["KUBECONFIG"] = str(workdir / "kubeconfig")
    slices = generate.cluster(max(pods // 128, 1) + (1 if pods % 128 else 0), 128)
    objects = generate.claims_and_pods(slices, namespace="default")[: 2 * pods]

    def load() -> None:
        store, reg = server.server.store, server.server.registry
        for s in slices:
            store.create(reg.get("resource.k8s.io", "v1", "resourceslices"), "", s)  # type: ignore[arg-type]
        for obj in objects:
            if obj["kind"] == "Pod":
                created = store.create(reg.get("", "v1", "pods"), "default", obj)  # type: ignore[arg-type]
                uids[obj["metadata"]["name"]] = created["metadata"]["uid"]
        for obj in objects:
            if obj["kind"] == "ResourceClaim":
                pod_name = obj["status"]["reservedFor"][0]["name"]
                obj["status"]["reservedFor"][0]["uid"] = uids[pod_name]
                store.create(reg.get("resource.k8s.io", "v1", "resourceclaims"), "default", obj)  # type: ignore[arg-type]

    uids: dict[str, str] = {}
    server.call(load)
    settings = SimpleNamespace(qps=200.0, burst=400, eviction_workers=workers, grace_period=5.0,
                               use_eviction_api=False, status_interval=1.0)
    op = OperatorThread(["eviction"], settings).start()
    time.sleep(1.0)  # let the watches list everything
    started = time.perf_counter()
    rule = {**RULE, "metadata": {"name": "drain"}}
    call(f"{server.url}/apis/resource.draco.dev/v1alpha1/devicetaintrules", "POST", rule)

    def done() -> bool:
        def check() -> bool:
            reg = server.server.registry
            left = sum(1 for _ in server.server.store.iter(reg.get("", "v1", "pods"), None))  # type: ignore[arg-type]
            rule_obj = server.server.store.find(
                reg.get("resource.draco.dev", "v1alpha1", "devicetaintrules"), "", "drain")  # type: ignore[arg-type]
            conds = ((rule_obj or {}).get("status") or {}).get("conditions") or []
            return left == 0 and any(c["status"] == "False" for c in conds)
        return bool(server.call(check))

    while not done():
        if time.perf_counter() - started > 120:
            break
        time.sleep(0.1)
    elapsed = time.perf_counter() - started
    op.stop()
    server.stop()
    return elapsed


def run(quick: bool) -> list[dict[str, Any]]:
    import logging

    import structlog

    # One log line per evicted pod is right for an operator, noise for a benchmark.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    logging.getLogger("kopf").setLevel(logging.ERROR)
    rows = [decisions(quick)]
    pods = 200 if quick else 1000
    draco_s = end_to_end(pods, workers=10)
    baseline_s = end_to_end(pods, workers=1)
    rows.append({"scenario": f"evict {pods} pods end to end (embedded apiserver)", "draco_s": draco_s,
                 "baseline_s": baseline_s, "ratio": baseline_s / draco_s,
                 "note": "all deleted + condition False; default QPS 200/burst 400, 10 workers, "
                         "5 s grace; target < 30 s; baseline: 1 worker"})
    return rows
