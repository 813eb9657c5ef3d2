"""Upstream's own allocator test suite (`allocatortesting` of k8s.io/dynamic-resource-
allocation) against draco, at each release draco supports.

`hack/upstream_allocator.py` builds the suite with draco's adapter and runs it against
`draco allocate --serve`. Every case passes, is skipped by the suite itself for an alpha
gate draco does not implement, or is listed in `hack/allocator-suite/known.json` with the
reason; a listed case that passes must leave the table.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from operators.allocator.features import NOT_IMPLEMENTED

HACK = Path(__file__).resolve().parents[2] / "hack"
if str(HACK) not in sys.path:
    sys.path.append(str(HACK))
import upstream_allocator  # noqa: E402  (a script's module, stdlib only)

pytestmark = pytest.mark.real
DRACO = str(Path(sys.executable).parent / "draco")


@pytest.fixture(scope="module", params=sorted(upstream_allocator.VERSIONS.values(), reverse=True))
def suite(request: pytest.FixtureRequest) -> tuple[str, dict[str, upstream_allocator.Case]]:
    version = str(request.param)
    return version, upstream_allocator.run(version, DRACO)


def _first_lines(case: upstream_allocator.Case, n: int = 12) -> str:
    lines = [line.rstrip() for line in case.output if line.strip() and "=== RUN" not in line]
    return "\n      ".join(lines[:n])


@pytest.mark.timeout(1500)
def test_every_case_passes_or_is_listed(suite: tuple[str, dict[str, upstream_allocator.Case]]) -> None:
    version, cases = suite
    listed = upstream_allocator.known().get(version, {})
    unexpected = [c for c in cases.values() if c.result == "fail" and c.name not in listed]
    assert not unexpected, f"{len(unexpected)} of upstream's {version} cases fail against draco:\n" + \
        "\n".join(f"  {c.name}:\n      {_first_lines(c)}" for c in unexpected)
    counts = upstream_allocator.summary(cases)
    assert counts["pass"] >= 0.8 * len(cases), counts  # the suite ran, and mostly passes


def test_listed_cases_still_fail(suite: tuple[str, dict[str, upstream_allocator.Case]]) -> None:
    version, cases = suite
    listed = upstream_allocator.known().get(version, {})
    missing = sorted(name for name in listed if name not in cases)
    assert not missing, f"the table lists cases the {version} suite does not have: {missing}"
    passing = sorted(name for name in listed if cases[name].result == "pass")
    assert not passing, f"these {version} cases pass now: take them out of known.json: {passing}"


def test_only_unimplemented_alpha_gates_are_skipped(
        suite: tuple[str, dict[str, upstream_allocator.Case]]) -> None:
    version, cases = suite
    for case in cases.values():
        if case.result != "skip":
            continue
        text = "".join(case.output)
        gates = re.search(r"required feature\(s\) \[([^\]]*)\] not supported", text)
        assert gates, f"{version} {case.name} skipped for another reason: {text[-500:]}"
        table = json.loads(upstream_allocator.KNOWN.read_text())["skippedGates"]
        assert set(gates.group(1).split()) <= table.keys(), (case.name, gates.group(1))
        assert table.keys() <= NOT_IMPLEMENTED, "a gate in the table that draco implements"
