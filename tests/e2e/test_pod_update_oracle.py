"""Generated pod updates, sent to draco's embedded server and to kube-apiserver 1.34.

The real server is the oracle: for every generated pod (gated or not; node affinity of
every shape — absent, null, `{}`, empty terms, empty lists, preferred terms —,
nodeSelector, scheduling gates, tolerations) and every generated update of it (affinity
narrowed, widened, emptied or replaced; node selector keys added, changed or removed;
gates added, removed or reordered; tolerations added or removed; an image changed), both
servers must give the same verdict on the create and on the PUT, and on a refusal the
same field paths of the causes (as a set: kube-apiserver orders some by map iteration).

CI runs a sample (`DRACO_ORACLE_EXAMPLES`, default 120, seeded); the large run is
`DRACO_ORACLE_EXAMPLES=2000 python -m pytest tests/e2e/test_pod_update_oracle.py`, whose
counts it prints (`-s`).
"""

from __future__ import annotations

import copy
import os
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.e2e.backends import Backend, RealBackend

pytestmark = pytest.mark.real

EXAMPLES = int(os.environ.get("DRACO_ORACLE_EXAMPLES", "120"))
GATES = ["example.com/a", "example.com/b", "resource.draco.dev/allocation"]
KEYS = ["zone", "example.com/rack", "kubernetes.io/hostname"]
ABSENT = object()  # the field is left out (as opposed to null)

expr = st.builds(lambda k, op, v: {"key": k, "operator": op, **({"values": v} if op in ("In", "NotIn") else {})},
                 st.sampled_from(KEYS), st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]),
                 st.lists(st.sampled_from(["a", "b"]), min_size=1, max_size=2, unique=True))
field_expr = st.builds(lambda v: {"key": "metadata.name", "operator": "In", "values": [v]},
                       st.sampled_from(["node-0", "node-1"]))
term = st.one_of(
    st.just({}), st.just({"matchExpressions": []}), st.just({"matchFields": []}),
    st.builds(lambda e: {"matchExpressions": e}, st.lists(expr, min_size=1, max_size=2)),
    st.builds(lambda f: {"matchFields": f}, st.lists(field_expr, min_size=1, max_size=1)),
    st.builds(lambda e, f: {"matchExpressions": e, "matchFields": f},
              st.lists(expr, min_size=1, max_size=2), st.lists(field_expr, min_size=1, max_size=1)))
required = st.one_of(st.just({}), st.just({"nodeSelectorTerms": []}),
                     st.builds(lambda t: {"nodeSelectorTerms": t}, st.lists(term, min_size=1, max_size=2)))
preferred = st.builds(lambda e: [{"weight": 1, "preference": {"matchExpressions": [e]}}], expr)
node_affinity = st.one_of(
    st.just({}), st.builds(lambda r: {"requiredDuringSchedulingIgnoredDuringExecution": r}, required),
    st.builds(lambda p: {"preferredDuringSchedulingIgnoredDuringExecution": p}, preferred),
    st.builds(lambda r, p: {"requiredDuringSchedulingIgnoredDuringExecution": r,
                            "preferredDuringSchedulingIgnoredDuringExecution": p}, required, preferred))
affinity = st.one_of(st.just(ABSENT), st.none(), st.just({}),
                     st.builds(lambda na: {"nodeAffinity": na}, node_affinity),
                     st.just({"nodeAffinity": None}))
node_selector = st.one_of(st.just(ABSENT), st.just({}), st.dictionaries(
    st.sampled_from(KEYS), st.sampled_from(["a", "b"]), min_size=1, max_size=2))
toleration = st.builds(lambda k, e: {"key": k, "operator": "Exists", "effect": e},
                       st.sampled_from(["t1", "t2"]), st.sampled_from(["NoSchedule", "NoExecute"]))


@st.composite
def spec(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {"containers": [{"name": "c", "image": "v1"}],
                           "schedulerName": "draco-oracle-no-scheduler"}
    gates = draw(st.lists(st.sampled_from(GATES), max_size=2, unique=True))
    if gates:
        out["schedulingGates"] = [{"name": g} for g in gates]
    for key, strategy in (("affinity", affinity), ("nodeSelector", node_selector)):
        value = draw(strategy)
        if value is not ABSENT:
            out[key] = value
    tolerations = draw(st.lists(toleration, max_size=2, unique_by=lambda t: t["key"]))
    if tolerations:
        out["tolerations"] = tolerations
    return out


@st.composite
def update(draw: st.DrawFn, old: dict[str, Any]) -> dict[str, Any]:
    """NEW from OLD: a few generated changes of the fields narrowing and gating touch."""
    new = copy.deepcopy(old)
    for change in draw(st.lists(st.sampled_from(
            ["affinity", "narrow", "selector", "gates", "tolerations", "image"]), min_size=1, max_size=3)):
        if change == "affinity":
            value = draw(affinity)
            if value is ABSENT:
                new.pop("affinity", None)
            else:
                new["affinity"] = value
        elif change == "narrow":
            terms = (((new.get("affinity") or {}).get("nodeAffinity") or {})
                     .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms")
            if terms:
                i = draw(st.integers(0, len(terms) - 1))
                terms[i] = {**terms[i], "matchExpressions": list(terms[i].get("matchExpressions") or [])
                            + [draw(expr)]}
        elif change == "selector":
            value = draw(node_selector)
            if value is ABSENT:
                new.pop("nodeSelector", None)
            else:
                new["nodeSelector"] = {**(new.get("nodeSelector") or {}), **value} \
                    if draw(st.booleans()) else value
        elif change == "gates":
            gates = [g["name"] for g in new.get("schedulingGates") or []]
            gates = draw(st.one_of(st.just(gates[1:]), st.just(list(reversed(gates))),
                                   st.lists(st.sampled_from(GATES), max_size=2, unique=True)))
            if gates:
                new["schedulingGates"] = [{"name": g} for g in gates]
            else:
                new.pop("schedulingGates", None)
        elif change == "tolerations":
            new["tolerations"] = draw(st.lists(toleration, max_size=3, unique_by=lambda t: t["key"]))
        else:
            new["containers"] = [{"name": "c", "image": "v2"}]
    return new


def first_cause(code: int, body: Any) -> tuple[int, str]:
    """The status code and the causes' field paths, sorted: kube-apiserver reports some
    causes in map order (two new scheduling gates come in either order), so the first
    is not always the same; the set is."""
    if code < 400 or not isinstance(body, dict):
        return code, ""
    causes = (body.get("details") or {}).get("causes") or []
    return code, " ".join(sorted(c.get("field", "") for c in causes))


def put(backend: Backend, name: str, old: dict[str, Any], new: dict[str, Any]) -> tuple[tuple[int, str], tuple[int, str]]:
    """(create verdict, update verdict); the update is skipped (0, "") when the create fails."""
    path = f"/api/v1/namespaces/{backend.ns}/pods"
    code, body = backend.request("POST", path, {"apiVersion": "v1", "kind": "Pod",
                                                "metadata": {"name": name}, "spec": old})
    created = first_cause(code, body)
    if code != 201:
        return created, (0, "")
    try:
        stored = dict(body)
        spec = copy.deepcopy(new)
        # what the server defaulted on create stays (admission adds NoExecute tolerations)
        defaulted = [t for t in stored["spec"].get("tolerations") or [] if t not in old.get("tolerations", [])]
        if defaulted:
            spec["tolerations"] = list(spec.get("tolerations") or []) + defaulted
        for key, value in stored["spec"].items():
            if key not in old and key not in ("tolerations",):
                spec.setdefault(key, value)
        code, body = backend.request("PUT", f"{path}/{name}", {**stored, "spec": spec})
        return created, first_cause(code, body)
    finally:
        backend.request("DELETE", f"{path}/{name}?gracePeriodSeconds=0")


COUNTS: Counter[str] = Counter()


def test_generated_pod_updates_get_the_real_servers_verdict(real: RealBackend, embedded: Backend) -> None:
    disagreements: list[str] = []

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                     HealthCheck.data_too_large])
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        old = data.draw(spec())
        new = data.draw(update(old))
        theirs = put(real, "p", old, new)
        ours = put(embedded, "p", old, new)
        COUNTS["examples"] += 1
        COUNTS["updates" if theirs[0][0] == 201 else "creates refused"] += 1
        COUNTS[f"update {theirs[1][0]}"] += 1
        if theirs != ours:
            disagreements.append(f"old={old} new={new}: kube-apiserver {theirs}, embedded {ours}")

    check()
    print(f"\npod-update oracle: {dict(COUNTS)}; {len(disagreements)} disagreements")
    assert not disagreements, "\n".join(disagreements[:10])
