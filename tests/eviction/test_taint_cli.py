"""`draco taint`: preview, confirmation, creation and removal against the embedded server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from operators.apiserver.testing import EmbeddedCluster, Kubectl

ROOT = Path(__file__).resolve().parents[2]


def draco(cluster: EmbeddedCluster, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    return subprocess.run([sys.executable, "-m", "operators", "taint", *args], capture_output=True,
                          text=True, env=env, stdin=subprocess.DEVNULL, timeout=60)


def test_taint_previews_asks_creates_and_removes(cluster: EmbeddedCluster, kubectl: Kubectl) -> None:
    kubectl("apply", "-f", str(ROOT / "examples" / "cluster.yaml"))
    # the example claim is reserved for trainer-0's uid in the file; make the live pod match
    pod = json.loads(kubectl("get", "pod", "-n", "team-a", "trainer-0", "-o", "json").stdout)
    kubectl("patch", "resourceclaim", "-n", "team-a", "training", "--subresource", "status", "--type", "merge",
            "-p", json.dumps({"status": {"reservedFor": [
                {"resource": "pods", "name": "trainer-0", "uid": pod["metadata"]["uid"]}]}}))
    refused = draco(cluster, "pool=node-a", "example.com/maint:NoExecute", "--name", "maint")
    assert refused.returncode == 1 and "--yes" in refused.stderr
    assert "evicts 1 pod(s) in 1 namespace(s)" in refused.stdout and "team-a/trainer-0" in refused.stdout
    assert kubectl("get", "devicetaintrules", "-o", "name").stdout == ""
    created = draco(cluster, "pool=node-a", "example.com/maint:NoExecute", "--name", "maint", "--yes")
    assert created.returncode == 0, created.stderr
    rule = json.loads(kubectl("get", "dtr", "maint", "-o", "json").stdout)
    assert rule["spec"] == {"deviceSelector": {"pool": "node-a"},
                            "taint": {"key": "example.com/maint", "effect": "NoExecute"}}
    removed = draco(cluster, "pool=node-a", "example.com/maint:NoExecute-")
    assert removed.returncode == 0 and "maint deleted" in removed.stdout
    assert kubectl("get", "devicetaintrules", "-o", "name").stdout == ""


def test_empty_selector_needs_all_and_writes_all_true(cluster: EmbeddedCluster, kubectl: Kubectl) -> None:
    refused = draco(cluster, "", "k:NoSchedule")
    assert refused.returncode == 2 and "--all" in refused.stderr
    ok = draco(cluster, "", "k:NoSchedule", "--all", "--name", "everything")
    assert ok.returncode == 0, ok.stderr
    rule = json.loads(kubectl("get", "dtr", "everything", "-o", "json").stdout)
    assert rule["spec"]["deviceSelector"] == {"all": True}
    legacy = draco(cluster, "", "k2:NoSchedule", "--all-devices", "--name", "everything-2")  # the old spelling
    assert legacy.returncode == 0, legacy.stderr
    both = draco(cluster, "pool=a", "k:NoSchedule", "--all")
    assert both.returncode == 2 and "--all selects every device" in both.stderr
    removed = draco(cluster, "", "k:NoSchedule-", "--all")
    assert removed.returncode == 0 and "everything deleted" in removed.stdout, removed.stderr
    # the CRD itself refuses an empty selector, as kubectl users meet it
    applied = kubectl("apply", "-f", "-", check=False, input=json.dumps({
        "apiVersion": "resource.draco.dev/v1alpha1", "kind": "DeviceTaintRule", "metadata": {"name": "empty"},
        "spec": {"deviceSelector": {}, "taint": {"key": "k", "effect": "NoExecute"}}}))
    assert applied.returncode != 0 and "an empty deviceSelector selects every device" in applied.stderr
    bad = draco(cluster, "rack=r1", "k:NoSchedule")
    assert bad.returncode == 2 and "bad selector" in bad.stderr
