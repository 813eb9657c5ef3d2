"""Upstream's own CEL table (`TestCEL` of k8s.io/dynamic-resource-allocation/cel,
`cel/compile_test.go`) against draco's CEL environment, at 0.37 and 0.38.

`hack/upstream_allocator.py cel VERSION FILE` writes the table as JSON (a test file
placed into a scratch copy of the module's cel package, since the table is
unexported); each case's expression is compiled and run here by draco's selector code
over the case's device, read as draco reads a ResourceSlice. Verdicts are compared
(compile error, evaluation error, match), not upstream's wording or cost estimates.

A case upstream runs only with gates other than draco's defaults (list-type attributes
on, an alpha draco does not implement, or a device with list-valued attributes, which
only that gate lets an API server store; consumable capacity off where the expression
reads `device.allowMultipleAllocations`) does not apply: it is named with that gate as
the reason (`gate_reason`). Every other case passes, or is listed in
`hack/allocator-suite/known_cel.json` with its reason; a listed case that passes must
leave the table.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from operators.allocator import inventory_from_slices
from operators.cel import compile_selector
from operators.model import ModelError, parse_resource_slice
from operators.model.errors import FieldError

HACK = Path(__file__).resolve().parents[2] / "hack"
if str(HACK) not in sys.path:
    sys.path.append(str(HACK))
import upstream_allocator  # noqa: E402  (a script's module, stdlib only)

pytestmark = pytest.mark.real
VERSIONS = ("v0.37.2", "v0.38.0-beta.0")
KNOWN = HACK / "allocator-suite" / "known_cel.json"


def gate_reason(case: dict[str, Any]) -> str | None:
    """Why the case does not apply at draco's default gates (None: it applies)."""
    lists = {"ints", "bools", "strings", "versions"}
    if any(lists & set(a) for a in (case.get("attributes") or {}).values()):
        return ("DRAListTypeAttributes (alpha, off by default; without it the API server drops "
                "list-valued attributes, and draco does not implement it)")
    features = case.get("features")
    if features is None:
        return None
    if features.get("EnableListTypeAttributes"):
        return "DRAListTypeAttributes (alpha, off by default; draco does not implement it)"
    if not features.get("EnableConsumableCapacity") and "allowMultipleAllocations" in case["expression"]:
        return "DRAConsumableCapacity off (on by default since 1.36)"
    return None


def device_of(case: dict[str, Any]) -> Any:
    """The case's device as draco's allocator sees it, or the reason it cannot read it."""
    device: dict[str, Any] = {"name": "device"}
    for key in ("attributes", "capacity"):
        if case.get(key):
            device[key] = case[key]
    if case.get("allowMultipleAllocations") is not None:
        device["allowMultipleAllocations"] = case["allowMultipleAllocations"]
    driver = case.get("driver") or "driver.example.com"
    obj = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
           "spec": {"driver": driver, "allNodes": True, "devices": [device],
                    "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1}}}
    try:
        slice_ = parse_resource_slice(obj)
    except (ModelError, FieldError) as exc:
        return f"draco cannot read the device: {exc}"
    candidate = inventory_from_slices([slice_])[0].slices[0].devices[0]
    # the table's driver may be empty; the expression sees it as given
    return SimpleNamespace(driver=case.get("driver") or "", attributes=candidate.attributes,
                           capacity=candidate.capacity,
                           allow_multiple_allocations=candidate.allow_multiple_allocations)


def disagreement(case: dict[str, Any]) -> str | None:
    """How draco's verdict differs from upstream's (None: the same)."""
    compiled = compile_selector(case["expression"])
    if case.get("expectCompileError"):
        if compiled.compile_error is None:
            return f"compiles, upstream: {case['expectCompileError']}"
        return None
    if compiled.compile_error is not None:
        return f"compile error: {compiled.compile_error}"
    device = device_of(case)
    if isinstance(device, str):
        return device
    result = compiled.evaluate(device)
    if case.get("expectMatchError"):
        return None if result.error is not None else \
            f"evaluates to {result.matched}, upstream: error {case['expectMatchError']}"
    if result.error is not None:
        return f"evaluation error: {result.error}"
    if result.matched != case.get("expectMatch", False):
        return f"matches {result.matched}, upstream {case.get('expectMatch', False)}"
    return None


@pytest.fixture(scope="module", params=VERSIONS)
def table(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
          ) -> tuple[str, list[dict[str, Any]]]:
    version = str(request.param)
    into = tmp_path_factory.mktemp("cel") / f"{version}.json"
    return version, [dict(c) for c in upstream_allocator.export_cel(version, into)]


def known(version: str) -> dict[str, str]:
    data = json.loads(KNOWN.read_text())
    return {name: data["reasons"].get(key, key)
            for name, key in data["cases"].get(version, {}).items()}


@pytest.mark.timeout(1500)
def test_every_case_that_applies_passes_or_is_listed(table: tuple[str, list[dict[str, Any]]]) -> None:
    version, cases = table
    listed = known(version)
    failing = {c["name"]: why for c in cases
               if gate_reason(c) is None and (why := disagreement(c)) is not None}
    unexpected = {n: why for n, why in failing.items() if n not in listed}
    assert not unexpected, json.dumps(unexpected, indent=1)
    passing = sorted(n for n in listed if n not in failing)
    assert not passing, f"these {version} cases pass now: take them out of known_cel.json: {passing}"
    assert len(cases) >= 60, len(cases)  # the table was read
    applying = [c for c in cases if gate_reason(c) is None]
    assert len(applying) - len(failing) >= 0.8 * len(applying)
