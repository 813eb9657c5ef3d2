"""Generated ResourceSlices, ResourceClaims and DeviceClasses, created (dry run) on
draco's embedded server and on kube-apiserver 1.37 (whose DRA fields the embedded server
keeps, where 1.34 drops its alpha ones): the real server is the oracle.

The objects mix valid and invalid parts the way users and drivers get them wrong: names
(DNS labels and subdomains, too long, upper case), quantities (suffixes, fractions,
garbage), attributes (each type, two at once, names qualified or not), counts and
allocation modes, CEL selectors (valid, malformed, of the wrong type), tolerations
(operators, effects, values with Exists), node placement (none, two at once). Both
servers must give the same verdict (the embedded server reports field paths as 1.34
does, which 1.37 changed for duplicates and map keys: `devices[1]` for
`devices[1].name`, `attributes` for `attributes[name]`; the verdicts are the same).

CI runs a sample (`DRACO_ORACLE_EXAMPLES`, default 120, seeded); the large run is
`DRACO_ORACLE_EXAMPLES=2000 python -m pytest -s tests/e2e/test_create_oracle.py`.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.e2e.backends import Backend, RealBackend

pytestmark = pytest.mark.real

EXAMPLES = int(os.environ.get("DRACO_ORACLE_EXAMPLES", "120"))
RESOURCE = "/apis/resource.k8s.io/v1"

name = st.sampled_from(["gpu-0", "gpu.0", "GPU", "a" * 63, "a" * 64, "-x", "x_y", "", "ok"])
quantity = st.sampled_from(["1", "40Gi", "1.5", "100m", "1e3", "-1", "abc", "0", "1Ki", "2.5Gi"])
attribute = st.one_of(
    st.builds(lambda v: {"string": v}, st.sampled_from(["A100", "", "x" * 65])),
    st.builds(lambda v: {"int": v}, st.sampled_from([0, -1, 2**31])),
    st.builds(lambda v: {"bool": v}, st.booleans()),
    st.builds(lambda v: {"version": v}, st.sampled_from(["1.2.3", "1.2", "v1.0.0", "1.0.0-rc.1"])),
    st.just({"string": "a", "int": 1}), st.just({}))
attr_name = st.sampled_from(["model", "example.com/model", "Model", "a/b/c", "x" * 64, "gpu.example.com/index"])
# Not generated: CEL of a non-boolean type ("1 + 1"), which kube-apiserver's type check
# refuses and the embedded server, which parses but does not type-check, accepts (a
# difference docs/differences.md lists).
cel = st.sampled_from(['device.driver == "gpu.example.com"', "device.driver ==",
                       'device.attributes["gpu.example.com"].model == "A100"', "true",
                       'device.capacity["gpu.example.com"].memory.compareTo(quantity("1Gi")) >= 0'])
toleration = st.builds(
    lambda k, op, v, e: {k_: v_ for k_, v_ in (("key", k), ("operator", op), ("value", v), ("effect", e))
                         if v_ is not None},
    st.sampled_from(["k", "", "example.com/k", None]), st.sampled_from(["Exists", "Equal", "In", None]),
    st.sampled_from(["v", "", None]), st.sampled_from(["NoSchedule", "NoExecute", "None", "Bad", None]))
taint = st.builds(lambda k, v, e: {"key": k, **({"value": v} if v else {}), **({"effect": e} if e else {})},
                  st.sampled_from(["k", "example.com/k", "", "Bad Key"]), st.sampled_from(["", "v", "x" * 64]),
                  st.sampled_from(["NoSchedule", "NoExecute", "None", "Bad", ""]))


@st.composite
def device(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {"name": draw(name)}
    attrs = draw(st.dictionaries(attr_name, attribute, max_size=2))
    if attrs:
        out["attributes"] = attrs
    caps = draw(st.dictionaries(st.sampled_from(["memory", "example.com/cores", "Bad"]),
                                st.builds(lambda q: {"value": q}, quantity), max_size=2))
    if caps:
        out["capacity"] = caps
    taints = draw(st.lists(taint, max_size=2))
    if taints:
        out["taints"] = taints
    return out


@st.composite
def resource_slice(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {"driver": draw(st.sampled_from(["gpu.example.com", "Bad_Driver", "x", ""])),
                            "pool": {"name": draw(st.sampled_from(["pool-a", "", "a/b", "Bad Pool"])),
                                     "generation": draw(st.sampled_from([0, 1, -1])),
                                     "resourceSliceCount": draw(st.sampled_from([1, 0, 2]))}}
    placement = draw(st.lists(st.sampled_from(["nodeName", "allNodes", "nodeSelector"]), max_size=2, unique=True))
    for p in placement:
        spec[p] = {"nodeName": "node-0", "allNodes": True,
                   "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                       {"key": "zone", "operator": "In", "values": ["a"]}]}]}}[p]
    devices = draw(st.lists(device(), max_size=3))
    if devices or draw(st.booleans()):
        spec["devices"] = devices
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"generateName": "oracle-"}, "spec": spec}


@st.composite
def exact(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {"deviceClassName": draw(st.sampled_from(["gpu", "", "Bad_Class"]))}
    mode = draw(st.sampled_from([None, "ExactCount", "All", "Some"]))
    if mode:
        out["allocationMode"] = mode
    count = draw(st.sampled_from([None, 0, 1, 3, -1]))
    if count is not None:
        out["count"] = count
    selectors = draw(st.lists(cel, max_size=2))
    if selectors:
        out["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    tolerations = draw(st.lists(toleration, max_size=2))
    if tolerations:
        out["tolerations"] = tolerations
    return out


@st.composite
def resource_claim(draw: st.DrawFn) -> dict[str, Any]:
    requests = []
    for i in range(draw(st.integers(0, 2))):
        req_name = draw(st.sampled_from([f"req-{i}", "Bad", ""]))
        if draw(st.booleans()):
            requests.append({"name": req_name, "exactly": draw(exact())})
        else:
            subs = [{"name": draw(st.sampled_from([f"s{j}", "Bad"])), **draw(exact())}
                    for j in range(draw(st.integers(0, 2)))]
            requests.append({"name": req_name, "firstAvailable": subs})
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"generateName": "oracle-"}, "spec": {"devices": {"requests": requests}}}


@st.composite
def device_class(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    selectors = draw(st.lists(cel, max_size=2))
    if selectors:
        spec["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    if draw(st.booleans()):
        spec["config"] = [{"opaque": {"driver": draw(st.sampled_from(["gpu.example.com", "Bad"])),
                                      "parameters": draw(st.sampled_from([{}, {"a": 1}, []]))}}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"generateName": "oracle-"}, "spec": spec}


def verdict(backend: Backend, obj: dict[str, Any]) -> tuple[int, str]:
    kind = obj["kind"]
    path = {"ResourceSlice": f"{RESOURCE}/resourceslices", "DeviceClass": f"{RESOURCE}/deviceclasses",
            "ResourceClaim": f"{RESOURCE}/namespaces/{backend.ns}/resourceclaims"}[kind]
    code, body = backend.request("POST", f"{path}?dryRun=All", obj)
    if code < 400 or not isinstance(body, dict):
        return code, ""
    return code, str(body.get("reason") or "")


def test_generated_objects_get_the_real_servers_verdict(real_137: RealBackend, embedded: Backend) -> None:
    real = real_137
    counts: Counter[str] = Counter()
    disagreements: list[str] = []

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                     HealthCheck.data_too_large])
    @given(obj=st.one_of(resource_slice(), resource_claim(), device_class()))
    def check(obj: dict[str, Any]) -> None:
        theirs = verdict(real, obj)
        ours = verdict(embedded, obj)
        counts[f"{obj['kind']} {theirs[0]}"] += 1
        if theirs != ours:
            disagreements.append(f"{obj}: kube-apiserver {theirs}, embedded {ours}")

    check()
    print(f"\ncreate oracle: {dict(counts)}; {len(disagreements)} disagreements")
    report = os.environ.get("DRACO_ORACLE_REPORT")
    if report:  # every disagreement, one per line, for the large run's analysis
        Path(report).write_text("\n".join(disagreements) + "\n")
    assert not disagreements, "\n".join(disagreements[:12])
