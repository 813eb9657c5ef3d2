"""The kubectl flows the docs show, on the embedded server and a real one alike."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.e2e.backends import Backend


def claim(name: str) -> dict[str, object]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "gpu"}}]}}}


def test_create_and_apply_of_a_list_and_of_a_multi_document_file(
        backend: Backend, tmp_path: Path) -> None:
    list_flow(backend, tmp_path)


def test_explain_reads_draco_crd_schemas(backend: Backend) -> None:
    explain_flow(backend)


def test_default_columns_of_pods_and_events(backend: Backend) -> None:
    columns_flow(backend)


def test_kubectl_137_on_the_embedded_server(embedded_137: Backend, tmp_path: Path) -> None:
    """kubectl 1.37 lists with watch-lists and validates Lists against /openapi/v2."""
    list_flow(embedded_137, tmp_path)
    explain_flow(embedded_137)
    columns_flow(embedded_137)
    embedded_137.request("DELETE", f"/api/v1/namespaces/{embedded_137.ns}/pods/web")
    embedded_137.kubectl("wait", "--for=delete", "pod/web", "--timeout=20s")
    embedded_137.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "resource.draco.dev/v1alpha1", "kind": "DeviceTaintRule",
        "metadata": {"name": "r"},
        "spec": {"deviceSelector": {"all": True}, "taint": {"key": "k", "effect": "NoSchedule"}}}))
    embedded_137.request("PATCH", "/apis/resource.draco.dev/v1alpha1/devicetaintrules/r/status",
                         {"status": {"conditions": [{
                             "type": "EvictionInProgress", "status": "False", "reason": "NotStarted",
                             "message": "m", "lastTransitionTime": "2026-11-23T10:00:00Z"}]}},
                         "application/merge-patch+json")
    embedded_137.kubectl("wait", "--for=condition=EvictionInProgress=false",
                         "devicetaintrule/r", "--timeout=20s")


def list_flow(backend: Backend, tmp_path: Path) -> None:
    listed = tmp_path / "list.yaml"
    listed.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List",
                                      "items": [claim("one"), claim("two")]}))
    created = backend.kubectl("create", "-f", str(listed))
    assert "resourceclaim.resource.k8s.io/one created" in created.stdout
    applied = backend.kubectl("apply", "-f", str(listed))
    assert "resourceclaim.resource.k8s.io/two unchanged" in applied.stdout \
        or "resourceclaim.resource.k8s.io/two configured" in applied.stdout
    docs = tmp_path / "docs.yaml"
    docs.write_text(yaml.safe_dump_all([claim("three"), claim("four")]))
    backend.kubectl("apply", "-f", str(docs))
    names = json.loads(backend.kubectl("get", "resourceclaims", "-o", "json").stdout)["items"]
    assert sorted(c["metadata"]["name"] for c in names) == ["four", "one", "three", "two"]


def explain_flow(backend: Backend) -> None:
    out = backend.kubectl("explain", "dtr.spec.taint").stdout
    assert "KIND:" in out and "DeviceTaintRule" in out
    for field in ("effect", "key", "timeAdded", "value"):
        assert field in out, out
    out = backend.kubectl("explain", "rsp.spec.devices.filter").stdout
    assert "selectors" in out and "deviceClassName" in out


def columns_flow(backend: Backend) -> None:
    backend.create(f"/api/v1/namespaces/{backend.ns}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
        "spec": {"schedulerName": "nobody", "containers": [{"name": "c", "image": "i"}]}})
    backend.create(f"/api/v1/namespaces/{backend.ns}/events", {
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": "web.1"},
        "involvedObject": {"kind": "Pod", "name": "web", "namespace": backend.ns},
        "reason": "Testing", "message": "hello", "type": "Normal", "count": 1,
        "lastTimestamp": "2026-11-23T10:00:00Z", "firstTimestamp": "2026-11-23T10:00:00Z"})
    pods = backend.kubectl("get", "pods", "-A").stdout.splitlines()
    assert pods[0].split() == ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    row = next(line.split() for line in pods if line.split()[:2] == [backend.ns, "web"])
    assert row[2:5] == ["0/1", "Pending", "0"]
    wide = backend.kubectl("get", "pods", "-o", "wide").stdout.splitlines()[0].split()
    assert wide[:5] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert "NOMINATED" in wide and "READINESS" in wide and "NODE" in wide and "IP" in wide
    events = backend.kubectl("get", "events", "-A").stdout.splitlines()
    assert events[0].split() == ["NAMESPACE", "LAST", "SEEN", "TYPE", "REASON", "OBJECT",
                                 "MESSAGE"]
    row = next(line.split() for line in events if line.split()[0] == backend.ns and "hello" in line)
    assert row[0] == backend.ns and row[2:] == ["Normal", "Testing", "pod/web", "hello"]
