"""1,000 evictions in the DRA-at-size world, beside a bare client sending the same requests.

A 1.34 control plane from `hack/cluster` (kwok nodes), filled by the loader of
benchmarks/kubeload.py with 2,000 nodes x 8 devices and 10,000 allocated claims reserved
for Running pods (the fill's time is the first row). Then, in the same run:

- draco: `draco run` (every controller, its defaults: 32 eviction workers, 32
  connections, 200 QPS) and one NoExecute DeviceTaintRule over `gpu-0`, which exactly
  1,000 claims hold (the first half of the nodes); the time from the rule's creation
  to the last of their pods seen terminating on a watch (the last eviction), to the
  last gone, and to the rule's `EvictionInProgress` False.
- bare client: draco stopped, the same requests per pod as draco's eviction (the
  DisruptionTarget status patch, the delete with a uid precondition, one Event) for
  the 1,000 pods on `gpu-5` (the second half of the nodes), 32 at once over 32
  connections, no decision and no rate limit; the time from the first request to the
  last pod seen terminating, and gone, on the same kind of watch.

The ratio is the bare client's time over draco's: 1.0x means draco evicts as fast as
this control plane takes evictions at all on this machine.

`--quick` fills 200 nodes (1,000 claims, 100 evictions a side); `DRACO_BENCH_SIZES=
nodes=1000` overrides the node count, `DRACO_BENCH_WRITERS` and `DRACO_BENCH_CONNECTIONS`
the loader's writers. Runs only when named (`python -m benchmarks --only
eviction_at_size`); the cluster is torn down at the end, also on failure.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.kubeload import (
    Api,
    Draco,
    PodStates,
    Watch,
    World,
    fill_world,
    loadavg,
    wait_until,
    writers_from_env,
)
from benchmarks.scale_objects import DRIVER, PODS, RULES, bare_eviction, selector
from benchmarks.scenarios.cluster import start_cluster
from tests.e2e.backends import HACK_CLUSTER, RealCluster

EXPLICIT_ONLY = True
CONNECTIONS = 32  # draco's client pool (operators/kube/client.py) and eviction workers
KWOK_PARALLELISM = 32  # as cluster_scale: kwok terminates evicted pods 32 at a time
LIMIT_S = 900.0
DRACO_DEVICE = "gpu-0"  # held by claims on the first half of the nodes only
BARE_DEVICE = "gpu-5"  # held by claims on the second half only (scale_objects.allocated_devices)


def world(quick: bool) -> World:
    nodes = 200 if quick else World().nodes
    for item in filter(None, os.environ.get("DRACO_BENCH_SIZES", "").split(",")):
        key, _, value = item.partition("=")
        if key.strip() != "nodes":
            raise SystemExit(f"DRACO_BENCH_SIZES: eviction_at_size knows only nodes=N, not {key!r}")
        nodes = int(value)
    return World(nodes=nodes)


def up(workdir: Path) -> RealCluster:
    """`hack/cluster up` with no nodes (the loader adds them); a start that fails half-way
    still stops what it started."""
    try:
        return start_cluster("1.34", 0, workdir, "--kwok-parallelism", str(KWOK_PARALLELISM))
    except BaseException:
        subprocess.run([str(HACK_CLUSTER), "down", "--dir", str(workdir / "cluster-1.34")],
                       capture_output=True, timeout=60, check=False)
        raise


class Evictions(PodStates):
    """A pod watch's view, with when each pod was seen gone."""

    def __init__(self) -> None:
        super().__init__()
        self.gone_at: dict[str, float] = {}

    def __call__(self, kind: str, obj: dict[str, Any], at: float) -> None:
        super().__call__(kind, obj, at)
        if kind == "DELETED":
            self.gone_at.setdefault(obj["metadata"]["name"], at)

    def last(self, started: float) -> dict[str, float]:
        """Seconds from STARTED to the last pod seen terminating (its eviction accepted)
        and to the last seen gone."""
        return {"evicted_s": max(self.terminating_at.values(), default=started) - started,
                "gone_s": max(self.gone_at.values(), default=started) - started}


async def draco_side(api: Api, draco: Draco) -> dict[str, Any]:
    pods = len((await api.call("GET", PODS + selector(device=DRACO_DEVICE)))["items"])
    states = Evictions()
    conditions: dict[str, str] = {}

    def on_rule(kind: str, obj: dict[str, Any], _: float) -> None:
        for c in (obj.get("status") or {}).get("conditions") or []:
            conditions[c["type"]] = c["status"]

    async with Watch(api, PODS + selector(device=DRACO_DEVICE), states, limit=LIMIT_S * 2), \
            Watch(api, RULES, on_rule, limit=LIMIT_S * 2):
        started, cpu0 = time.monotonic(), draco.cpu()
        await api.create(RULES, {
            "apiVersion": "resource.draco.dev/v1alpha1", "kind": "DeviceTaintRule",
            "metadata": {"name": f"drain-{DRACO_DEVICE}"},
            "spec": {"deviceSelector": {"driver": DRIVER, "device": DRACO_DEVICE},
                     "taint": {"key": "example.com/drain", "effect": "NoExecute"}}})
        await wait_until(lambda: len(states.deleted) >= pods, LIMIT_S,
                         lambda: f"{len(states.deleted)} of {pods} pods evicted and gone")
        await wait_until(lambda: conditions.get("EvictionInProgress") == "False", LIMIT_S,
                         lambda: f"rule conditions {conditions}")
        condition_s = time.monotonic() - started
    out = {"pods": pods, **states.last(started), "condition_s": condition_s,
           "cpu_s": draco.cpu() - cpu0, "peak": draco.peak(), "load": loadavg()}
    print(json.dumps({"draco": out}), file=sys.stderr)
    return out


async def bare_side(api: Api) -> dict[str, Any]:
    listed = await api.call("GET", PODS + selector(device=BARE_DEVICE))
    pods = [(p["metadata"]["name"], p["metadata"]["uid"]) for p in listed["items"]]
    states = Evictions()
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

    async def evict(pod: tuple[str, str]) -> None:
        await bare_eviction(api, *pod, now, "bare-client")

    async with Watch(api, PODS + selector(device=BARE_DEVICE), states, limit=LIMIT_S * 2):
        started = time.monotonic()
        sent_s = await api.many(evict, pods, concurrency=CONNECTIONS)
        await wait_until(lambda: len(states.deleted) >= len(pods), LIMIT_S,
                         lambda: f"{len(states.deleted)} of {len(pods)} pods gone")
    out = {"pods": len(pods), **states.last(started), "sent_s": sent_s, "load": loadavg()}
    print(json.dumps({"bare": out}), file=sys.stderr)
    return out


async def measure(workdir: Path, w: World) -> dict[str, Any]:
    writers, connections = writers_from_env()
    cluster = up(workdir).install_crds()
    api = Api(cluster, max(connections, CONNECTIONS))  # the in-process writer's too
    draco: Draco | None = None
    out: dict[str, Any] = {}
    try:
        out["fill"] = await fill_world(api, w, writers, connections)
        draco = Draco(cluster, workdir / "draco.log")
        out["ready"] = await draco.start()
        await asyncio.sleep(3)  # every informer has the claims and pods
        out["draco"] = await draco_side(api, draco)
        draco.stop()
        out["bare"] = await bare_side(api)
    finally:
        if draco is not None:
            draco.stop()
        await api.close()
        cluster.stop()
        for bulk in ("etcd-data", "audit.log"):  # about 400 MB at full size; logs stay
            path = cluster.dir / bulk
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
    return out


def rows(out: dict[str, Any], w: World) -> list[dict[str, Any]]:
    fill, ours, bare = out["fill"], out["draco"], out["bare"]
    return [
        {"scenario": f"load the DRA world: {w.nodes:,} nodes x {w.per_node} devices, "
                     f"{w.claims:,} allocated claims with Running pods (real 1.34)",
         "draco_s": fill["total_s"], "baseline_s": None, "ratio": None,
         "note": f"{fill['writers']} writer(s) x {fill['connections']} connections on "
                 f"{fill['cpus']} cores; nodes Ready {fill['nodes_ready_s']:.1f} s, objects "
                 f"{fill['objects_s']:.1f} s ({fill['writes_per_s']:.0f} writes/s); "
                 f"load {fill['load']}", "detail": fill},
        {"scenario": f"evict {ours['pods']:,} pods at size, rule created -> last eviction "
                     f"(real 1.34)",
         "draco_s": ours["evicted_s"], "baseline_s": bare["evicted_s"],
         "ratio": bare["evicted_s"] / max(ours["evicted_s"], 1e-9),
         "note": f"gone {ours['gone_s']:.1f} s vs {bare['gone_s']:.1f} s; condition False "
                 f"{ours['condition_s']:.1f} s; draco {ours['cpu_s']:.1f} CPU s; baseline: a bare "
                 f"client's same 3 requests for {bare['pods']:,} pods, {CONNECTIONS} at once; "
                 f"load {ours['load']} / {bare['load']}", "detail": {"draco": ours, "bare": bare,
                                                                  "ready": out["ready"]}},
    ]


def run(quick: bool) -> list[dict[str, Any]]:
    w = world(quick)
    workdir = Path(tempfile.mkdtemp(prefix="kubeload-evict-"))
    print(f"# eviction_at_size: {dataclasses.asdict(w)}, work dir {workdir}", file=sys.stderr)

    def interrupted(*_: object) -> None:
        raise KeyboardInterrupt  # SIGTERM (e.g. from `timeout`) tears the cluster down too

    previous = signal.signal(signal.SIGTERM, interrupted)
    try:
        out = asyncio.run(measure(workdir, w))
    finally:
        signal.signal(signal.SIGTERM, previous)
    (workdir / "results.json").write_text(json.dumps(out, indent=2, default=str) + "\n")
    return rows(out, w)
