"""KEP-3838 pod-update rules: the data table, directly and through the real kubectl."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from operators.apiserver.testing import EmbeddedCluster, Kubectl
from operators.apiserver.validation.pods import validate_pod_update

CASES = yaml.safe_load((Path(__file__).with_name("pod_update_cases.yaml")).read_text())


def pod(spec: dict[str, Any]) -> dict[str, Any]:
    full = {"containers": [{"name": "c", "image": "v1"}], **spec}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": full}


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_pod_update_table(case: dict[str, Any]) -> None:
    causes = validate_pod_update(pod(case["old"]), pod(case["new"]))
    assert sorted(c["field"] for c in causes) == sorted(case["errors"]), causes


def test_kubectl_narrows_a_gated_pod_and_removes_the_gate(kubectl: Kubectl, cluster: EmbeddedCluster) -> None:
    kubectl("apply", "-f", "-", input=json.dumps(pod({"schedulingGates": [{"name": "resource.draco.dev/allocation"}]})))
    narrow = [
        {"op": "add", "path": "/spec/affinity", "value": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}]}}}},
        {"op": "remove", "path": "/spec/schedulingGates"},
    ]
    kubectl("patch", "pod", "p", "--type", "json", "-p", json.dumps(narrow))
    got = json.loads(kubectl("get", "pod", "p", "-o", "json").stdout)
    assert "schedulingGates" not in got["spec"]
    assert got["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    # once ungated, the affinity is immutable again: a 422 with the field cause
    proc = kubectl("patch", "pod", "p", "--type", "merge", "-p",
                   '{"spec":{"nodeSelector":{"zone":"a"}}}', check=False)
    assert proc.returncode != 0 and "pod updates may not change fields" in proc.stderr
    assert "is invalid" in proc.stderr


def test_eviction_honours_a_pod_disruption_budget(kubectl: Kubectl, cluster: EmbeddedCluster) -> None:
    from tests.apiserver.http import call

    base = f"{cluster.url}/api/v1/namespaces/default/pods"
    for name in ("a", "b"):
        p = pod({})
        p["metadata"] = {"name": name, "labels": {"app": "x"}}
        call(base, "POST", p)
        call(f"{base}/{name}/status", "PATCH", {"status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True"}]}}, "application/merge-patch+json")
    kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "keep-one"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "x"}}}}))
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "a"}}
    code, _ = call(f"{base}/a/eviction", "POST", eviction)
    assert code == 201
    eviction["metadata"]["name"] = "b"
    code, status = call(f"{base}/b/eviction", "POST", eviction)
    assert code == 429 and status["reason"] == "TooManyRequests"
    assert "disruption budget keep-one needs 1 healthy pods and has 1 currently" in status["message"]
    assert call(f"{base}/b")[0] == 200
