"""Whether a conjunction of node selector requirements can match any node: the check that
lets draco drop impossible intersection terms and refuse narrowing a pod to nowhere."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.model import NodeSelectorRequirement as R
from operators.narrowing import satisfiable

Z = "topology.kubernetes.io/zone"
G = "example.com/gpus"
NAME = "metadata.name"

CASES: list[tuple[str, list[R], list[R], bool]] = [
    ("nothing required", [], [], True),
    ("In overlapping In", [R(Z, "In", ("a", "b")), R(Z, "In", ("b", "c"))], [], True),
    ("In disjoint from In", [R(Z, "In", ("a",)), R(Z, "In", ("b",))], [], False),
    ("In fully excluded by NotIn", [R(Z, "In", ("a",)), R(Z, "NotIn", ("a",))], [], False),
    ("In partly excluded by NotIn", [R(Z, "In", ("a", "b")), R(Z, "NotIn", ("a",))], [], True),
    ("Exists and DoesNotExist", [R(Z, "Exists"), R(Z, "DoesNotExist")], [], False),
    ("In and DoesNotExist", [R(Z, "In", ("a",)), R(Z, "DoesNotExist")], [], False),
    ("NotIn alone: a node without the label", [R(Z, "NotIn", ("a",))], [], True),
    ("Exists and NotIn: some other value", [R(Z, "Exists"), R(Z, "NotIn", ("a", "b"))], [], True),
    ("Gt 3 and Lt 4: no integer between", [R(G, "Gt", ("3",)), R(G, "Lt", ("4",))], [], False),
    ("Gt 3 and Lt 5: just 4", [R(G, "Gt", ("3",)), R(G, "Lt", ("5",))], [], True),
    ("Gt 3, Lt 5, NotIn 4", [R(G, "Gt", ("3",)), R(G, "Lt", ("5",)), R(G, "NotIn", ("4",))],
     [], False),
    ("Gt with a non-integer matches nothing", [R(G, "Gt", ("many",))], [], False),
    ("In values checked against Gt", [R(G, "In", ("2", "8")), R(G, "Gt", ("4",))], [], True),
    ("In values all below Gt", [R(G, "In", ("1", "2")), R(G, "Gt", ("4",))], [], False),
    ("Gt half-open", [R(G, "Gt", ("1000",))], [], True),
    ("different keys never conflict", [R(Z, "In", ("a",)), R(G, "DoesNotExist")], [], True),
    ("node-local on two nodes", [], [R(NAME, "In", ("n1",)), R(NAME, "In", ("n2",))], False),
    ("node-local and NotIn another", [], [R(NAME, "In", ("n1",)), R(NAME, "NotIn", ("n2",))], True),
    ("node-local and NotIn itself", [], [R(NAME, "In", ("n1",)), R(NAME, "NotIn", ("n1",))], False),
    ("every node has a name", [], [R(NAME, "NotIn", ("n1",))], True),
]


@pytest.mark.parametrize(("exprs", "fields", "want"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_satisfiable_table(exprs: list[R], fields: list[R], want: bool) -> None:
    assert satisfiable(exprs, fields) is want


requirement = st.builds(
    lambda key, op, values: R(key, op, () if op in ("Exists", "DoesNotExist") else tuple(values)),
    st.sampled_from([Z, G]),
    st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]),
    st.lists(st.sampled_from(["1", "2", "3", "a"]), min_size=1, max_size=2, unique=True),
).filter(lambda r: r.operator not in ("Gt", "Lt") or len(r.values) == 1)
label_values = st.sampled_from([None, "0", "1", "2", "3", "4", "a", "b"])


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(requirement, max_size=4), st.fixed_dictionaries({Z: label_values, G: label_values}))
def test_unsatisfiable_means_no_node_matches(reqs: list[R], raw: dict[str, Any]) -> None:
    labels = {k: v for k, v in raw.items() if v is not None}
    if all(r.matches(labels.get(r.key)) for r in reqs):
        assert satisfiable(reqs)
