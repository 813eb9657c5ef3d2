"""The embedded API server as kubectl sees it."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from operators.apiserver.testing import EmbeddedCluster, Kubectl
from tests.apiserver.http import call

HERE = Path(__file__).parent
ROOT = HERE.parents[1]

WIDGET = """
apiVersion: example.com/v1
kind: Widget
metadata: {name: w1, labels: {tier: gold}}
spec: {size: small}
"""


def test_apply_draco_crds_and_get_them(kubectl: Kubectl) -> None:
    out = kubectl("apply", "-f", str(ROOT / "crds")).stdout
    assert "resourceslicepatches.resource.draco.dev" in out
    crds = json.loads(kubectl("get", "crd", "-o", "json").stdout)
    established = {c["metadata"]["name"]: {x["type"]: x["status"] for x in c["status"]["conditions"]}
                   for c in crds["items"]}
    assert all(conds.get("Established") == "True" for conds in established.values())


def test_custom_resource_lifecycle_with_printer_columns(kubectl: Kubectl, cluster: EmbeddedCluster) -> None:
    kubectl("apply", "-f", str(HERE / "widgets.yaml"))
    kubectl("apply", "-f", "-", input=WIDGET)
    table = kubectl("get", "widgets").stdout.splitlines()
    assert table[0].split() == ["NAME", "SIZE", "READY", "AGE"]
    assert table[1].split()[:2] == ["w1", "small"]
    # defaulting from the structural schema
    w = json.loads(kubectl("get", "wd", "w1", "-o", "json").stdout)
    assert w["spec"]["replicas"] == 1 and w["metadata"]["generation"] == 1
    kubectl("patch", "widget", "w1", "--type", "merge", "-p", '{"spec":{"size":"large"}}')
    w = json.loads(kubectl("get", "widget", "w1", "-o", "json").stdout)
    assert w["spec"]["size"] == "large" and w["metadata"]["generation"] == 2
    # label selectors
    assert "w1" in kubectl("get", "widgets", "-l", "tier=gold", "-o", "name").stdout
    assert kubectl("get", "widgets", "-l", "tier in (silver)", "-o", "name").stdout == ""
    assert "w1" in kubectl("get", "gadgets", "-o", "name").stdout  # category
    kubectl("delete", "widget", "w1")
    assert kubectl("get", "widget", "w1", check=False).returncode != 0


def test_schema_violations_are_rejected_with_field_causes(kubectl: Kubectl) -> None:
    kubectl("apply", "-f", str(HERE / "widgets.yaml"))
    bad = WIDGET.replace("size: small", "size: huge")
    proc = kubectl("apply", "-f", "-", input=bad, check=False)
    assert proc.returncode != 0
    assert 'spec.size: Unsupported value: "huge": supported values: "small", "large"' in proc.stderr
    unknown = WIDGET.replace("size: small", "size: small, colour: red")
    proc = kubectl("apply", "-f", "-", input=unknown, check=False)
    assert proc.returncode != 0 and 'unknown field "spec.colour"' in proc.stderr


def test_kubectl_wait_for_condition_false_set_by_another_client(
        kubectl: Kubectl, cluster: EmbeddedCluster) -> None:
    kubectl("apply", "-f", str(HERE / "widgets.yaml"))
    kubectl("apply", "-f", "-", input=WIDGET)
    url = f"{cluster.url}/apis/example.com/v1/namespaces/default/widgets/w1/status"

    def later() -> None:
        time.sleep(1.0)
        code, body = call(url, "PATCH", {"status": {"conditions": [{"type": "Ready", "status": "False"}]}},
                          "application/merge-patch+json")
        assert code == 200, body

    t = threading.Thread(target=later)
    t.start()
    started = time.monotonic()
    kubectl("wait", "--for=condition=Ready=false", "widget/w1", "--timeout=20s")
    t.join()
    assert time.monotonic() - started >= 0.9
    assert "False" in kubectl("get", "widget", "w1").stdout.splitlines()[1]


def test_status_subresource_is_separate_from_the_main_resource(cluster: EmbeddedCluster, kubectl: Kubectl) -> None:
    kubectl("apply", "-f", str(HERE / "widgets.yaml"))
    kubectl("apply", "-f", "-", input=WIDGET)
    base = f"{cluster.url}/apis/example.com/v1/namespaces/default/widgets/w1"
    code, body = call(base, "PATCH", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
                      "application/merge-patch+json")
    assert code == 200 and "conditions" not in (body.get("status") or {})
    code, body = call(base + "/status", "PATCH", {"spec": {"size": "large"},
                                                  "status": {"conditions": [{"type": "Ready", "status": "True"}]}},
                      "application/merge-patch+json")
    assert code == 200
    assert body["spec"]["size"] == "small" and body["status"]["conditions"][0]["status"] == "True"
    assert body["metadata"]["generation"] == 1  # status writes never bump generation
