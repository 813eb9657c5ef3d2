"""The cel-go optional types: optional.of/none/ofNonZeroValue, hasValue, value,
orValue, or (the `?.` and `[?]` operators live with the other operators)."""

from __future__ import annotations

from typing import Any

import celpy.celtypes as ct

from operators.cel.library.base import is_bool
from operators.cel.values import NONE, CelOptional, EvalError, type_name


def f_optional_of(v: Any) -> CelOptional:
    return CelOptional(True, v)


def f_optional_none() -> CelOptional:
    return NONE


def f_optional_of_non_zero(v: Any) -> CelOptional:
    zero = v is None or (not is_bool(v) and isinstance(v, int | float | str | bytes | list | dict)
                         and not v) or (is_bool(v) and not v)
    return NONE if zero else CelOptional(True, v)


def _need_optional(v: Any, name: str) -> CelOptional:
    if not isinstance(v, CelOptional):
        raise EvalError(f"no such overload: {type_name(v)}.{name}()")
    return v


def f_has_value(v: Any) -> ct.BoolType:
    return ct.BoolType(_need_optional(v, "hasValue").present)


def f_value(v: Any) -> Any:
    opt = _need_optional(v, "value")
    if not opt.present:
        raise EvalError("optional.none() dereference")
    return opt.value


def f_or_value(v: Any, default: Any) -> Any:
    opt = _need_optional(v, "orValue")
    return opt.value if opt.present else default


def f_or(v: Any, other: Any) -> Any:
    opt = _need_optional(v, "or")
    _need_optional(other, "or")
    return opt if opt.present else other
