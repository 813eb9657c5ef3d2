"""Device tolerations: parity with upstream validation and matching (issue 8).

Upstream's validation lets a toleration have an empty key with either operator (only
Exists forbids a value), and its matching treats an empty key as matching every key.
What draco cannot read must never make a claim disappear from eviction: such an entry
tolerates nothing and the claim reports it.
"""

from __future__ import annotations

from typing import Any

import pytest
from model_cases import claim_obj

from operators.model import DeviceTaint, DeviceToleration, ResourceClaim, parse_object

# (toleration as the API stores it, taint, tolerated) — every toleration here is one the
# real API server accepts.
ACCEPTED: list[tuple[dict[str, Any], DeviceTaint, bool]] = [
    ({"operator": "Equal"}, DeviceTaint("any.example.com/k", "", "NoExecute"), True),
    ({"operator": "Equal"}, DeviceTaint("any.example.com/k", "v", "NoExecute"), False),
    ({}, DeviceTaint("other", "", "NoSchedule"), True),  # default operator Equal
    ({"operator": "Equal", "value": "v"}, DeviceTaint("k1", "v", "NoExecute"), True),
    ({"operator": "Equal", "value": "v"}, DeviceTaint("k2", "w", "NoExecute"), False),
    ({"operator": "Equal", "effect": "NoSchedule"}, DeviceTaint("k", "", "NoExecute"), False),
    ({"operator": "Exists"}, DeviceTaint("k", "x", "NoExecute"), True),
    ({"key": "k", "operator": "Equal", "value": "v"}, DeviceTaint("k", "v", "None"), True),
    ({"key": "k", "effect": "NoExecute", "tolerationSeconds": 9223372036854775807},
     DeviceTaint("k", "", "NoExecute"), True),
    ({"key": "k", "operator": "Exists", "tolerationSeconds": -5}, DeviceTaint("k", "", "NoExecute"), True),
]


def _claim_with_result_tolerations(tolerations: Any) -> dict[str, Any]:
    return claim_obj(
        [{"name": "gpu", "exactly": {"deviceClassName": "c"}}],
        status={"allocation": {"devices": {"results": [
            {"request": "gpu", "driver": "d", "pool": "p", "device": "x", "tolerations": tolerations},
        ]}}},
    )


@pytest.mark.parametrize(("raw", "taint", "tolerated"), ACCEPTED, ids=[str(c[0]) for c in ACCEPTED])
def test_every_accepted_toleration_is_read_and_matches_as_upstream(
    raw: dict[str, Any], taint: DeviceTaint, tolerated: bool
) -> None:
    claim = parse_object(_claim_with_result_tolerations([raw]))
    assert isinstance(claim, ResourceClaim)
    assert claim.allocation is not None
    (tol,) = claim.tolerations_for(claim.allocation.results[0])
    assert not tol.problem
    assert tol.tolerates(taint) is tolerated
    assert claim.toleration_problems() == ()


# (where the bad toleration sits, its value, field path reported, words in the message)
UNREADABLE: list[tuple[str, Any, str, str]] = [
    ("result", [{"key": "k", "operator": "Matches"}],
     "status.allocation.devices.results[0].tolerations[0].operator", "unknown value"),
    ("result", [{"key": "k", "operator": "Exists", "value": "v"}],
     "status.allocation.devices.results[0].tolerations[0].value", "empty"),
    ("result", [{"key": "k", "operator": "Exists", "tolerationSeconds": "300"}],
     "status.allocation.devices.results[0].tolerations[0].tolerationSeconds", "expected an integer"),
    ("result", "not-a-list", "status.allocation.devices.results[0].tolerations", "expected an array"),
    ("result", [42], "status.allocation.devices.results[0].tolerations[0]", "expected an object"),
    ("request", [{"key": "k", "operator": "Gt", "value": "5"}],
     "spec.devices.requests[0].exactly.tolerations[0].operator", "unknown value"),
]


@pytest.mark.parametrize(("where", "tolerations", "path", "message"), UNREADABLE,
                         ids=[c[2] + " " + c[3] for c in UNREADABLE])
def test_unreadable_toleration_keeps_the_claim_and_tolerates_nothing(
    where: str, tolerations: Any, path: str, message: str
) -> None:
    if where == "result":
        obj = _claim_with_result_tolerations(tolerations)
    else:
        obj = claim_obj(
            [{"name": "gpu", "exactly": {"deviceClassName": "c", "tolerations": tolerations}}],
            status={"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "d", "pool": "p", "device": "x"}]}}},
        )
    claim = parse_object(obj)
    assert isinstance(claim, ResourceClaim) and claim.allocation is not None
    tols = claim.tolerations_for(claim.allocation.results[0])
    for taint in (DeviceTaint("k", "", "NoExecute"), DeviceTaint("k", "5", "NoExecute")):
        assert not any(t.tolerates(taint) for t in tols)
    problems = claim.toleration_problems()
    assert len(problems) == 1
    assert problems[0][0] == path
    assert message in problems[0][1]


def test_unknown_operator_tolerates_nothing_even_if_constructed_directly() -> None:
    assert not DeviceToleration("k", "Gt", "5").tolerates(DeviceTaint("k", "5", "NoExecute"))


def test_bad_annotation_is_a_toleration_problem_too() -> None:
    obj = _claim_with_result_tolerations([])
    obj["metadata"]["annotations"] = {"resource.draco.dev/tolerations": "not json"}
    claim = parse_object(obj)
    ((path, message),) = claim.toleration_problems()
    assert path == 'metadata.annotations["resource.draco.dev/tolerations"]'
    assert "JSON" in message
