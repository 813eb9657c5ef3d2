"""The validation table (validation_cases.yaml) on the embedded server, plus the messages
users see for the rejections the issue reported, through the real kubectl."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from operators.apiserver.testing import EmbeddedCluster, Kubectl
from tests.apiserver.http import call

CASES: list[dict[str, Any]] = yaml.safe_load((Path(__file__).parent / "validation_cases.yaml").read_text())


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    """One server for the whole table: every case's object has its own name."""
    c = EmbeddedCluster(tmp_path_factory.mktemp("validation"))
    try:
        yield c
    finally:
        c.stop()


def collection_url(cluster: EmbeddedCluster, obj: dict[str, Any]) -> str:
    rt = cluster.server.registry.by_kind(obj["apiVersion"], obj["kind"])
    assert rt is not None, f"{obj['kind']} is not served"
    base = f"{cluster.url}/api/{rt.version}" if not rt.group else f"{cluster.url}/apis/{rt.group}/{rt.version}"
    ns = f"/namespaces/{obj['metadata'].get('namespace', 'default')}" if rt.namespaced else ""
    return f"{base}{ns}/{rt.plural}"


def test_the_table_is_well_formed() -> None:
    assert len(CASES) >= 50
    assert len({c["name"] for c in CASES}) == len(CASES)
    assert {frozenset(c) for c in CASES} == {frozenset({"name", "object", "accept"})}
    assert any(c["accept"] for c in CASES) and not all(c["accept"] for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_validation_case(shared: EmbeddedCluster, case: dict[str, Any]) -> None:
    code, body = call(collection_url(shared, case["object"]), "POST", case["object"])
    if case["accept"]:
        assert code == 201, f"rejected with {code}: {body.get('message')}"
    else:
        assert code in (400, 422), f"answered {code}, expected a rejection"
        assert body["kind"] == "Status" and body["status"] == "Failure"


def _case(name: str) -> dict[str, Any]:
    return next(c["object"] for c in CASES if c["name"] == name)


# (case, status code, reason, field of the first cause or None, text in the message)
MESSAGES = [
    ("slice-capacity-not-a-quantity", 400, "BadRequest", None,
     'ResourceSlice in version "v1" cannot be handled as a ResourceSlice: quantities must match '
     "the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"),
    ("slice-capacity-unknown-suffix", 400, "BadRequest", None, "quantities must match the regular expression"),
    ("slice-int-attribute-10-to-the-26", 400, "BadRequest", None,
     "json: cannot unmarshal number 100000000000000000000000000 into Go struct field "
     "DeviceAttribute.spec.devices.attributes.int of type int64"),
    ("claim-count-as-string", 400, "BadRequest", None,
     "cannot unmarshal string into Go struct field ExactDeviceRequest.spec.devices.requests.exactly.count of type int64"),
    ("devicetaintrule-name-BadName_X", 422, "Invalid", "metadata.name",
     'DeviceTaintRule.resource.draco.dev "BadName_X" is invalid: metadata.name: Invalid value: "BadName_X": '
     "a lowercase RFC 1123 subdomain must consist of"),
    ("slice-no-node-placement", 422, "Invalid", "spec",
     "spec: Required value: exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
     "`perDeviceNodeSelection` is required"),
    ("slice-attribute-name-with-dash", 422, "Invalid", "spec.devices[0].attributes[gpu-model]",
     "a valid C identifier must start with alphabetic character or '_'"),
    ("slice-version-not-semver", 422, "Invalid", "spec.devices[0].attributes[driverVersion].version",
     "must be a string compatible with semver.org spec 2.0.0"),
    ("slice-33-attributes-and-capacities", 422, "Invalid", "spec.devices[0]",
     "spec.devices[0]: Invalid value: 33: the total number of attributes and capacities must not exceed 32"),
    ("claim-constraint-unknown-request", 422, "Invalid", "spec.devices.constraints[0].requests[0]",
     "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"),
    ("class-33-selectors", 422, "Invalid", "spec.selectors", "Too many: 33: must have at most 32 items"),
    ("claim-all-with-count", 422, "Invalid", "spec.devices.requests[0].exactly.count",
     "must not be specified when allocationMode is 'All'"),
    ("gang-name-of-64-characters", 422, "Invalid", None,
     "must be at most 63 characters: pods join a Gang with the label resource.draco.dev/gang=NAME"),
]


@pytest.mark.parametrize(("name", "code", "reason", "field", "text"), MESSAGES, ids=[m[0] for m in MESSAGES])
def test_rejections_read_like_upstream(shared: EmbeddedCluster, name: str, code: int, reason: str,
                                       field: str | None, text: str) -> None:
    obj = {**_case(name), "metadata": {**_case(name)["metadata"]}}
    got, body = call(collection_url(shared, obj), "POST", obj)
    assert (got, body["reason"]) == (code, reason)
    assert text in body["message"], body["message"]
    if field is not None:
        assert body["details"]["causes"][0]["field"] == field


def test_defaults_are_stored_as_upstream_stores_them(cluster: EmbeddedCluster) -> None:
    obj = _case("claim-count-zero-is-defaulted-to-one")
    code, created = call(collection_url(cluster, obj), "POST", obj)
    assert code == 201
    exactly = created["spec"]["devices"]["requests"][0]["exactly"]
    assert (exactly["allocationMode"], exactly["count"]) == ("ExactCount", 1)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "c", "image": "i"}]}}
    code, created = call(f"{cluster.url}/api/v1/namespaces/default/pods", "POST", pod)
    assert code == 201 and created["status"]["phase"] == "Pending"


def test_kubectl_reports_bad_quantity_and_bad_name(kubectl: Kubectl, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump_all([_case("slice-capacity-not-a-quantity"),
                                       _case("devicetaintrule-name-BadName_X"),
                                       _case("slice-valid")]))
    proc = kubectl("create", "-f", str(bad), check=False)
    assert proc.returncode != 0
    assert "quantities must match the regular expression" in proc.stderr
    assert 'DeviceTaintRule.resource.draco.dev "BadName_X" is invalid: metadata.name' in proc.stderr
    assert "resourceslice.resource.k8s.io/vc-slice-valid created" in proc.stdout
    names = json.loads(kubectl("get", "resourceslices", "-o", "json").stdout)["items"]
    assert [s["metadata"]["name"] for s in names] == ["vc-slice-valid"]


RESULT = {"request": "gpu", "driver": "gpu.example.com", "pool": "node-a", "device": "gpu-0"}
POD = {"resource": "pods", "name": "p", "uid": "6c0a3b2e-0c1d-4a8e-9a53-4b7f1f0d9a11"}

# (name, status to write, reason of the first cause or None when accepted, its field)
STATUS_CASES: list[tuple[str, dict[str, Any], str | None, str]] = [
    ("allocated-and-reserved", {"allocation": {"devices": {"results": [RESULT]}}, "reservedFor": [POD]}, None, ""),
    ("reserved-without-allocation", {"reservedFor": [POD]}, "FieldValueForbidden", "status.reservedFor"),
    ("result-for-an-unknown-request", {"allocation": {"devices": {"results": [{**RESULT, "request": "nic"}]}}},
     "FieldValueInvalid", "status.allocation.devices.results[0].request"),
    ("result-with-a-bad-device-name", {"allocation": {"devices": {"results": [{**RESULT, "device": "GPU_0"}]}}},
     "FieldValueInvalid", "status.allocation.devices.results[0].device"),
    ("reserved-twice-for-one-uid", {"allocation": {"devices": {"results": [RESULT]}}, "reservedFor": [POD, POD]},
     "FieldValueDuplicate", "status.reservedFor[1].uid"),
    ("reservation-without-uid", {"allocation": {"devices": {"results": [RESULT]}},
                                 "reservedFor": [{"resource": "pods", "name": "p"}]},
     "FieldValueRequired", "status.reservedFor[0].uid"),
]


@pytest.mark.parametrize(("name", "status", "reason", "field"), STATUS_CASES, ids=[c[0] for c in STATUS_CASES])
def test_claim_status_writes(cluster: EmbeddedCluster, name: str, status: dict[str, Any],
                             reason: str | None, field: str) -> None:
    obj = _case("claim-valid")
    url = f"{collection_url(cluster, obj)}/{obj['metadata']['name']}"
    assert call(collection_url(cluster, obj), "POST", obj)[0] == 201
    code, body = call(f"{url}/status", "PATCH", {"status": status}, "application/merge-patch+json")
    if reason is None:
        assert code == 200, body
    else:
        assert (code, body["details"]["causes"][0]["reason"], body["details"]["causes"][0]["field"]) == \
            (422, reason, field)


def test_an_allocation_cannot_be_changed_once_written(cluster: EmbeddedCluster) -> None:
    obj = _case("claim-valid")
    url = f"{collection_url(cluster, obj)}/{obj['metadata']['name']}/status"
    call(collection_url(cluster, obj), "POST", obj)
    first = {"status": {"allocation": {"devices": {"results": [RESULT]}}}}
    assert call(url, "PATCH", first, "application/merge-patch+json")[0] == 200
    moved = {"status": {"allocation": {"devices": {"results": [{**RESULT, "device": "gpu-1"}]}}}}
    code, body = call(url, "PATCH", moved, "application/merge-patch+json")
    assert code == 422 and "status.allocation: Invalid value" in body["message"]
    assert "field is immutable" in body["message"]
    # reserving the allocated claim for a pod is an allowed change
    assert call(url, "PATCH", {"status": {"reservedFor": [POD]}}, "application/merge-patch+json")[0] == 200
    assert call(url, "PATCH", {"status": None}, "application/merge-patch+json")[0] == 200  # deallocation


def test_unknown_fields_of_resource_kinds_are_refused_when_strict_and_dropped_otherwise(
        cluster: EmbeddedCluster) -> None:
    obj = _case("slice-valid")
    obj = {**obj, "spec": {**obj["spec"], "devices": [{**obj["spec"]["devices"][0], "colour": "red"}]}}
    url = collection_url(cluster, obj)
    code, body = call(f"{url}?fieldValidation=Strict", "POST", obj)
    assert (code, body["reason"]) == (400, "BadRequest")
    assert body["message"] == ('ResourceSlice in version "v1" cannot be handled as a ResourceSlice: '
                               'strict decoding error: unknown field "spec.devices[0].colour"')
    code, created = call(f"{url}?fieldValidation=Ignore", "POST", obj)
    assert code == 201 and "colour" not in created["spec"]["devices"][0]
    assert created["spec"]["devices"][0]["capacity"] == {"memory": {"value": "80Gi"}}


def test_a_slice_taint_gets_its_time_added(cluster: EmbeddedCluster) -> None:
    obj = _case("slice-valid")
    device = {**obj["spec"]["devices"][0], "taints": [{"key": "example.com/broken", "effect": "NoSchedule"}]}
    obj = {**obj, "spec": {**obj["spec"], "devices": [device]}}
    code, created = call(collection_url(cluster, obj), "POST", obj)
    assert code == 201
    added = created["spec"]["devices"][0]["taints"][0]["timeAdded"]
    assert added.endswith("Z") and len(added) == len("2026-01-01T00:00:00Z")
