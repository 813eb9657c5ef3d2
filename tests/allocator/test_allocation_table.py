"""The allocation table (allocation_cases.yaml), derived from upstream's allocator tests.

`expect.results` lists, per claim, `request=driver/pool/device` in result order (a
trailing ` admin` marks adminAccess, ` share` a shareID, ` name=amount` each
consumedCapacity entry); `nodeSelector` and `config` are compared in
their API form when given; `reason` is a substring of the outcome's reason; `explain`
maps a result request name to the explain fields it must show.

Each case runs at every release from its `since:` to its `until:` (both inclusive;
default: every release draco answers as, 1.34 to 1.38), over that release's default
gates (`gates:` changes them) and behaviour: a case pins what kube-scheduler of each
of those releases answers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from operators.allocator import allocate
from operators.allocator.features import parse_feature_gates
from operators.allocator.releases import RELEASES, parse_release
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


def releases(case: dict[str, Any]) -> list[int]:
    """The minors the case holds at (see the module's docstring)."""
    since = parse_release(case["since"]).minor if "since" in case else min(RELEASES)
    until = parse_release(case["until"]).minor if "until" in case else max(RELEASES)
    return [m for m in sorted(RELEASES) if since <= m <= until]


PARAMS = [pytest.param(case, minor, id=f"{case['name']}@1.{minor}")
          for case in CASES for minor in releases(case)]


def test_every_case_runs_somewhere() -> None:
    assert all(releases(c) for c in CASES), [c["name"] for c in CASES if not releases(c)]
    assert len({c["name"] for c in CASES}) == len(CASES), "two cases share a name"


@pytest.mark.parametrize(("case", "minor"), PARAMS)
def test_allocation_table(case: dict[str, Any], minor: int) -> None:
    claims, node, inventory, classes, in_use = case_inputs(case)
    gates = parse_feature_gates(case.get("gates", ""), RELEASES[minor].gates)
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
