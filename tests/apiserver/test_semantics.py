"""Object semantics of the embedded server, over plain HTTP: the contract kopf relies on."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

from operators.apiserver.errors import APIError
from operators.apiserver.registry import Registry
from operators.apiserver.store import Store
from operators.apiserver.testing import EmbeddedCluster
from tests.apiserver.http import call, watch_lines

MERGE = "application/merge-patch+json"


def cm(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "labels": labels}, "data": {"k": "v"}}


def test_two_writers_one_gets_409(cluster: EmbeddedCluster) -> None:
    base = f"{cluster.url}/api/v1/namespaces/default/configmaps"
    code, created = call(base, "POST", cm("c"))
    assert code == 201
    stale = created["metadata"]["resourceVersion"]
    first = {**created, "data": {"k": "one"}}
    second = {**created, "data": {"k": "two"}}
    assert call(f"{base}/c", "PUT", first)[0] == 200
    code, status = call(f"{base}/c", "PUT", second)
    assert code == 409 and status["kind"] == "Status" and status["reason"] == "Conflict"
    assert "the object has been modified" in status["message"]
    # a merge patch carrying the stale resourceVersion is refused the same way
    code, _ = call(f"{base}/c", "PATCH", {"metadata": {"resourceVersion": stale}, "data": {"k": "3"}}, MERGE)
    assert code == 409


def test_watch_resumes_without_missing_or_repeating(cluster: EmbeddedCluster) -> None:
    base = f"{cluster.url}/api/v1/namespaces/default/configmaps"
    for i in range(3):
        call(base, "POST", cm(f"a{i}"))
    code, listing = call(base)
    rv = listing["metadata"]["resourceVersion"]
    call(base, "POST", cm("b0"))
    call(f"{base}/a0", "PATCH", {"data": {"k": "changed"}}, MERGE)
    call(f"{base}/a1", "DELETE")
    events = watch_lines(f"{base}?watch=true&resourceVersion={rv}&timeoutSeconds=2", 3)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "b0"), ("MODIFIED", "a0"), ("DELETED", "a1")]
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs) and rvs[0] > int(rv)
    # resuming from the second event gives exactly the third
    again = watch_lines(f"{base}?watch=true&resourceVersion={rvs[1]}&timeoutSeconds=1", 5)
    assert [e["type"] for e in again] == ["DELETED"]


def test_watch_filters_by_field_and_label_selector(cluster: EmbeddedCluster) -> None:
    base = f"{cluster.url}/api/v1/namespaces/default/configmaps"
    call(base, "POST", cm("x", app="a"))
    call(base, "POST", cm("y", app="b"))
    events = watch_lines(f"{base}?watch=1&fieldSelector=metadata.name%3Dy&timeoutSeconds=1", 5)
    assert [e["object"]["metadata"]["name"] for e in events] == ["y"]
    code, listing = call(f"{base}?labelSelector=app%21%3Da")
    assert [i["metadata"]["name"] for i in listing["items"]] == ["y"]


def test_too_old_resource_version_is_410_gone() -> None:
    store = Store()
    store.history = type(store.history)(maxlen=3)
    rt = Registry.with_builtins().get("", "v1", "configmaps")
    assert rt is not None
    for i in range(6):
        store.create(rt, "default", cm(f"c{i}"))
    with pytest.raises(APIError) as err:
        store.watch(rt, None, lambda o: True, since=1)
    assert err.value.code == 410 and err.value.reason == "Expired"


def test_paging_with_limit_and_continue(cluster: EmbeddedCluster) -> None:
    base = f"{cluster.url}/api/v1/namespaces/default/configmaps"
    for i in range(5):
        call(base, "POST", cm(f"p{i}"))
    names: list[str] = []
    url = f"{base}?limit=2"
    pages = 0
    while True:
        code, page = call(url)
        pages += 1
        names += [i["metadata"]["name"] for i in page["items"]]
        token = page["metadata"].get("continue")
        if not token:
            break
        url = f"{base}?limit=2&continue={token}"
    assert names == [f"p{i}" for i in range(5)] and pages == 3


def test_finalizers_hold_deletion_until_removed(cluster: EmbeddedCluster) -> None:
    base = f"{cluster.url}/api/v1/namespaces/default/configmaps"
    obj = cm("f")
    obj["metadata"]["finalizers"] = ["example.com/hold"]
    call(base, "POST", obj)
    code, body = call(f"{base}/f", "DELETE")
    assert code == 200 and body["metadata"]["deletionTimestamp"]
    assert call(f"{base}/f")[0] == 200
    call(f"{base}/f", "PATCH", {"metadata": {"finalizers": None}}, MERGE)
    assert call(f"{base}/f")[0] == 404


def test_delete_preconditions(cluster: EmbeddedCluster) -> None:
    base = f"{cluster.url}/api/v1/namespaces/default/configmaps"
    _, created = call(base, "POST", cm("d"))
    code, status = call(f"{base}/d", "DELETE", {"preconditions": {"uid": "not-the-uid"}})
    assert code == 409 and "Precondition failed: UID" in status["message"]
    code, _ = call(f"{base}/d", "DELETE", {"preconditions": {"uid": created["metadata"]["uid"]}})
    assert code == 200


@pytest.mark.parametrize(
    ("method", "path", "raw", "code", "reason"),
    [
        ("POST", "/api/v1/namespaces/default/configmaps", b"{not json", 400, "BadRequest"),
        ("GET", "/apis/example.com/v1/nothings", None, 404, "NotFound"),
        ("GET", "/api/v1/namespaces/default/configmaps/missing", None, 404, "NotFound"),
        ("POST", "/api/v1/namespaces/nowhere/configmaps", json.dumps(cm("z")).encode(), 404, "NotFound"),
        ("POST", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims",
         json.dumps({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c"},
                     "spec": {"devices": {"requests": [{"name": "Bad_Name"}]}}}).encode(), 422, "Invalid"),
    ],
)
def test_bad_input_gets_a_status(cluster: EmbeddedCluster, method: str, path: str,
                                 raw: bytes | None, code: int, reason: str) -> None:
    got, status = call(cluster.url + path, method, raw=raw)
    assert got == code
    assert status["kind"] == "Status" and status["reason"] == reason and status["code"] == code


def test_invalid_claim_lists_field_causes(cluster: EmbeddedCluster) -> None:
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c"},
             "spec": {"devices": {"requests": [
                 {"name": "gpu", "exactly": {"deviceClassName": "gpu", "allocationMode": "Some"},
                  "firstAvailable": [{"name": "a", "deviceClassName": "gpu"}]}]}}}
    code, status = call(f"{cluster.url}/apis/resource.k8s.io/v1/namespaces/default/resourceclaims",
                        "POST", claim)
    assert code == 422
    fields = {c["field"]: c for c in status["details"]["causes"]}
    assert "exactly one of `exactly` or `firstAvailable`" in fields["spec.devices.requests[0]"]["message"]
    assert fields["spec.devices.requests[0].exactly.allocationMode"]["reason"] == "FieldValueNotSupported"


def test_strategic_merge_patch_merges_conditions_and_crds_refuse_it(cluster: EmbeddedCluster) -> None:
    base = f"{cluster.url}/api/v1/namespaces/default/pods"
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "c", "image": "i"}]},
           "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
    call(base, "POST", pod)
    call(f"{base}/p/status", "PUT", {**pod, "metadata": {"name": "p"}})
    code, body = call(f"{base}/p/status", "PATCH",
                      {"status": {"conditions": [{"type": "DisruptionTarget", "status": "True"}]}},
                      "application/strategic-merge-patch+json")
    assert code == 200
    assert [c["type"] for c in body["status"]["conditions"]] == ["Ready", "DisruptionTarget"]
    code, status = call(f"{cluster.url}/apis/resource.draco.dev/v1alpha1/resourceslicepatches/x",
                        "PATCH", {}, "application/strategic-merge-patch+json")
    assert code in (404, 415)


def test_discovery_lists_resources_with_subresources(cluster: EmbeddedCluster) -> None:
    _, core = call(f"{cluster.url}/api/v1")
    names = {r["name"]: r for r in core["resources"]}
    assert {"pods", "pods/status", "pods/eviction", "namespaces", "events"} <= set(names)
    assert names["pods"]["shortNames"] == ["po"] and names["pods"]["namespaced"] is True
    _, groups = call(f"{cluster.url}/apis")
    served = {g["name"] for g in groups["groups"]}
    assert {"resource.k8s.io", "policy", "coordination.k8s.io", "apiextensions.k8s.io",
            "events.k8s.io", "resource.draco.dev"} <= served
    with urllib.request.urlopen(f"{cluster.url}/openapi/v3") as resp:
        paths = json.load(resp)["paths"]
    assert "apis/resource.draco.dev/v1alpha1" in paths and "api/v1" in paths


def test_checking_a_crd_rule_leaves_the_processs_recursion_limit_alone() -> None:
    """cel-python's Environment lowers the interpreter's recursion limit to 2500 when it
    is built; the embedded server's first CRD rule must not change how deep the
    allocator's gang search may go in the same process (a hypothesis run warned of the
    limit changing under it)."""
    import sys

    import operators.cel  # noqa: F401  (sets draco's limit, as every controller process does)
    from operators.apiserver import celrules

    celrules._env.cache_clear()
    celrules._program.cache_clear()
    before = sys.getrecursionlimit()
    assert before >= 3000
    assert celrules.check([{"rule": "self > 1", "message": "too small"}], 0, None, "spec.n")
    assert sys.getrecursionlimit() == before
    # hypothesis runs each example under a limit of its own, below 2500, and warns when
    # it finds another at the end: the limit is put back as it was, not raised
    celrules._env.cache_clear()
    celrules._program.cache_clear()
    sys.setrecursionlimit(2100)
    try:
        assert celrules.check([{"rule": "self > 1"}], 2, None, "spec.n") == []
        assert sys.getrecursionlimit() == 2100
    finally:
        sys.setrecursionlimit(before)
