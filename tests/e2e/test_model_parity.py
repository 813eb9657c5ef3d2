"""Everything a real kube-apiserver accepts, draco's model must read.

Generated ResourceSlices, DeviceClasses, ResourceClaims (with allocation status) and
Pods go to the real server (dry run where the spec is all that matters); whatever it
accepts — as it stores it, defaulted and with gated fields dropped — must parse in
`operators.model` without a ModelError. Objects it rejects say nothing about draco.
"""

from __future__ import annotations

import string
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from operators.model import ModelError, parse_object
from tests.e2e.backends import RealBackend

pytestmark = pytest.mark.real

EXAMPLES = settings(max_examples=60, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])

dns_label = st.from_regex(r"[a-z]([a-z0-9-]{0,10}[a-z0-9])?", fullmatch=True)
domain = st.builds(lambda a, b: f"{a}.{b}", dns_label, st.sampled_from(["com", "example", "io"]))
c_identifier = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True)
qualified_name = st.one_of(c_identifier, st.builds(lambda d, n: f"{d}/{n}", domain, c_identifier))
taint_key = st.one_of(dns_label, st.builds(lambda d, n: f"{d}/{n}", domain, dns_label))
big_int = st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(-(2**70), 2**70),
                    st.sampled_from([0, 1, -1, 2**53 + 1, 2**63 - 1, -(2**63)]))
quantity = st.one_of(
    st.sampled_from(["1", "0", "80Gi", "1.5", "100m", "1e3", "1E3", "2Ki", "0.001", "+1",
                     "-1", "9223372036854775807", "1Ei", "18446744073709551616", ".5",
                     "not-a-quantity", "1 Gi", ""]),
    st.builds(lambda n, s: f"{n}{s}", st.integers(0, 10**20),
              st.sampled_from(["", "k", "M", "G", "Ki", "Mi", "Gi", "Ti", "m", "u", "n"])))
attribute = st.one_of(
    st.builds(lambda v: {"int": v}, big_int),
    st.builds(lambda v: {"bool": v}, st.booleans()),
    st.builds(lambda v: {"string": v}, st.text(string.printable, max_size=70)),
    st.builds(lambda v: {"version": v}, st.sampled_from(
        ["1.0.0", "1.2.3-rc.1+build.5", "v1.0.0", "01.2.3", "1.2", "0.0.0-0"])),
)
effect = st.sampled_from(["NoSchedule", "NoExecute", "None", "", "Bogus"])
taint = st.fixed_dictionaries(
    {"key": taint_key, "effect": effect},
    optional={"value": st.text(string.ascii_letters + "-._", max_size=10)})
toleration = st.fixed_dictionaries(
    {}, optional={"key": st.one_of(st.just(""), taint_key),
                  "operator": st.sampled_from(["Exists", "Equal", ""]),
                  "value": st.text(string.ascii_letters, max_size=8),
                  "effect": effect,
                  "tolerationSeconds": big_int})


def check_readable(real: RealBackend, path: str, obj: dict[str, Any]) -> dict[str, Any] | None:
    """POST with dryRun; when the server accepts, the stored form must parse."""
    code, body = real.request("POST", f"{path}?dryRun=All", obj)
    if code != 201:
        assert code in (400, 422), (code, body)
        return None
    try:
        parse_object(body)
    except ModelError as err:
        raise AssertionError(f"the real server accepted an object draco cannot read: {err}\n"
                             f"{body}") from err
    return dict(body)


@EXAMPLES
@given(devices=st.lists(st.fixed_dictionaries(
    {"name": dns_label},
    optional={"attributes": st.dictionaries(qualified_name, attribute, max_size=3),
              "capacity": st.dictionaries(qualified_name, st.builds(
                  lambda q: {"value": q}, quantity), max_size=2),
              "taints": st.lists(taint, max_size=2),
              "allowMultipleAllocations": st.booleans()}), min_size=1, max_size=4),
    placement=st.sampled_from(["nodeName", "allNodes", "nodeSelector"]))
def test_every_slice_the_server_accepts_is_readable(
        real: RealBackend, devices: list[dict[str, Any]], placement: str) -> None:
    spec: dict[str, Any] = {"driver": real.driver, "devices": devices,
                            "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1}}
    spec.update({"nodeName": {"nodeName": "node-0"}, "allNodes": {"allNodes": True},
                 "nodeSelector": {"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": "zone", "operator": "In", "values": ["a"]}]}]}}}[placement])
    check_readable(real, "/apis/resource.k8s.io/v1/resourceslices", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": "parity"}, "spec": spec})


request = st.fixed_dictionaries(
    {"deviceClassName": dns_label},
    optional={"allocationMode": st.sampled_from(["ExactCount", "All", "Bogus"]),
              "count": big_int,
              "adminAccess": st.booleans(),
              "tolerations": st.lists(toleration, max_size=2),
              "selectors": st.lists(st.builds(lambda e: {"cel": {"expression": e}}, st.sampled_from(
                  ["device.driver == 'x'", "true", "device.attributes['a.com'].x > 1"])),
                  max_size=2)})


@EXAMPLES
@given(requests=st.lists(st.one_of(
    st.builds(lambda n, r: {"name": n, "exactly": r}, dns_label, request),
    st.builds(lambda n, subs: {"name": n, "firstAvailable": [
        {**s, "name": f"s{i}"} for i, s in enumerate(subs)]}, dns_label,
        st.lists(request, min_size=1, max_size=3))), min_size=1, max_size=3),
    constraint=st.booleans(), annotation=st.lists(toleration, max_size=2))
def test_every_claim_the_server_accepts_is_readable(
        real: RealBackend, requests: list[dict[str, Any]], constraint: bool,
        annotation: list[dict[str, Any]]) -> None:
    import json

    spec: dict[str, Any] = {"devices": {"requests": requests}}
    if constraint:
        spec["devices"]["constraints"] = [{"requests": [requests[0]["name"]],
                                           "matchAttribute": "gpu.example.com/model"}]
    check_readable(real, f"/apis/resource.k8s.io/v1/namespaces/{real.ns}/resourceclaims", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "parity",
                     "annotations": {"resource.draco.dev/tolerations": json.dumps(annotation)}},
        "spec": spec})


@EXAMPLES
@given(results=st.lists(st.fixed_dictionaries(
    {"request": st.just("gpu"), "driver": domain, "pool": dns_label, "device": dns_label},
    optional={"adminAccess": st.booleans(), "tolerations": st.lists(toleration, max_size=2)}),
    min_size=1, max_size=3), node_selector=st.booleans())
def test_every_allocation_the_server_accepts_is_readable(
        real: RealBackend, results: list[dict[str, Any]], node_selector: bool) -> None:
    path = f"/apis/resource.k8s.io/v1/namespaces/{real.ns}/resourceclaims"
    code, claim = real.request("GET", f"{path}/alloc")
    if code == 404:
        claim = real.create(path, {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "alloc"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "gpu", "allocationMode": "All"}}]}}})
    allocation: dict[str, Any] = {"devices": {"results": results}}
    if node_selector:
        allocation["nodeSelector"] = {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["node-0"]}]}]}
    claim["status"] = {"allocation": allocation}
    code, body = real.request("PUT", f"{path}/alloc/status?dryRun=All", claim)
    if code != 200:
        assert code in (400, 422), (code, body)
        return
    try:
        parse_object(body)
    except ModelError as err:
        raise AssertionError(f"the real server accepted an allocation draco cannot read: {err}"
                             f"\n{body['status']}") from err


node_requirement = st.fixed_dictionaries({
    "key": st.sampled_from(["zone", "kubernetes.io/hostname", "example.com/x"]),
    "operator": st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]),
}, optional={"values": st.lists(st.sampled_from(["a", "b", "1", "node-0"]), max_size=2)})


@EXAMPLES
@given(terms=st.lists(st.fixed_dictionaries({}, optional={
    "matchExpressions": st.lists(node_requirement, max_size=2),
    "matchFields": st.lists(st.fixed_dictionaries({
        "key": st.just("metadata.name"), "operator": st.sampled_from(["In", "NotIn"]),
        "values": st.lists(dns_label, min_size=1, max_size=1)}), max_size=1)}), max_size=2),
    gates=st.lists(st.sampled_from(["resource.draco.dev/allocation", "example.com/other"]),
                   unique=True),
    node_selector=st.dictionaries(st.sampled_from(["zone", "example.com/gpu"]),
                                  st.sampled_from(["a", "true", ""]), max_size=2),
    claims=st.lists(st.sampled_from(["resourceClaimName", "resourceClaimTemplateName"]),
                    max_size=2))
def test_every_pod_the_server_accepts_is_readable(
        real: RealBackend, terms: list[dict[str, Any]], gates: list[str],
        node_selector: dict[str, str], claims: list[str]) -> None:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "registry.invalid/app"}],
                            "schedulingGates": [{"name": g} for g in gates],
                            "nodeSelector": node_selector,
                            "resourceClaims": [{"name": f"c{i}", source: f"x{i}"}
                                               for i, source in enumerate(claims)]}
    if terms:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": terms}}}
    check_readable(real, f"/api/v1/namespaces/{real.ns}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "parity"}, "spec": spec})
