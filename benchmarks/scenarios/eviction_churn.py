"""Eviction under pod churn: does the controller keep up when pods keep changing?

10,000 allocated claims and their running pods on the embedded API server, `draco run`'s
eviction controller (the real registry, in a thread) watching them, and 50 pod status
updates a second for 60 s. Meanwhile a DeviceTaintRule drains one node: its 128 pods
tolerate the taint for staggered whole seconds, so a few pods become due every second.

Measured per mode:
- CPU of the operator (every thread of the process except the API server's and the
  load generator's), as a fraction of one core over the churn window;
- latency from the moment a pod became due (the rule's timeAdded plus the claim's
  tolerationSeconds) to the moment its deletion was accepted: P50, P99, max. A pod not
  evicted by the end counts with the time it waited so far.

draco: the incremental index (work per event). Baseline, in the same run: the same
controller with `eviction_full_replan` (re-plan every claim on every pass, as before).

Run: `python -m benchmarks --only eviction_churn` (about 5 minutes; `--quick` for
1,000 claims over 20 s).
"""

from __future__ import annotations

import http.client
import json
import logging
import math
import os
import random
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from benchmarks import generate

EXPLICIT_ONLY = True  # minutes of wall time: run it by name
NAMESPACE = "default"
RATE = 50.0  # pod status updates per second
LEAD = 5  # seconds from the rule's timeAdded to the first pod due


def _cpu_by_thread() -> dict[int, float]:
    """CPU seconds (user + system) of every thread of this process, by native id."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[int, float] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            stat = Path(f"/proc/self/task/{tid}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        out[int(tid)] = (int(fields[11]) + int(fields[12])) / tick
    return out


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def _rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def churn(claims: int, seconds: float, full_replan: bool) -> dict[str, Any]:
    from operators.apiserver.runner import ServerThread, kubeconfig
    from operators.cli.operator_thread import OperatorThread

    server = ServerThread().start()
    workdir = Path(tempfile.mkdtemp(prefix="draco-churn-"))
    (workdir / "kubeconfig").write_text(kubeconfig(server.url))
    os.environ["KUBECONFIG"] = str(workdir / "kubeconfig")
    nodes = max(math.ceil(claims / 128), 2)
    slices = generate.cluster(nodes, 128)
    objects = generate.claims_and_pods(slices, namespace=NAMESPACE)[: 2 * claims]
    drained = slices[0]["spec"]["pool"]["name"]
    window = max(int(seconds) - LEAD - 5, 1)
    tolerate: dict[str, int] = {}  # pod -> tolerationSeconds
    for obj in objects:
        if obj["kind"] != "ResourceClaim":
            continue
        result = obj["status"]["allocation"]["devices"]["results"][0]
        if result["pool"] != drained:
            continue
        index = int(result["device"].removeprefix("gpu-"))
        secs = LEAD + index * window // 128
        result["tolerations"] = [{"key": "example.com/drain", "operator": "Exists", "effect": "NoExecute",
                                  "tolerationSeconds": secs}]
        tolerate[obj["status"]["reservedFor"][0]["name"]] = secs
    churned = [o["metadata"]["name"] for o in objects if o["kind"] == "Pod" and o["metadata"]["name"] not in tolerate]

    def load() -> None:
        store, reg = server.server.store, server.server.registry
        uids: dict[str, str] = {}
        for s in slices:
            store.create(reg.get("resource.k8s.io", "v1", "resourceslices"), "", s)  # type: ignore[arg-type]
        for obj in objects:
            if obj["kind"] == "Pod":
                created = store.create(reg.get("", "v1", "pods"), NAMESPACE, obj)  # type: ignore[arg-type]
                uids[obj["metadata"]["name"]] = created["metadata"]["uid"]
        for obj in objects:
            if obj["kind"] == "ResourceClaim":
                ref = obj["status"]["reservedFor"][0]
                ref["uid"] = uids[ref["name"]]
                store.create(reg.get("resource.k8s.io", "v1", "resourceclaims"), NAMESPACE, obj)  # type: ignore[arg-type]

    server.call(load)
    settings = SimpleNamespace(qps=200.0, burst=400, eviction_workers=10, grace_period=5.0,
                               use_eviction_api=False, status_interval=1.0, eviction_full_replan=full_replan)
    op = OperatorThread(["eviction"], settings)
    controller = op.controllers["eviction"]
    evicted_at: dict[str, float] = {}
    real = controller._evict_one

    async def timed(pod: Any) -> bool:
        ok = bool(await real(pod))
        if ok:
            evicted_at.setdefault(pod.pod.name, time.time())
        return ok

    controller._evict_one = timed
    op.start()
    started = time.monotonic()
    while (op.tracker.stats.pod_updates < claims or op.tracker.stats.claim_updates < claims
           or controller.passes == 0):
        if time.monotonic() - started > 300:
            raise RuntimeError("the operator did not sync within 300 s")
        time.sleep(0.2)
    sync_s = time.monotonic() - started
    time.sleep(1.0)

    added = math.ceil(time.time()) + 1
    host, port = server.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    rule = {"apiVersion": "resource.draco.dev/v1alpha1", "kind": "DeviceTaintRule", "metadata": {"name": "drain"},
            "spec": {"deviceSelector": {"driver": generate.DRIVER, "pool": drained},
                     "taint": {"key": "example.com/drain", "effect": "NoExecute", "timeAdded": _rfc3339(added)}}}
    conn.request("POST", "/apis/resource.draco.dev/v1alpha1/devicetaintrules", json.dumps(rule),
                 {"Content-Type": "application/json"})
    conn.getresponse().read()

    excluded = {threading.main_thread().native_id, server._thread.native_id}
    before = _cpu_by_thread()
    passes_before = controller.passes
    rng = random.Random(7)
    t0 = time.monotonic()
    sent = failed = 0
    while (now := time.monotonic()) - t0 < seconds:
        target = t0 + sent / RATE
        if target > now:
            time.sleep(target - now)
        name = rng.choice(churned)
        body = json.dumps({"status": {"conditions": [
            {"type": "Ready", "status": "True" if sent % 2 else "False", "lastProbeTime": None}]}})
        conn.request("PATCH", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}/status", body,
                     {"Content-Type": "application/merge-patch+json"})
        resp = conn.getresponse()
        resp.read()
        failed += resp.status >= 300
        sent += 1
    wall = time.monotonic() - t0
    after = _cpu_by_thread()
    end = time.time()
    cpu = sum(v - before.get(tid, 0.0) for tid, v in after.items() if tid not in excluded)
    latencies = []
    due = 0
    for pod, secs in tolerate.items():
        due_at = added + secs
        if due_at > end:
            continue
        due += 1
        latencies.append(evicted_at.get(pod, end) - due_at)
    passes = controller.passes - passes_before
    conn.close()
    op.stop()
    server.stop()
    return {"cpu_fraction": cpu / wall, "p50_s": _percentile(latencies, 0.5), "p99_s": _percentile(latencies, 0.99),
            "max_s": max(latencies, default=math.nan), "due": due,
            "evicted": sum(1 for p in tolerate if p in evicted_at), "updates_sent": sent, "updates_failed": failed,
            "passes": passes, "sync_s": sync_s, "wall_s": wall}


def run(quick: bool) -> list[dict[str, Any]]:
    import structlog

    # One log line per evicted pod is right for an operator, noise for a benchmark.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    logging.getLogger("kopf").setLevel(logging.ERROR)
    claims, seconds = (1000, 20.0) if quick else (10_000, 60.0)
    draco = churn(claims, seconds, full_replan=False)
    baseline = churn(claims, seconds, full_replan=True)
    what = f"{claims} claims, {RATE:g} pod updates/s for {seconds:g} s"
    detail = {"draco": draco, "baseline": baseline}
    return [
        {"scenario": f"eviction churn CPU, {what}", "draco_s": draco["cpu_fraction"],
         "baseline_s": baseline["cpu_fraction"], "ratio": baseline["cpu_fraction"] / max(draco["cpu_fraction"], 1e-9),
         "note": f"CPU seconds per second (shown as ms per s): draco {draco['cpu_fraction']:.1%} of a core, "
                 f"full re-plan {baseline['cpu_fraction']:.1%}; target < 10%", "detail": detail},
        {"scenario": f"eviction churn P99 due->evicted, {what}", "draco_s": draco["p99_s"],
         "baseline_s": baseline["p99_s"], "ratio": baseline["p99_s"] / max(draco["p99_s"], 1e-9),
         "note": f"{draco['evicted']}/{draco['due']} due pods evicted (baseline {baseline['evicted']}/"
                 f"{baseline['due']}); P50 {draco['p50_s']:.2f} s vs {baseline['p50_s']:.2f} s; "
                 "target P99 < 1 s; baseline: full re-plan per pass"},
    ]
