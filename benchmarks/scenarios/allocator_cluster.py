"""Allocation side by side on real control planes: kube-scheduler 1.37 alone, and draco.

1,000 pods, each with one claim from a ResourceClaimTemplate, over 1,000 devices on 125
kwok nodes (8 per node, one node-local ResourceSlice per node). Measured: pods per
second from the first pod's creation until every pod is bound (`spec.nodeName` set).

- upstream: Kubernetes 1.37, kube-scheduler's DynamicResources plugin allocating on its
  own (the resource-claim controller of kube-controller-manager makes the claims), all
  at their defaults.
- draco: Kubernetes 1.34, the pods created with draco's scheduling gate
  `resource.draco.dev/allocation`; `draco run --controllers allocator,narrowing` (a
  separate process, at its defaults) allocates the claims, narrows each pod to its node
  and removes the gate; kube-scheduler 1.34 binds. Also draco's CPU seconds and peak RSS.

The figure compared is the ratio of the rates (draco / upstream; the issue asks for at
least 0.5). Both runs also check that no device went to two claims.

Runs only when named (`python -m benchmarks --only allocator_cluster`): it builds and
starts the real clusters with `hack/cluster`. `DRACO_BENCH_SIDES=upstream` (or `draco`)
runs one side only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.scenarios.cluster import Client, proc_stats, start_cluster
from tests.e2e.backends import ROOT, RealCluster

EXPLICIT_ONLY = True
DRIVER = "gpu.example.com"
NAMESPACE = "bench"
GATE = "resource.draco.dev/allocation"
RESOURCE = "/apis/resource.k8s.io/v1"


def populate(client: Client, nodes: int, per_node: int) -> None:
    """The namespace, a DeviceClass, one node-local slice per node, the claim template."""
    client.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                         "metadata": {"name": NAMESPACE}})
    client.create(f"{RESOURCE}/deviceclasses", {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}})
    client.create(f"{RESOURCE}/namespaces/{NAMESPACE}/resourceclaimtemplates", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "gpu"},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}})

    def one_node(n: int) -> None:
        node = f"node-{n}"
        client.create(f"{RESOURCE}/resourceslices", {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-gpu"},
            "spec": {"driver": DRIVER, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{d}"} for d in range(per_node)]}})

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one_node, range(nodes)))


def pod(i: int, gated: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": 0,
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu"}],
        "containers": [{"name": "c", "image": "registry.invalid/app",
                        "resources": {"claims": [{"name": "gpu"}]}}],
    }
    if gated:
        spec["schedulingGates"] = [{"name": GATE}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p-{i}"}, "spec": spec}


def unbound(client: Client) -> int:
    body = client.get(f"/api/v1/namespaces/{NAMESPACE}/pods?fieldSelector=spec.nodeName%3D") or {}
    return len(body.get("items", []))


def create_and_wait(client: Client, count: int, gated: bool, limit: float) -> dict[str, float]:
    """Create the pods (8 client threads) and wait until all are bound."""
    path = f"/api/v1/namespaces/{NAMESPACE}/pods"
    started = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: client.create(path, pod(i, gated)), range(count)))
    created = time.monotonic() - started
    while time.monotonic() - started < limit:
        left = unbound(client)
        if left == 0:
            return {"seconds": time.monotonic() - started, "create_s": created}
        time.sleep(0.5)
    raise RuntimeError(f"{unbound(client)} of {count} pods still unbound after {limit:.0f} s")


def check_allocations(client: Client, count: int) -> None:
    """Every pod's claim allocated, and no device twice."""
    claims = (client.get(f"{RESOURCE}/namespaces/{NAMESPACE}/resourceclaims") or {})["items"]
    devices = [(r["driver"], r["pool"], r["device"]) for c in claims
               for r in ((c.get("status") or {}).get("allocation") or {})
               .get("devices", {}).get("results", [])]
    if len(devices) != count or len(set(devices)) != count:
        raise RuntimeError(f"{len(claims)} claims, {len(devices)} results, "
                           f"{len(set(devices))} distinct devices; expected {count}")


def upstream_side(workdir: Path, nodes: int, per_node: int) -> dict[str, float]:
    cluster = start_cluster("1.37", nodes, workdir)
    try:
        client = Client(cluster)
        populate(client, nodes, per_node)
        time.sleep(2)  # the scheduler's informers see the slices before the first pod
        result = create_and_wait(client, nodes * per_node, gated=False, limit=900)
        check_allocations(client, nodes * per_node)
        return result
    finally:
        cluster.stop()


def draco_side(workdir: Path, nodes: int, per_node: int) -> dict[str, float]:
    cluster: RealCluster = start_cluster("1.34", nodes, workdir).install_crds()
    try:
        client = Client(cluster)
        populate(client, nodes, per_node)
        env = {**os.environ, "KUBECONFIG": str(cluster.admin_kubeconfig)}
        log = open(workdir / "draco.log", "w")  # noqa: SIM115 - closed below
        draco = subprocess.Popen([sys.executable, "-m", "operators", "run", "--controllers",
                                  "allocator,narrowing", "--log-format", "json"], env=env,
                                 cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL)
        try:
            time.sleep(6)  # its initial listing of slices, classes, claims and pods
            if draco.poll() is not None:
                raise RuntimeError(f"draco run exited ({draco.returncode}); see {workdir / 'draco.log'}")
            cpu_before, _ = proc_stats(draco.pid)
            result = create_and_wait(client, nodes * per_node, gated=True, limit=900)
            cpu_after, rss = proc_stats(draco.pid)
            check_allocations(client, nodes * per_node)
        finally:
            draco.terminate()
            draco.wait(15)
            log.close()
        return {**result, "cpu_s": cpu_after - cpu_before, "rss": float(rss)}
    finally:
        cluster.stop()


def run(quick: bool) -> list[dict[str, Any]]:
    nodes, per_node = (10, 8) if quick else (125, 8)
    pods = nodes * per_node
    sides = set(os.environ.get("DRACO_BENCH_SIDES", "upstream,draco").split(","))
    workdir = Path(tempfile.mkdtemp(prefix="draco-bench-allocator-cluster-"))
    upstream = upstream_side(workdir, nodes, per_node) if "upstream" in sides else None
    if upstream is not None:
        print(json.dumps({"upstream": upstream}), file=sys.stderr)
    draco = draco_side(workdir, nodes, per_node) if "draco" in sides else None
    if draco is not None:
        print(json.dumps({"draco": draco}), file=sys.stderr)
    rates = []
    if upstream is not None:
        rates.append(f"kube-scheduler 1.37 {pods / upstream['seconds']:.1f} pods/s "
                     f"(creation {upstream['create_s']:.1f} s, last bound "
                     f"{upstream['seconds'] - upstream['create_s']:.1f} s later)")
    if draco is not None:
        rates.append(f"draco + kube-scheduler 1.34 {pods / draco['seconds']:.1f} pods/s "
                     f"(creation {draco['create_s']:.1f} s, last bound "
                     f"{draco['seconds'] - draco['create_s']:.1f} s later; {draco['cpu_s']:.1f} CPU s, "
                     f"peak RSS {draco['rss'] / 2**20:.0f} MiB)")
    ratio = (upstream["seconds"] / draco["seconds"]
             if upstream is not None and draco is not None else None)
    result = {"scenario": f"allocate {pods} template claims on {nodes} kwok nodes, created to bound",
              "draco_s": None if draco is None else draco["seconds"],
              "baseline_s": None if upstream is None else upstream["seconds"],
              "ratio": ratio,
              "note": "; ".join(rates) + "; ratio = draco's rate / kube-scheduler's (target >= 0.5)"}
    print(json.dumps(result), file=sys.stderr)
    return [result]
