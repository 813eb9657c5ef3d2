"""The OpenAPI documents, as kubectl reads them: CRD kinds published from their schemas."""

from __future__ import annotations

import urllib.request

from operators.apiserver import openapi_v2
from operators.apiserver.testing import EmbeddedCluster
from tests.apiserver.http import call

DTR = "dev.draco.resource.v1alpha1.DeviceTaintRule"
GVK = {"group": "resource.draco.dev", "version": "v1alpha1", "kind": "DeviceTaintRule"}


def test_v3_publishes_the_crd_schema_with_meta_references(cluster: EmbeddedCluster) -> None:
    code, doc = call(f"{cluster.url}/openapi/v3/apis/resource.draco.dev/v1alpha1")
    assert code == 200
    schemas = doc["components"]["schemas"]
    dtr = schemas[DTR]
    assert dtr["x-kubernetes-group-version-kind"] == [GVK]
    assert dtr["properties"]["metadata"]["allOf"] == [
        {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}]
    assert dtr["properties"]["kind"]["type"] == "string"
    taint = dtr["properties"]["spec"]["properties"]["taint"]
    assert taint["required"] == ["key", "effect"] and taint["properties"]["effect"]["enum"]
    assert "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" in schemas
    listed = schemas["dev.draco.resource.v1alpha1.DeviceTaintRuleList"]
    assert listed["properties"]["items"]["items"]["allOf"] == [{"$ref": f"#/components/schemas/{DTR}"}]
    # every served kind keeps a PATCH operation that takes fieldValidation
    patch = doc["paths"]["/apis/resource.draco.dev/v1alpha1/devicetaintrules/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == GVK
    assert {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}} in patch["parameters"]


def test_v2_in_json_and_in_protobuf(cluster: EmbeddedCluster) -> None:
    code, doc = call(f"{cluster.url}/openapi/v2")
    assert code == 200 and doc["swagger"] == "2.0"
    dtr = doc["definitions"][DTR]
    assert dtr["properties"]["metadata"] == {
        "$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        "description": "Standard object metadata."}
    req = urllib.request.Request(f"{cluster.url}/openapi/v2", headers={
        "Accept": "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.headers["Content-Type"] == openapi_v2.PROTOBUF
        body = resp.read()
    assert body == openapi_v2.document(doc)
    assert body.startswith(b"\n\x032.0") and DTR.encode() in body
