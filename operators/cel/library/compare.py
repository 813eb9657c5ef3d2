"""compareTo, isGreaterThan and isLessThan, which Kubernetes defines alike for quantities
and for semvers (never across the two)."""

from __future__ import annotations

from typing import Any

import celpy.celtypes as ct

from operators.cel.values import CelQuantity, CelSemver, EvalError, type_name


def _compare(a: Any, b: Any, name: str) -> int:
    if isinstance(a, CelQuantity) and isinstance(b, CelQuantity):
        return a.q.compare(b.q)
    if isinstance(a, CelSemver) and isinstance(b, CelSemver):
        return a.v.compare(b.v)
    raise EvalError(f"no such overload: {type_name(a)}.{name}({type_name(b)})")


def f_compare_to(a: Any, b: Any) -> ct.IntType:
    return ct.IntType(_compare(a, b, "compareTo"))


def f_is_greater_than(a: Any, b: Any) -> ct.BoolType:
    return ct.BoolType(_compare(a, b, "isGreaterThan") == 1)


def f_is_less_than(a: Any, b: Any) -> ct.BoolType:
    return ct.BoolType(_compare(a, b, "isLessThan") == -1)
