"""`draco demo --cluster-dir DIR` on the real 1.34 control plane: the same scenario,
kube-scheduler binding the narrowed pods, and nothing of the demo left behind."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.e2e.backends import ROOT, RealCluster

pytestmark = pytest.mark.real

LABEL = "app.kubernetes.io/part-of=draco-demo"

NARRATED = [
    "ok  demo-node-a and demo-node-b are Ready (kwok plays their kubelets)",
    "ok  allocated  gpu -> demo-node-a/gpu-0, reserved for inference-0",
    "ok  bound      kube-scheduler put inference-0 on demo-node-a (spec.nodeName)",
    "ok  allocated  gpus/a100-pair (the second choice) -> demo-node-b/gpu-0, demo-node-b/gpu-1",
    "ok  bound      kube-scheduler put training-0 on demo-node-b (spec.nodeName)",
    "ok  allocated  fpga -> demo-fabric/fpga-0",
    "ok  bound      kube-scheduler put etl-0 on demo-node-",
    "ok  explained, and nothing was written",
    "ok  EvictionInProgress=False NoEffect",
    "ok  evicted    inference-0",
    "ok  EvictionInProgress=False Completed",
    "draco demo passed: 8/8 steps in",
    "Cleaned up the demo's namespace and cluster-scoped objects.",
]


def test_the_demo_runs_on_a_real_cluster_and_cleans_up(real_cluster: RealCluster) -> None:
    proc = subprocess.run([sys.executable, "-m", "operators", "demo", "--cluster-dir", str(real_cluster.dir)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
                          env={k: v for k, v in os.environ.items() if k != "KUBECONFIG"})
    out = proc.stdout
    assert proc.returncode == 0, f"{out}\n{proc.stderr}"
    assert proc.stderr == ""
    flat, position = " ".join(out.split()), 0
    for line in NARRATED:
        found = flat.find(" ".join(line.split()), position)
        assert found >= 0, f"missing, or out of order: {line!r} in\n{out}"
        position = found
    namespace = re.search(r"\(namespace (draco-demo-[0-9a-f]+)\)", out)
    assert namespace, out

    def kubectl(*args: str) -> str:
        done = subprocess.run([real_cluster.kubectl_binary, "--kubeconfig", str(real_cluster.admin_kubeconfig),
                               *args], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
        return done.stdout

    # The cluster-scoped objects are gone; the namespace is gone or going; draco's CRDs
    # (installed by the test session, not by the demo) stay.
    left = json.loads(kubectl("get", "nodes,resourceslices,deviceclasses,devicetaintrules,resourceslicepatches",
                              "-l", LABEL, "-o", "json"))["items"]
    assert left == []
    ns = json.loads(kubectl("get", "namespaces", "-l", LABEL, "-o", "json"))["items"]
    assert all(n["metadata"].get("deletionTimestamp") for n in ns), ns
    assert "devicetaintrules.resource.draco.dev" in kubectl("get", "crd", "-o", "name")
