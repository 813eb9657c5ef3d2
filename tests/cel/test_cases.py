"""The selector case table (cases.yaml), run through compile_selector/evaluate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from operators.cel import compile_selector, evaluate_selector
from tests.cel.devices import device_from_data

DATA = yaml.safe_load((Path(__file__).parent / "cases.yaml").read_text())


def _expression(case: dict[str, Any]) -> str:
    if "repeat" in case:
        prefix, times, middle, suffix = case["repeat"]
        return prefix * times + middle + suffix * times
    return str(case["expression"])


def _device(case: dict[str, Any]) -> Any:
    spec = case["device"]
    return device_from_data(DATA["devices"][spec] if isinstance(spec, str) else spec)


@pytest.mark.parametrize("case", DATA["cases"], ids=[str(c["name"]) for c in DATA["cases"]])
def test_case(case: dict[str, Any]) -> None:
    expression = _expression(case)
    selector = compile_selector(expression)
    result = selector.evaluate(_device(case))
    if "compile_error" in case:
        assert selector.compile_error is not None, "expected a compile error"
        assert case["compile_error"] in selector.compile_error
        assert result.matched is False and result.error == selector.compile_error
        return
    assert selector.compile_error is None, selector.compile_error
    if "error" in case:
        assert result.matched is False
        assert result.error is not None and case["error"] in result.error, result.error
    else:
        assert result.error is None, result.error
        assert result.matched is case["match"]
    # The uncached path and the convenience function agree with the cached one.
    assert selector.evaluate(_device(case), use_cache=False) == result
    assert evaluate_selector(expression, _device(case)) == result
