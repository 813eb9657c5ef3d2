"""Eviction side by side on real control planes: draco (1.34) and upstream (1.37).

1,000 pods on 125 kwok nodes, each with its own claim allocated one of the 1,000
devices; one NoExecute DeviceTaintRule over all of them. Measured: the time from the
rule's creation until every pod is gone and the rule's `EvictionInProgress` condition is
False — for draco's eviction controller (`draco run --controllers eviction`, as a
separate process, at its default settings) on Kubernetes 1.34, and for upstream's
device-taint-eviction controller in kube-controller-manager 1.37 with a
`resource.k8s.io/v1` DeviceTaintRule (draco off), at its defaults too. Also draco's peak
RSS and CPU seconds during its run.

Runs only when named (`python -m benchmarks --only cluster`): it builds and starts the
real clusters with `hack/cluster`.
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

from tests.e2e.backends import HACK_CLUSTER, ROOT, Backend, RealCluster

EXPLICIT_ONLY = True
DRIVER = "gpu.example.com"
NAMESPACE = "bench"


class Client(Backend):
    """The e2e tests' HTTP helper, pointed at a benchmark cluster."""

    def __init__(self, cluster: RealCluster) -> None:
        self.url = cluster.url
        self.ssl_context = cluster.ssl
        self.ns = NAMESPACE


def start_cluster(k8s: str, nodes: int, workdir: Path, *extra: str) -> RealCluster:
    """`hack/cluster up` in WORKDIR/cluster-K8S, with EXTRA flags of `up`."""
    directory = workdir / f"cluster-{k8s}"
    proc = subprocess.run([str(HACK_CLUSTER), "up", "--k8s", k8s, "--dir", str(directory),
                           "--nodes", str(nodes), *extra], capture_output=True, text=True,
                          timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(f"hack/cluster up --k8s {k8s} failed:\n{proc.stderr[-3000:]}")
    return RealCluster(directory, owned=True)


def populate(client: Client, nodes: int, per_node: int) -> list[str]:
    """Slices, claims, pods bound to kwok nodes, and allocations reserved for the pods."""
    client.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                         "metadata": {"name": NAMESPACE}})
    claims = f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims"
    pods = f"/api/v1/namespaces/{NAMESPACE}/pods"

    def one_node(n: int) -> list[str]:
        node = f"node-{n}"
        client.create("/apis/resource.k8s.io/v1/resourceslices", {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-gpu"},
            "spec": {"driver": DRIVER, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{d}"} for d in range(per_node)]}})
        names = []
        for d in range(per_node):
            name = f"p-{n}-{d}"
            client.create(claims, {
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": name},
                "spec": {"devices": {"requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}})
            pod = client.create(pods, {
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0,
                         "resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
                         "containers": [{"name": "c", "image": "registry.invalid/app"}]}})
            client.merge_patch(f"{claims}/{name}/status", {"status": {
                "allocation": {"devices": {"results": [
                    {"request": "gpu", "driver": DRIVER, "pool": node, "device": f"gpu-{d}"}]}},
                "reservedFor": [{"resource": "pods", "name": name,
                                 "uid": pod["metadata"]["uid"]}]}})
            names.append(name)
        return names

    with ThreadPoolExecutor(8) as pool:
        return [name for names in pool.map(one_node, range(nodes)) for name in names]


def remaining_pods(client: Client) -> int:
    body = client.get(f"/api/v1/namespaces/{NAMESPACE}/pods") or {}
    return len(body.get("items", []))


def condition_false(client: Client, path: str) -> bool:
    conds = ((client.get(path) or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == "EvictionInProgress" and c["status"] == "False" for c in conds)


def wait_done(client: Client, rule_path: str, limit: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < limit:
        if remaining_pods(client) == 0 and condition_false(client, rule_path):
            return time.monotonic() - started
        time.sleep(0.1)
    raise RuntimeError(f"not done after {limit:.0f} s: {remaining_pods(client)} pods left")


def proc_stats(pid: int) -> tuple[float, int]:
    """CPU seconds and peak RSS (bytes) of a process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    hwm = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines()
               if line.startswith("VmHWM:"))
    return cpu, int(hwm.split()[1]) * 1024


def rule(api_version: str) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": "DeviceTaintRule", "metadata": {"name": "drain"},
            "spec": {"deviceSelector": {"driver": DRIVER},
                     "taint": {"key": "example.com/drain", "effect": "NoExecute"}}}


def draco_side(workdir: Path, nodes: int, per_node: int, *flags: str) -> dict[str, Any]:
    cluster = start_cluster("1.34", nodes, workdir).install_crds()
    try:
        client = Client(cluster)
        populate(client, nodes, per_node)
        env = {**os.environ, "KUBECONFIG": str(cluster.admin_kubeconfig)}
        log = open(workdir / "draco.log", "w")  # noqa: SIM115 - closed below
        draco = subprocess.Popen([sys.executable, "-m", "operators", "run", "--controllers",
                                  "eviction", "--log-format", "json", *flags], env=env, cwd=ROOT,
                                 stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            time.sleep(6)  # its initial listing of 1,000 claims and pods
            cpu_before, _ = proc_stats(draco.pid)
            path = "/apis/resource.draco.dev/v1alpha1/devicetaintrules"
            client.create(path, rule("resource.draco.dev/v1alpha1"))
            seconds = wait_done(client, f"{path}/drain", 300)
            cpu_after, rss = proc_stats(draco.pid)
        finally:
            draco.terminate()
            draco.wait(15)
            log.close()
        return {"seconds": seconds, "cpu_s": cpu_after - cpu_before, "rss": rss}
    finally:
        cluster.stop()


def upstream_side(workdir: Path, nodes: int, per_node: int) -> float:
    cluster = start_cluster("1.37", nodes, workdir)
    try:
        client = Client(cluster)
        populate(client, nodes, per_node)
        path = "/apis/resource.k8s.io/v1/devicetaintrules"
        client.create(path, rule("resource.k8s.io/v1"))
        return wait_done(client, f"{path}/drain", 900)
    finally:
        cluster.stop()


def run(quick: bool) -> list[dict[str, Any]]:
    nodes, per_node = (10, 8) if quick else (125, 8)
    pods = nodes * per_node
    workdir = Path(tempfile.mkdtemp(prefix="draco-bench-cluster-"))
    draco = draco_side(workdir, nodes, per_node)
    upstream_s = upstream_side(workdir, nodes, per_node)
    ratio = upstream_s / draco["seconds"]
    result = {"scenario": f"evict {pods} pods on {nodes} kwok nodes, condition False",
              "draco_s": draco["seconds"], "baseline_s": upstream_s, "ratio": ratio,
              "note": (f"draco on 1.34 vs upstream kcm 1.37 (both at defaults); draco "
                       f"{draco['cpu_s']:.1f} CPU s, peak RSS {draco['rss'] / 2**20:.0f} MiB; "
                       "target: ratio >= 2, draco < 20 s")}
    print(json.dumps(result), file=sys.stderr)
    return [result]
