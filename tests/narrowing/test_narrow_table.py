"""The narrowing table: (pod, allocations, chosen node) -> narrowed spec fields or a reason.

Every narrowed pod is also checked the way the API server would: the embedded server's
KEP-3838 update validation accepts it, and it still accepts the chosen node.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from placement import allocation_accepts, gated_pod, pod_accepts

from operators.apiserver.validation.pods import validate_pod_update
from operators.narrowing import MAX_TERMS, CannotNarrow, Narrowed, narrow

CASES: list[dict[str, Any]] = yaml.safe_load(Path(__file__).with_name("cases.yaml").read_text())


def _run(case: dict[str, Any]) -> tuple[dict[str, Any], Narrowed | CannotNarrow]:
    pod = gated_pod(case["spec"])
    chosen = case.get("chosen") or {}
    return pod, narrow(pod, case["allocations"], chosen.get("name"), chosen.get("labels"),
                       max_terms=case.get("max_terms", MAX_TERMS))


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_narrowing_table(case: dict[str, Any]) -> None:
    pod, result = _run(case)
    expect = case["expect"]
    if "reason" in expect:
        assert isinstance(result, CannotNarrow), result
        assert result.reason == expect["reason"]
        assert result.message
        return
    assert isinstance(result, Narrowed), result
    assert result.spec_fields() == expect["spec"]
    assert result.exact is expect["exact"]
    new = result.apply(pod)
    assert validate_pod_update(pod, new) == []
    chosen = case.get("chosen")
    if chosen:
        assert pod_accepts(new, chosen["name"], chosen["labels"])
        assert all(allocation_accepts(a, chosen["name"], chosen["labels"])
                   for a in case["allocations"])


def test_apply_leaves_the_input_pod_as_it_was() -> None:
    case = next(c for c in CASES if c["name"].startswith("one existing term"))
    pod, result = _run(case)
    before = yaml.safe_dump(pod)
    assert isinstance(result, Narrowed)
    result.apply(pod)
    result.spec_fields()["affinity"]["nodeAffinity"].clear()
    assert yaml.safe_dump(pod) == before
    assert result.spec_fields()["affinity"]["nodeAffinity"]


def test_apply_drops_an_emptied_gate_list_and_keeps_the_rest_of_the_pod() -> None:
    pod = gated_pod({"tolerations": [{"key": "k", "operator": "Exists"}]})
    result = narrow(pod, [None])
    assert isinstance(result, Narrowed)
    new = result.apply(pod)
    assert "schedulingGates" not in new["spec"]
    assert new["spec"]["tolerations"] == pod["spec"]["tolerations"]
    assert new["metadata"] == pod["metadata"]
    assert validate_pod_update(pod, new) == []


def test_relaxing_update_is_what_the_validator_rejects() -> None:
    """Guards the oracle: a term the narrowing might be tempted to add is refused."""
    pod = gated_pod({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["z1"]}]}]}}}})
    widened = gated_pod({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]},
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z2"]}]}]}}}})
    assert validate_pod_update(pod, widened)
