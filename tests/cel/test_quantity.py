"""operators.model.quantity against the quantity table (quantity_cases.yaml)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from operators.model.quantity import Quantity, is_quantity

DATA: dict[str, Any] = yaml.safe_load((Path(__file__).parent / "quantity_cases.yaml").read_text())


@pytest.mark.parametrize(("text", "canonical"), sorted(DATA["canonical"].items()))
def test_canonical_string(text: str, canonical: str) -> None:
    q = Quantity.parse(text)
    assert str(q) == canonical
    assert Quantity.parse(canonical) == q  # the canonical form reads back to the same value


@pytest.mark.parametrize("text", DATA["invalid"])
def test_invalid(text: str) -> None:
    assert not is_quantity(text)
    with pytest.raises(ValueError, match="quantity"):
        Quantity.parse(text)


@pytest.mark.parametrize(("a", "b", "sign"), DATA["compare"])
def test_compare(a: str, b: str, sign: int) -> None:
    qa, qb = Quantity.parse(a), Quantity.parse(b)
    assert qa.compare(qb) == sign
    assert (qa == qb) is (sign == 0)


@pytest.mark.parametrize(("a", "op", "b", "expected"), DATA["arithmetic"])
def test_arithmetic(a: str, op: str, b: str, expected: str) -> None:
    result = getattr(Quantity.parse(a), op)(Quantity.parse(b))
    assert str(result) == expected


@pytest.mark.parametrize(("text", "expected"), sorted(DATA["as_int64"].items()))
def test_as_int64(text: str, expected: int | None) -> None:
    assert Quantity.parse(text).as_int64() == expected


def test_bad_type_is_value_error() -> None:
    with pytest.raises(ValueError):
        Quantity.parse(5)  # type: ignore[arg-type]
