"""The toleration table: when a NoExecute taint evicts, given a result's tolerations."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from operators.eviction.tolerations import eviction_time
from operators.model import DeviceTaint
from operators.model.devices import parse_toleration

CASES = yaml.safe_load(Path(__file__).with_name("toleration_cases.yaml").read_text())
ADDED = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_toleration_table(case: dict[str, Any]) -> None:
    t = case["taint"]
    taint = DeviceTaint(key=t["key"], value=t.get("value", ""), effect=t["effect"], time_added=ADDED)
    tolerations = [parse_toleration(x) for x in case["tolerations"]]
    got = eviction_time(taint, tolerations)
    expected = case["at"]
    assert (got.strftime("%Y-%m-%dT%H:%M:%SZ") if got else None) == expected
