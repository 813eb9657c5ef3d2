"""The allocation table (allocation_cases.yaml), derived from upstream's allocator tests.

`expect.results` lists, per claim, `request=driver/pool/device` in result order (a
trailing ` admin` marks adminAccess, ` share` a shareID, ` name=amount` each
consumedCapacity entry); `nodeSelector` and `config` are compared in
their API form when given; `reason` is a substring of the outcome's reason; `explain`
maps a result request name to the explain fields it must show.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from operators.allocator import allocate
from operators.allocator.features import parse_feature_gates
from tests.allocator.build import case_inputs, case_shares

CASES: list[dict[str, Any]] = yaml.safe_load(
    Path(__file__).with_name("allocation_cases.yaml").read_text())


def _results(api: dict[str, Any]) -> list[str]:
    out = []
    for r in api["devices"]["results"]:
        text = f'{r["request"]}={r["driver"]}/{r["pool"]}/{r["device"]}'
        if r.get("adminAccess"):
            text += " admin"
        if r.get("shareID"):
            text += " share"
        for name, amount in (r.get("consumedCapacity") or {}).items():
            text += f" {name}={amount}"
        if r.get("bindingConditions"):
            text += f" binding={','.join(r['bindingConditions'])}"
            text += f" failure={','.join(r['bindingFailureConditions'])}"
        out.append(text)
    return out


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_allocation_table(case: dict[str, Any]) -> None:
    claims, node, inventory, classes, in_use = case_inputs(case)
    gates = parse_feature_gates(case.get("gates", ""))
    outcome = allocate(claims, node, inventory, classes, in_use, budget_s=case.get("budget", 10.0),
                       shares=case_shares(case), features=gates)
    expect = case["expect"]
    assert outcome.status == expect["status"], outcome.reason
    if "reason" in expect:
        assert outcome.reason is not None and expect["reason"] in outcome.reason, outcome.reason
    if outcome.status == "allocated":
        apis = [outcome.allocation_api(i) for i in range(len(claims))]
        assert [_results(a) for a in apis] == expect["results"]
        if "nodeSelector" in expect:
            assert [a.get("nodeSelector") for a in apis] == expect["nodeSelector"]
        if "config" in expect:
            assert [a["devices"].get("config", []) for a in apis] == expect["config"]
    else:
        assert outcome.allocations == ()
    if "explain" in expect:
        got = {r.request: r.to_api() for ce in outcome.explain for r in ce.requests}
        for request, fields in expect["explain"].items():
            for k, v in fields.items():
                if k == "celErrors" and isinstance(v, str):
                    assert any(v in e for e in got[request][k]), got[request]
                else:
                    assert got[request][k] == v, (request, k, got[request])
