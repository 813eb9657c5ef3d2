"""What draco costs at cluster size, next to what kube-scheduler and kube-controller-manager cost.

Real control planes from `hack/cluster` (kwok nodes), `draco run` as a separate process
(every controller, `--health-port`, JSON logs in the work directory). Parts, selectable
with `DRACO_BENCH_PARTS` (comma-separated, run in that order; default all):

- plain: a 1.34 cluster of 200 kwok nodes (about 100 pods a node at full size), 200
  Running pods with allocated claims on 20 of them as the DRA base; draco's RSS after sync, seconds from process start to `/readyz` 200, CPU seconds to
  ready and idle CPU (20 s, nothing changing), with 0 and with N plain pods (N = 20,000;
  no ResourceClaim, no gate, bound with `spec.nodeName` so kwok runs them); then 1,000
  more plain pods created and deleted while draco runs: draco's CPU seconds (less its idle
  rate) per watch event the API server emitted for them, counted by a watch of our own.
  kube-scheduler's and kube-controller-manager's RSS at the same moments are the anchor.
- soak: 1,000 plain pods created and deleted 20 times; draco's RSS before and after
  (after one warm-up cycle), on the plain part's cluster and draco when both run.
- dra: 2,000 kwok nodes x 8 devices, 10,000 allocated claims with Running pods; draco's
  RSS and readiness; allocation latency (a gated pod with a pre-created claim, created
  one every 0.2 s: pod POST to the claim's `status.allocation` seen on a watch) P50/P99
  over 200 pods; the time one NoExecute draco DeviceTaintRule over `gpu-0` takes to evict
  the 1,000 pods using it until they are gone and `EvictionInProgress` is False.
- gated: 1,000 DRA pods with PRE-CREATED claims (so kube-controller-manager's
  claim-from-template rate is out of the picture), created at once; pods per second
  until every pod is bound: draco's gated flow (`draco run`, every controller) on 1.34
  against kube-scheduler 1.37 alone, same pods without the gate, on a 1.37 cluster; and
  the floor on 1.34: a bare client sending, per pod and 32 pods at once, the requests
  draco's controllers send (pod created gated, claim allocated and reserved, pod ungated
  and narrowed) with no watch and no decision, kube-scheduler binding
  (`DRACO_BENCH_SIDES=draco,upstream,floor` chooses).

Why the choices: draco runs from the repository (`DRACO_BENCH_DRACO_ROOT=DIR` runs
another checkout's, e.g. `git archive HEAD` unpacked, for a before/after in one sitting);
pods and nodes are made over kept-alive connections, many at once (benchmarks/kubeload.py),
because one TLS handshake per request makes populating the cluster the slowest part;
the base claims take gpu-0… on half of the nodes and gpu-1… on the other half, so a rule
over gpu-0 selects exactly the pods of half of the nodes. The per-event CPU subtracts
draco's idle rate over the same seconds. The gated sides both start from bound-free pods
whose claims exist; kube-scheduler runs at its defaults (client QPS 50) on both.

`--quick` runs every part at a small size; `DRACO_BENCH_SIZES=plain_pods=10000,…`
overrides single sizes (the names of `Sizes`). Every figure is printed with the load
average at that moment. Runs only when named (`python -m benchmarks --only
cluster_scale`); every cluster is torn down at the end, also on failure.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from benchmarks.kubeload import (
    Api,
    Draco,
    PodStates,
    Watch,
    anchors,
    cpu_seconds,
    cpu_settled,
    list_all_pods,
    loadavg,
    percentile,
    wait_until,
)
from benchmarks.scale_objects import (
    CLAIMS,
    DRIVER,
    PODS,
    RULES,
    Allocations,
    allocated_base,
    bare_eviction,
    claim,
    delete_batch,
    dra_pod,
    make_nodes,
    namespace_and_class,
    plain_batch,
    selector,
    slices,
)
from benchmarks.scale_report import report
from benchmarks.scenarios.cluster import start_cluster
from tests.e2e.backends import HACK_CLUSTER, RealCluster

EXPLICIT_ONLY = True
PARTS = ("plain", "soak", "dra", "gated")


@dataclasses.dataclass
class Sizes:
    plain_pods: int = 20_000
    plain_nodes: int = 200          # about 100 pods a node, as kubelets allow
    base_nodes: int = 20            # nodes with devices in the plain part...
    base_claims_per_node: int = 10  # ...and allocated claims with Running pods on each
    churn_pods: int = 1_000
    soak_pods: int = 1_000
    soak_cycles: int = 20
    dra_nodes: int = 2_000
    dra_per_node: int = 8
    dra_claims_per_node: int = 5
    latency_pods: int = 200
    latency_interval_s: float = 0.2
    eviction_limit_s: float = 600.0
    gated_nodes: int = 125
    gated_pods: int = 1_000
    ready_runs: int = 3             # draco starts per readiness figure (median)


QUICK = Sizes(plain_pods=2_000, plain_nodes=20, base_claims_per_node=10, churn_pods=300,
              soak_pods=300, soak_cycles=3, dra_nodes=40, dra_claims_per_node=5,
              latency_pods=20, gated_nodes=20, gated_pods=160, ready_runs=2)


def sizes(quick: bool) -> Sizes:
    chosen = dataclasses.replace(QUICK if quick else Sizes())
    for item in filter(None, os.environ.get("DRACO_BENCH_SIZES", "").split(",")):
        key, _, value = item.partition("=")
        kind = type(getattr(chosen, key.strip()))
        setattr(chosen, key.strip(), kind(value))
    return chosen


# One kwok plays the kubelet of every node; at its default of 4 pod stages at once it,
# not draco or the control plane, set how fast 1,000 evicted pods went away (about 50/s).
# Real kubelets terminate their pods in parallel, one per node.
KWOK_PARALLELISM = 32


def up(k8s: str, workdir: Path) -> RealCluster:
    """`hack/cluster up` with no nodes (make_nodes adds them); a start that fails or is
    interrupted half-way still stops what it started."""
    try:
        return start_cluster(k8s, 0, workdir, "--kwok-parallelism", str(KWOK_PARALLELISM))
    except BaseException:
        subprocess.run([str(HACK_CLUSTER), "down", "--dir", str(workdir / f"cluster-{k8s}")],
                       capture_output=True, timeout=60, check=False)
        raise


# --------------------------------------------------------------------------- measuring


async def sync_figures(cluster: RealCluster, draco: Draco, runs: int) -> dict[str, Any]:
    """Start draco RUNS times (readiness on a shared 2-core machine is noisy: the median
    is reported, every run kept); the last run's idle CPU and RSS, and the anchors' RSS."""
    load_before = loadavg()
    list_s = await list_all_pods(cluster)
    starts = []
    for _ in range(runs - 1):
        starts.append(await draco.start())
        draco.stop()
    figures: dict[str, Any] = await draco.start()
    starts.append(dict(figures))
    for key in ("ready_s", "cpu_to_ready_s"):
        figures[key] = percentile([run[key] for run in starts], 0.5)
    figures["starts"] = starts
    figures["list_pods_s"] = list_s
    figures["rss_ready"] = draco.rss()
    figures["idle_pct"] = await draco.idle(20)
    figures |= {"rss": draco.rss(), "peak": draco.peak(), **anchors(cluster),
                "load_start": load_before, "load": loadavg()}
    print(json.dumps({"sync": figures}), file=sys.stderr)
    return figures


async def churn(api: Api, draco: Draco, s: Sizes, idle_pct: float, batch: str) -> dict[str, Any]:
    """Create and delete CHURN_PODS plain pods; draco's CPU per watch event for them."""
    states = PodStates()
    async with Watch(api, PODS + selector(batch=batch), states, limit=1800):
        cpu0, started = draco.cpu(), time.monotonic()
        create_s = await plain_batch(api, s.churn_pods, s.plain_nodes, batch, states, 600)
        delete_s = await delete_batch(api, batch, states, s.churn_pods, 600)
        await wait_until(lambda: time.monotonic() - states.last_event > 2, 120, lambda: "events still coming")
    await cpu_settled(draco, idle_pct)
    seconds = time.monotonic() - started
    cpu = draco.cpu() - cpu0
    net = max(0.0, cpu - idle_pct / 100 * seconds)
    out = {"pods": s.churn_pods, "events": states.events, "cpu_s": cpu, "net_cpu_s": net,
           "seconds": seconds, "create_s": create_s, "delete_s": delete_s,
           "ms_per_event": 1000 * net / max(1, states.events), "load": loadavg()}
    print(json.dumps({"churn": out}), file=sys.stderr)
    return out


async def soak(api: Api, draco: Draco, s: Sizes, idle_pct: float) -> dict[str, Any]:
    async def cycle(batch: str) -> None:
        states = PodStates()
        async with Watch(api, PODS + selector(batch=batch), states, limit=1800):
            await plain_batch(api, s.soak_pods, s.plain_nodes, batch, states, 600)
            await delete_batch(api, batch, states, s.soak_pods, 600)

    await cycle("soak-warmup")
    await cpu_settled(draco, idle_pct)
    before, anchors_before, started = draco.rss(), anchors(draco.cluster), time.monotonic()
    for n in range(s.soak_cycles):
        await cycle(f"soak-{n}")
    await cpu_settled(draco, idle_pct)
    await asyncio.sleep(5)
    out = {"cycles": s.soak_cycles, "pods": s.soak_pods, "seconds": time.monotonic() - started,
           "rss_before": before, "rss_after": draco.rss(), "peak": draco.peak(),
           "anchors_before": anchors_before, "anchors_after": anchors(draco.cluster),
           "load": loadavg()}
    print(json.dumps({"soak": out}), file=sys.stderr)
    return out


async def latency(api: Api, s: Sizes, draco: Draco) -> dict[str, Any]:
    """Gated pods with pre-created claims, one every LATENCY_INTERVAL_S: POST to allocation."""
    allocations = Allocations()
    allocated = allocations.at
    count, created = s.latency_pods, {}
    await api.many(lambda i: api.create(CLAIMS, claim(f"lat-{i}", kind="latency")), range(count))
    async with Watch(api, CLAIMS + selector(kind="latency"), allocations, limit=1800):
        started, cpu0 = time.monotonic(), draco.cpu()
        for i in range(count):
            await asyncio.sleep(max(0.0, started + i * s.latency_interval_s - time.monotonic()))
            created[f"lat-{i}"] = time.monotonic()
            await api.create(PODS, dra_pod(f"lat-{i}", None, True, kind="latency"))
        await wait_until(lambda: len(allocated) >= count, 300,
                         lambda: f"{len(allocated)} of {count} latency claims allocated")
    cpu = draco.cpu() - cpu0
    values = [allocated[name] - at for name, at in created.items()]
    await api.delete(PODS + selector(kind="latency"))
    await api.delete(CLAIMS + selector(kind="latency"))
    for _ in range(600):  # gone before the eviction, whose rule may cover their devices
        if not (await api.call("GET", PODS + selector(kind="latency")))["items"]:
            break
        await asyncio.sleep(0.2)
    out = {"pods": count, "p50_ms": 1000 * percentile(values, 0.5),
           "p99_ms": 1000 * percentile(values, 0.99), "max_ms": 1000 * max(values), "cpu_s": cpu,
           "load": loadavg()}
    print(json.dumps({"latency": out}), file=sys.stderr)
    return out


async def eviction(api: Api, s: Sizes, draco: Draco) -> dict[str, Any]:
    """One NoExecute rule over gpu-0: seconds until its pods are gone and the rule says so."""
    listed = await api.call("GET", PODS + selector(device="gpu-0"))
    target = len(listed["items"])
    states = PodStates()
    conditions: dict[str, str] = {}

    def on_rule(kind: str, obj: dict[str, Any], _: float) -> None:
        for c in (obj.get("status") or {}).get("conditions") or []:
            conditions[c["type"]] = c["status"]

    async with Watch(api, PODS + selector(device="gpu-0"), states, limit=1800), \
            Watch(api, RULES, on_rule, limit=1800):
        started, cpu0 = time.monotonic(), draco.cpu()
        await api.create(RULES, {
            "apiVersion": "resource.draco.dev/v1alpha1", "kind": "DeviceTaintRule",
            "metadata": {"name": "drain-gpu-0"},
            "spec": {"deviceSelector": {"driver": DRIVER, "device": "gpu-0"},
                     "taint": {"key": "example.com/drain", "effect": "NoExecute"}}})
        gone = await wait_until(lambda: len(states.deleted) >= target, s.eviction_limit_s,
                                lambda: f"{len(states.deleted)} of {target} pods evicted")
        done = await wait_until(lambda: conditions.get("EvictionInProgress") == "False",
                                s.eviction_limit_s, lambda: f"conditions {conditions}")
    accepted = max(states.terminating_at.values(), default=started) - started
    out = {"pods": target, "accepted_s": accepted, "gone_s": gone, "seconds": time.monotonic() - started,
           "condition_after_gone_s": done, "cpu_s": draco.cpu() - cpu0, "load": loadavg()}
    print(json.dumps({"eviction": out}), file=sys.stderr)
    return out


async def eviction_floor(api: Api, draco: Draco) -> dict[str, Any]:
    """The same requests per pod as draco's eviction (DisruptionTarget status patch,
    delete with a UID precondition, one Event), sent by a bare client for the pods on
    gpu-1 at draco's default of 32 at once: how fast this control plane on this machine
    takes evictions at all, beside draco's figure."""
    listed = await api.call("GET", PODS + selector(device="gpu-1"))
    pods = [(p["metadata"]["name"], p["metadata"]["uid"]) for p in listed["items"]]
    states = PodStates()
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

    async def evict(pod: tuple[str, str]) -> None:
        await bare_eviction(api, *pod, now, "floor")

    async with Watch(api, PODS + selector(device="gpu-1"), states, limit=1800):
        started, cpu0 = time.monotonic(), draco.cpu()
        sent = await api.many(evict, pods, concurrency=32)
        await wait_until(lambda: len(states.deleted) >= len(pods), 600,
                         lambda: f"{len(states.deleted)} of {len(pods)} pods gone")
        gone = time.monotonic() - started
    out = {"pods": len(pods), "sent_s": sent, "gone_s": gone, "draco_cpu_s": draco.cpu() - cpu0,
           "load": loadavg()}
    print(json.dumps({"eviction_floor": out}), file=sys.stderr)
    return out


# --------------------------------------------------------------------------- parts


async def part_plain(workdir: Path, s: Sizes, parts: list[str]) -> dict[str, Any]:
    """The plain and soak parts, on one cluster (soak reuses plain's draco when both run)."""
    out: dict[str, Any] = {"sizes": {"plain_pods": s.plain_pods, "nodes": s.plain_nodes}}
    cluster = up("1.34", workdir / "plain").install_crds()
    api, draco = Api(cluster), None
    try:
        out["nodes_s"] = await make_nodes(api, s.plain_nodes)
        await namespace_and_class(api)
        await slices(api, s.base_nodes, s.base_claims_per_node + 4)
        out["dra_pods"] = await allocated_base(api, s.base_nodes, s.base_claims_per_node + 4,
                                               s.base_claims_per_node)
        if "plain" in parts:
            draco = Draco(cluster, workdir / "draco-plain-0.log")
            out["without"] = await sync_figures(cluster, draco, s.ready_runs)
            draco.stop()
            states = PodStates()
            async with Watch(api, PODS + selector(batch="plain"), states, limit=3600):
                out["create_s"] = await plain_batch(api, s.plain_pods, s.plain_nodes, "plain",
                                                    states, 1800)
            draco = Draco(cluster, workdir / "draco-plain-n.log")
            out["with"] = await sync_figures(cluster, draco, s.ready_runs)
            out["churn"] = await churn(api, draco, s, out["with"]["idle_pct"], "churn")
        if "soak" in parts:
            if draco is None:
                draco = Draco(cluster, workdir / "draco-soak.log")
                out["soak_sync"] = await sync_figures(cluster, draco, s.ready_runs)
            idle = (out.get("with") or out["soak_sync"])["idle_pct"]
            out["soak"] = await soak(api, draco, s, idle)
    finally:
        if draco is not None:
            draco.stop()
        await api.close()
        cluster.stop()
    return out


async def part_dra(workdir: Path, s: Sizes) -> dict[str, Any]:
    out: dict[str, Any] = {"sizes": {"nodes": s.dra_nodes, "devices": s.dra_nodes * s.dra_per_node}}
    cluster = up("1.34", workdir / "dra").install_crds()
    api, draco = Api(cluster), None
    try:
        out["nodes_s"] = await make_nodes(api, s.dra_nodes, limit=1800)
        await namespace_and_class(api)
        await slices(api, s.dra_nodes, s.dra_per_node)
        started = time.monotonic()
        out["claims"] = await allocated_base(api, s.dra_nodes, s.dra_per_node, s.dra_claims_per_node)
        out["populate_s"] = time.monotonic() - started
        draco = Draco(cluster, workdir / "draco-dra.log")
        out["sync"] = await sync_figures(cluster, draco, s.ready_runs)
        out["latency"] = await latency(api, s, draco)
        out["eviction"] = await eviction(api, s, draco)
        out["eviction_floor"] = await eviction_floor(api, draco)
        out["rss_end"], out["peak_end"] = draco.rss(), draco.peak()
    finally:
        if draco is not None:
            draco.stop()
        await api.close()
        cluster.stop()
    return out


def bare_gated_flow(api: Api) -> Callable[[int], Awaitable[None]]:
    """The floor of the gated flow: for pod I, the requests draco's controllers send,
    by a bare client that decides nothing (device I of the slices, in order): create
    the pod gated, write its claim's allocation and reservation (one status write), and
    ungate it with its node affinity narrowed (one pod write). kube-scheduler binds."""

    async def one(i: int) -> None:
        node, device = f"node-{i // 8}", f"gpu-{i % 8}"
        pod = await api.create(PODS, dra_pod(f"g-{i}", None, True, kind="gated"))
        on_node = {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node]}]}]}
        await api.merge_patch(f"{CLAIMS}/g-{i}/status", {"status": {
            "allocation": {"devices": {"results": [
                {"request": "gpu", "driver": DRIVER, "pool": node, "device": device}]},
                "nodeSelector": on_node},
            "reservedFor": [{"resource": "pods", "name": f"g-{i}", "uid": pod["metadata"]["uid"]}]}})
        await api.merge_patch(f"{PODS}/g-{i}", {"spec": {
            "schedulingGates": [],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": on_node}}}})

    return one


async def gated_side(workdir: Path, s: Sizes, k8s: str, floor: bool = False) -> dict[str, Any]:
    """One side of the gated flow: draco on 1.34 (gated pods), kube-scheduler on 1.37,
    or with FLOOR the bare client's requests on 1.34 (bare_gated_flow)."""
    with_draco = k8s == "1.34" and not floor
    cluster = up(k8s, workdir / f"gated-{k8s}{'-floor' if floor else ''}")
    if with_draco:
        cluster.install_crds()
    api, draco = Api(cluster), None
    count = min(s.gated_pods, s.gated_nodes * 8)
    try:
        await make_nodes(api, s.gated_nodes)
        await namespace_and_class(api)
        await slices(api, s.gated_nodes, 8)
        await api.many(lambda i: api.create(CLAIMS, claim(f"g-{i}", kind="gated")), range(count))
        out: dict[str, Any] = {"k8s": k8s, "pods": count}
        if with_draco:
            draco = Draco(cluster, workdir / "draco-gated.log")
            out |= await draco.start()
            cpu0 = draco.cpu()
        await asyncio.sleep(3)  # every informer has the slices and claims
        states, allocations = PodStates(), Allocations()
        async with Watch(api, PODS + selector(kind="gated"), states, limit=1800), \
                Watch(api, CLAIMS + selector(kind="gated"), allocations, limit=1800):
            started = time.monotonic()
            out["create_s"] = await api.many(
                bare_gated_flow(api) if floor else
                lambda i: api.create(PODS, dra_pod(f"g-{i}", None, with_draco, kind="gated")),
                range(count))
            await wait_until(lambda: len(states.bound_at) >= count, 900,
                             lambda: f"{len(states.bound_at)} of {count} pods bound", step=0.2)
        out["seconds"] = max(states.bound_at.values()) - started
        out["last_ungated_s"] = max(states.ungated_at.values()) - started
        out["last_allocated_s"] = max(allocations.at.values(), default=started) - started
        delays = [states.bound_at[n] - states.ungated_at[n] for n in states.bound_at]
        out["ungated_to_bound_p50_s"] = percentile(delays, 0.5)
        out["rate"] = count / out["seconds"]
        if draco is not None:
            out |= {"cpu_s": draco.cpu() - cpu0, "peak": draco.peak()}
        out["sched_cpu_s"] = cpu_seconds(int((cluster.dir / "kube-scheduler.pid").read_text()))
        listed = await api.call("GET", CLAIMS + selector(kind="gated"))
        devices = [(r["pool"], r["device"]) for c in listed["items"]
                   for r in ((c.get("status") or {}).get("allocation") or {})
                   .get("devices", {}).get("results", [])]
        if len(devices) != count or len(set(devices)) != count:
            raise RuntimeError(f"{len(devices)} results, {len(set(devices))} distinct, {count} pods")
        out["load"] = loadavg()
        print(json.dumps({"gated": out}), file=sys.stderr)
        return out
    finally:
        if draco is not None:
            draco.stop()
        await api.close()
        cluster.stop()


async def part_gated(workdir: Path, s: Sizes) -> dict[str, Any]:
    """Every side (`DRACO_BENCH_SIDES=upstream,draco,floor` chooses); a side that fails
    is reported and the others still run."""
    out: dict[str, Any] = {}
    sides = os.environ.get("DRACO_BENCH_SIDES", "upstream,draco,floor").split(",")
    for side, k8s in (("upstream", "1.37"), ("draco", "1.34"), ("floor", "1.34")):
        if side in sides:
            try:
                out[side] = await gated_side(workdir, s, k8s, floor=side == "floor")
            except Exception as err:  # noqa: BLE001 - the other side still runs
                traceback.print_exc()
                out[side] = {"error": f"{type(err).__name__}: {err}"}
    return out


async def measure(workdir: Path, s: Sizes, parts: list[str]) -> dict[str, Any]:
    """Every chosen part; a part that fails is reported and the others still run."""
    results: dict[str, Any] = {}
    for part in parts:
        if part == "soak" and "plain" in results:
            continue  # ran with plain
        started = time.monotonic()
        try:
            if part in ("plain", "soak"):
                results["plain"] = await part_plain(workdir, s, parts)
            elif part == "dra":
                results["dra"] = await part_dra(workdir, s)
            elif part == "gated":
                results["gated"] = await part_gated(workdir, s)
        except Exception as err:  # noqa: BLE001 - one part's failure must not hide the others'
            traceback.print_exc()
            results[f"{part}_error"] = f"{type(err).__name__}: {err}"
        print(f"# cluster_scale {part}: {time.monotonic() - started:.0f} s", file=sys.stderr)
    return results


def run(quick: bool) -> list[dict[str, Any]]:
    chosen = [p.strip() for p in os.environ.get("DRACO_BENCH_PARTS", ",".join(PARTS)).split(",") if p.strip()]
    unknown = sorted(set(chosen) - set(PARTS))
    if unknown:
        raise SystemExit(f"DRACO_BENCH_PARTS: unknown part(s) {unknown}; choose from {PARTS}")
    s = sizes(quick)
    workdir = Path(tempfile.mkdtemp(prefix="draco-bench-scale-"))
    print(f"# cluster_scale: parts {chosen}, sizes {dataclasses.asdict(s)}, work dir {workdir}",
          file=sys.stderr)
    def interrupted(*_: object) -> None:
        raise KeyboardInterrupt  # SIGTERM (e.g. from `timeout`) tears the clusters down too

    previous = signal.signal(signal.SIGTERM, interrupted)
    try:
        results = asyncio.run(measure(workdir, s, chosen))
    finally:
        signal.signal(signal.SIGTERM, previous)
    (workdir / "results.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    table, rows = report(results, dataclasses.asdict(s), quick)
    print(table)
    return rows
