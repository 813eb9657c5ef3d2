"""Every narrowing update draco would send is one the real kube-apiserver accepts.

Random gated pods and allocation node selectors go through `operators.narrowing.narrow`;
each resulting update (narrowed affinity, draco's gate removed) is sent to the real
1.34 server as a PUT of the stored pod (re-read and retried on a 409, as the
controller does). KEP-3838's validation there is the oracle.
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from operators.narrowing import DRACO_GATE, Narrowed, narrow
from tests.e2e.backends import RealBackend

pytestmark = pytest.mark.real
SERIAL = itertools.count()

VALUES = {"topology.kubernetes.io/zone": ["z1", "z2"], "example.com/rack": ["r1", "r2"],
          "example.com/gpus": ["1", "2", "8"]}


@st.composite
def requirement(draw: st.DrawFn) -> dict[str, Any]:
    key = draw(st.sampled_from(sorted(VALUES)))
    op = draw(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt"]))
    if op in ("In", "NotIn"):
        return {"key": key, "operator": op, "values": draw(st.lists(
            st.sampled_from(VALUES[key]), min_size=1, max_size=2, unique=True))}
    if op == "Gt":
        return {"key": key, "operator": op, "values": ["0"]}
    return {"key": key, "operator": op}


@st.composite
def term(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {}
    exprs = draw(st.lists(requirement(), max_size=2))
    if exprs:
        out["matchExpressions"] = exprs
    if not exprs or draw(st.booleans()):
        out["matchFields"] = [{"key": "metadata.name", "operator": "In",
                               "values": [draw(st.sampled_from(["node-0", "node-1"]))]}]
    return out


selector = st.builds(lambda terms: {"nodeSelectorTerms": terms},
                     st.lists(term(), min_size=1, max_size=3))
labels = st.fixed_dictionaries({k: st.sampled_from(v) for k, v in VALUES.items()})


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(required=st.one_of(st.none(), selector), allocations=st.lists(
    st.one_of(st.none(), selector), min_size=1, max_size=2),
    node=st.sampled_from(["node-0", "node-1"]), node_labels=labels,
    other_gate=st.booleans())
def test_the_real_server_accepts_every_narrowing_update(
        real: RealBackend, required: dict[str, Any] | None,
        allocations: list[dict[str, Any] | None], node: str, node_labels: dict[str, str],
        other_gate: bool) -> None:
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "registry.invalid/app"}],
        "schedulingGates": [{"name": DRACO_GATE}] + (
            [{"name": "example.com/quota"}] if other_gate else [])}
    if required is not None:
        spec["affinity"] = {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": required}}
    path = f"/api/v1/namespaces/{real.ns}/pods"
    name = f"gated-{next(SERIAL)}"  # never the name of a pod still being deleted
    real.create(path, {"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": name}, "spec": spec})
    try:
        # kube-scheduler writes the pod's SchedulingGated condition at any moment, so the
        # update is a read-modify-write retried on 409, as draco's controller does it.
        for _ in range(10):
            stored = real.get(f"{path}/{name}")
            assert stored is not None
            result = narrow(stored, allocations, node, node_labels)
            if not isinstance(result, Narrowed):
                return  # nothing would be sent
            update = result.apply(copy.deepcopy(stored))
            code, body = real.request("PUT", f"{path}/{name}", update)
            if code != 409:
                break
        assert code == 200, f"kube-apiserver refused draco's narrowing update: {body}"
        gates = [g["name"] for g in body["spec"].get("schedulingGates", [])]
        assert gates == (["example.com/quota"] if other_gate else [])
    finally:
        real.request("DELETE", f"{path}/{name}?gracePeriodSeconds=0")

