"""Property: for random gated pods, allocation selectors and labelled nodes, narrowing
never relaxes the pod, keeps the chosen node, and sends only updates the API server's
KEP-3838 validation accepts; when it says `exact`, it drops no node it could keep."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from placement import allocation_accepts, gated_pod, pod_accepts

from operators.apiserver.validation.pods import validate_pod_update
from operators.narrowing import DRACO_GATE, MAX_TERMS, CannotNarrow, Narrowed, narrow

SETTINGS = settings(max_examples=200, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])

VALUES = {
    "topology.kubernetes.io/zone": ["z1", "z2", "z3"],
    "example.com/rack": ["r1", "r2"],
    "example.com/gpus": ["1", "2", "4", "8"],
}
KEYS = sorted(VALUES)
NODE_NAMES = [f"node-{i}" for i in range(5)]

nodes = st.lists(
    st.tuples(st.sampled_from(NODE_NAMES),
              st.fixed_dictionaries({}, optional={k: st.sampled_from(v) for k, v in VALUES.items()})),
    min_size=1, max_size=6, unique_by=lambda n: n[0],
)


@st.composite
def expression(draw: st.DrawFn) -> dict[str, Any]:
    key = draw(st.sampled_from(KEYS))
    op = draw(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]))
    if op in ("In", "NotIn"):
        values = draw(st.lists(st.sampled_from(VALUES[key]), min_size=1, max_size=2, unique=True))
        return {"key": key, "operator": op, "values": values}
    if op in ("Gt", "Lt"):
        return {"key": key, "operator": op, "values": [draw(st.sampled_from(["0", "1", "2", "5"]))]}
    return {"key": key, "operator": op}


field = st.builds(lambda op, name: {"key": "metadata.name", "operator": op, "values": [name]},
                  st.sampled_from(["In", "NotIn"]), st.sampled_from(NODE_NAMES))


@st.composite
def term(draw: st.DrawFn) -> dict[str, Any]:
    exprs = draw(st.lists(expression(), max_size=2))
    fields = draw(st.lists(field, max_size=1, min_size=0 if exprs else 1))
    out: dict[str, Any] = {}
    if exprs:
        out["matchExpressions"] = exprs
    if fields:
        out["matchFields"] = fields
    return out


selector = st.builds(lambda terms: {"nodeSelectorTerms": terms}, st.lists(term(), min_size=1, max_size=3))


@st.composite
def pod_spec(draw: st.DrawFn, required: st.SearchStrategy[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if draw(st.booleans()):
        key = draw(st.sampled_from(KEYS))
        spec["nodeSelector"] = {key: draw(st.sampled_from(VALUES[key]))}
    node_affinity: dict[str, Any] = {}
    if draw(st.booleans()):
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = draw(required)
    if draw(st.booleans()):
        node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": 5, "preference": draw(term())}]
    if node_affinity:
        spec["affinity"] = {"nodeAffinity": node_affinity}
    gates = [{"name": DRACO_GATE}]
    if draw(st.booleans()):
        gates.insert(draw(st.integers(0, 1)), {"name": "example.com/quota"})
    spec["schedulingGates"] = gates
    return spec


@SETTINGS
@given(pod_spec(selector), st.lists(st.one_of(st.none(), selector), min_size=1, max_size=3), nodes,
       st.sampled_from(["valid", "valid", "any", "none"]), st.sampled_from([MAX_TERMS, 1]),
       st.data())
def test_narrowing_never_relaxes_and_passes_validation(
    spec: dict[str, Any], allocations: list[dict[str, Any] | None],
    cluster: list[tuple[str, dict[str, str]]], how: str, max_terms: int, data: st.DataObject,
) -> None:
    check(spec, allocations, cluster, how, max_terms, data)


# Zones and racks only, one requirement per term, every node fully labelled: many
# overlapping alternatives, so the "several terms on both sides" rule runs often.
coarse_term = st.builds(
    lambda kv: {"matchExpressions": [{"key": kv[0], "operator": "In", "values": [kv[1]]}]},
    st.sampled_from([("topology.kubernetes.io/zone", "z1"), ("topology.kubernetes.io/zone", "z2"),
                     ("example.com/rack", "r1"), ("example.com/rack", "r2")]),
)
coarse_selector = st.builds(lambda terms: {"nodeSelectorTerms": terms},
                            st.lists(coarse_term, min_size=1, max_size=3))
coarse_nodes = st.lists(
    st.tuples(st.sampled_from(NODE_NAMES),
              st.fixed_dictionaries({"topology.kubernetes.io/zone": st.sampled_from(["z1", "z2"]),
                                     "example.com/rack": st.sampled_from(["r1", "r2"])})),
    min_size=1, max_size=5, unique_by=lambda n: n[0],
)


@SETTINGS
@given(pod_spec(coarse_selector), st.lists(coarse_selector, min_size=1, max_size=2), coarse_nodes,
       st.sampled_from(["valid", "valid", "none"]), st.sampled_from([MAX_TERMS, 1]), st.data())
def test_overlapping_alternatives_narrow_to_the_chosen_nodes_terms(
    spec: dict[str, Any], allocations: list[dict[str, Any] | None],
    cluster: list[tuple[str, dict[str, str]]], how: str, max_terms: int, data: st.DataObject,
) -> None:
    check(spec, allocations, cluster, how, max_terms, data)


def check(spec: dict[str, Any], allocations: list[dict[str, Any] | None],
          cluster: list[tuple[str, dict[str, str]]], how: str, max_terms: int,
          data: st.DataObject) -> None:
    pod = gated_pod(spec)

    def allowed(name: str, labels: dict[str, str]) -> bool:
        return pod_accepts(pod, name, labels) and all(
            allocation_accepts(a, name, labels) for a in allocations)

    valid = [n for n in cluster if allowed(*n)]
    chosen: tuple[str, dict[str, str]] | None = None
    if how == "valid" and valid:
        chosen = data.draw(st.sampled_from(valid))
    elif how == "any":
        chosen = data.draw(st.sampled_from(cluster))
    result = narrow(pod, allocations, *(chosen or (None, None)), max_terms=max_terms)

    event(result.reason if isinstance(result, CannotNarrow) else f"narrowed, exact={result.exact}")
    if isinstance(result, CannotNarrow):
        if chosen is not None:
            assert not allowed(*chosen), result
            assert result.reason in ("PodRejectsChosenNode", "AllocationRejectsChosenNode")
        else:
            assert result.reason in ("NoCommonNodes", "ChosenNodeRequired"), result
        if result.reason == "NoCommonNodes":
            assert not valid
        return

    assert isinstance(result, Narrowed)
    new = result.apply(pod)
    assert validate_pod_update(pod, new) == []
    assert [g["name"] for g in new["spec"].get("schedulingGates", [])] == [
        g["name"] for g in spec["schedulingGates"] if g["name"] != DRACO_GATE]
    assert new["spec"].get("nodeSelector") == spec.get("nodeSelector")
    assert (new["spec"].get("affinity") or {}).get("nodeAffinity", {}).get(
        "preferredDuringSchedulingIgnoredDuringExecution") == (spec.get("affinity") or {}).get(
        "nodeAffinity", {}).get("preferredDuringSchedulingIgnoredDuringExecution")
    for name, labels in cluster:
        if pod_accepts(new, name, labels):
            assert allowed(name, labels), (name, labels)
        elif result.exact:
            assert not allowed(name, labels), (name, labels)
    if chosen is not None:
        assert pod_accepts(new, *chosen)
