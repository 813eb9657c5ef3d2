"""kubectl flows of the docs on the embedded server, with whichever kubectl runs the
suite (KUBECTL or PATH; checked with 1.32 and 1.37): Lists and multi-document files,
client-side validation of Lists, `wait` over watch-lists, `explain` of draco's CRDs,
the default table columns, and `draco apiserver` itself."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import yaml

from operators.apiserver.runner import free_port
from operators.apiserver.testing import EmbeddedCluster, Kubectl, kubectl_binary, wait_for
from tests.apiserver.http import call

RULES = "/apis/resource.draco.dev/v1alpha1/devicetaintrules"


def rule(name: str, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "resource.draco.dev/v1alpha1", "kind": "DeviceTaintRule",
            "metadata": {"name": name},
            "spec": {"deviceSelector": {"driver": "gpu.example.com"},
                     "taint": {"key": "example.com/maintenance", "effect": "NoExecute", **extra}}}


def claim(name: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}


def configmap(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}}


def test_create_and_apply_of_a_list_and_of_a_multi_document_file(kubectl: Kubectl, tmp_path: Path) -> None:
    listed = tmp_path / "list.yaml"
    listed.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List",
                                      "items": [configmap("cm"), rule("r1"), claim("c1")]}))
    out = kubectl("create", "-f", str(listed)).stdout
    assert out.split("\n")[:3] == ["configmap/cm created", "devicetaintrule.resource.draco.dev/r1 created",
                                   "resourceclaim.resource.k8s.io/c1 created"]
    out = kubectl("apply", "--validate=strict", "-f", str(listed)).stdout
    assert "devicetaintrule.resource.draco.dev/r1 configured" in out
    docs = tmp_path / "docs.yaml"
    docs.write_text(yaml.safe_dump_all([rule("r2"), claim("c2"), configmap("cm2")]))
    kubectl("create", "-f", str(docs))
    assert "configmap/cm2 configured" in kubectl("apply", "-f", str(docs)).stdout  # annotation added
    again = kubectl("apply", "-f", str(docs)).stdout
    assert "devicetaintrule.resource.draco.dev/r2 unchanged" in again and "configmap/cm2 unchanged" in again
    rules = json.loads(kubectl("get", "dtr", "-o", "json").stdout)["items"]
    assert sorted(r["metadata"]["name"] for r in rules) == ["r1", "r2"]


def test_a_list_is_validated_client_side_against_the_crd_schema(kubectl: Kubectl, tmp_path: Path) -> None:
    listed = tmp_path / "list.yaml"
    listed.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List",
                                      "items": [configmap("cm"), rule("r1", colour="red")]}))
    proc = kubectl("create", "-f", str(listed), check=False)
    assert proc.returncode != 0
    assert 'unknown field "colour"' in proc.stderr and "DeviceTaintRule.spec.taint" in proc.stderr
    assert kubectl("get", "configmap", "cm", check=False).returncode != 0  # nothing was created
    assert "created" in kubectl("create", "--validate=false", "-f", str(listed)).stdout


def test_wait_for_a_condition_set_later_by_another_client(kubectl: Kubectl, cluster: EmbeddedCluster) -> None:
    kubectl("create", "-f", "-", input=yaml.safe_dump(rule("maint")))
    status = {"status": {"conditions": [{"type": "EvictionInProgress", "status": "False", "reason": "Completed",
                                         "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}

    def later() -> None:
        time.sleep(0.7)
        call(f"{cluster.url}{RULES}/maint/status", "PATCH", status, "application/merge-patch+json")

    t = threading.Thread(target=later)
    t.start()
    started = time.monotonic()
    out = kubectl("wait", "--for=condition=EvictionInProgress=false", "dtr/maint", "--timeout=20s").stdout
    t.join()
    assert "condition met" in out and time.monotonic() - started < 10
    # already true: returns at once from the initial events
    assert "condition met" in kubectl("wait", "--for=condition=EvictionInProgress=false", "dtr/maint",
                                      "--timeout=5s").stdout


def test_wait_for_delete_of_a_pod(kubectl: Kubectl, cluster: EmbeddedCluster) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "finalizers": ["example.com/hold"]},
           "spec": {"containers": [{"name": "c", "image": "i"}]}}
    kubectl("create", "-f", "-", input=yaml.safe_dump(pod))
    kubectl("delete", "pod", "p", "--wait=false")

    def later() -> None:
        time.sleep(0.7)
        call(f"{cluster.url}/api/v1/namespaces/default/pods/p", "PATCH",
             {"metadata": {"finalizers": None}}, "application/merge-patch+json")

    t = threading.Thread(target=later)
    t.start()
    kubectl("wait", "--for=delete", "pod/p", "--timeout=20s")
    t.join()
    assert cluster.get("", "v1", "pods", "p", "default") is None


def test_explain_reads_the_crd_schemas(kubectl: Kubectl) -> None:
    out = kubectl("explain", "dtr.spec.taint").stdout
    assert "KIND:       DeviceTaintRule" in out and "FIELD: taint <Object>" in out
    for line in ("effect\t<string> -required-", "key\t<string> -required-", "timeAdded\t<string>"):
        assert line in out, out
    assert "enum: None, NoSchedule, NoExecute" in out
    top = kubectl("explain", "dtr").stdout
    assert "metadata\t<ObjectMeta>" in top and "spec\t<Object> -required-" in top
    assert "FIELD: labels <map[string]string>" in kubectl("explain", "dtr.metadata.labels").stdout
    nested = kubectl("explain", "resourceslicepatches.spec.devices.filter").stdout
    assert "selectors\t<[]Object>" in nested and "deviceClassName\t<string>" in nested


def test_default_columns_of_pods_events_and_nodes(kubectl: Kubectl, cluster: EmbeddedCluster) -> None:
    pods = f"{cluster.url}/api/v1/namespaces/default/pods"
    call(pods, "POST", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
                        "spec": {"nodeName": "node-0", "containers": [{"name": "a", "image": "i"},
                                                                       {"name": "b", "image": "i"}]}})
    running = {"phase": "Running", "podIPs": [{"ip": "10.0.0.7"}], "containerStatuses": [
        {"name": "a", "ready": True, "restartCount": 2, "state": {"running": {}}},
        {"name": "b", "ready": False, "restartCount": 1, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}
    call(f"{pods}/web/status", "PATCH", {"status": running}, "application/merge-patch+json")
    call(f"{cluster.url}/api/v1/namespaces/default/events", "POST", {
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": "web.1"},
        "involvedObject": {"kind": "Pod", "name": "web", "namespace": "default"},
        "reason": "Evicted", "message": "device tainted ", "type": "Warning", "count": 3,
        "source": {"component": "draco"}, "firstTimestamp": "2026-01-01T00:00:00Z",
        "lastTimestamp": "2026-01-01T00:00:00Z"})
    table = kubectl("get", "pods", "-A").stdout.splitlines()
    assert table[0].split() == ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert table[1].split()[:5] == ["default", "web", "1/2", "CrashLoopBackOff", "3"]
    wide = kubectl("get", "pods", "-o", "wide").stdout.splitlines()
    assert wide[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE",
                               "NOMINATED", "NODE", "READINESS", "GATES"]
    assert wide[1].split()[5:] == ["10.0.0.7", "node-0", "<none>", "<none>"]
    events = kubectl("get", "events", "-A").stdout.splitlines()
    assert events[0].split() == ["NAMESPACE", "LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert events[1].split()[2:] == ["Warning", "Evicted", "pod/web", "device", "tainted"]
    ev_wide = kubectl("get", "events", "-o", "wide").stdout.splitlines()
    assert ev_wide[0].split()[-6:] == ["MESSAGE", "FIRST", "SEEN", "COUNT", "NAME"][-6:] or \
        ev_wide[0].split()[-5:] == ["MESSAGE", "FIRST", "SEEN", "COUNT", "NAME"]
    assert ev_wide[1].split()[-3:] == ["3", "web.1"][-3:] or ev_wide[1].split()[-2:] == ["3", "web.1"]
    call(f"{cluster.url}/api/v1/nodes", "POST", {"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": "node-0", "labels": {"node-role.kubernetes.io/worker": ""}}})
    call(f"{cluster.url}/api/v1/nodes/node-0/status", "PATCH", {"status": {
        "conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": {"kubeletVersion": "v1.34.4"}}},
        "application/merge-patch+json")
    nodes = kubectl("get", "nodes").stdout.splitlines()
    assert nodes[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert nodes[1].split()[:3] == ["node-0", "Ready", "worker"] and nodes[1].split()[-1] == "v1.34.4"


def test_draco_apiserver_serves_plain_http_on_loopback(tmp_path: Path) -> None:
    port = free_port()
    config = tmp_path / "kc"
    proc = subprocess.Popen([sys.executable, "-m", "operators", "apiserver", "--port", str(port),
                             "--kubeconfig-out", str(config)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        # a fresh interpreter imports draco first: seconds on a quiet machine, far more on a
        # busy one; the process ending early is the failure, not the time it takes
        wait_for(lambda: proc.poll() is not None or (config.exists() and _listening(port)), 180,
                 what="draco apiserver to listen")
        assert proc.poll() is None, proc.communicate()[0]
        server = yaml.safe_load(config.read_text())["clusters"][0]["cluster"]["server"]
        assert server == f"http://127.0.0.1:{port}"
        env = {**os.environ, "KUBECONFIG": str(config), "KUBECACHEDIR": str(tmp_path / "cache")}
        out = subprocess.run([kubectl_binary(), "get", "namespaces", "-o", "name"], env=env,
                             capture_output=True, text=True, timeout=30)
        assert "namespace/default" in out.stdout, out.stderr
    finally:
        proc.terminate()
        proc.wait(10)


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0
