"""CEL's standard functions: size, string tests, regular expressions (RE2, as upstream),
and the type conversions int, uint, double, string, bool and dyn."""

from __future__ import annotations

import math
from typing import Any

import celpy.celtypes as ct
import re2

from operators.cel.library.base import is_bool, need_str
from operators.cel.values import CelQuantity, CelSemver, EvalError, type_name


def f_size(v: Any) -> ct.IntType:
    if isinstance(v, str | bytes | list | dict):
        return ct.IntType(len(v))
    raise EvalError(f"no such overload: size({type_name(v)})")




def f_contains(s: Any, sub: Any) -> ct.BoolType:
    need_str(s, sub)
    return ct.BoolType(sub in s)


def f_starts_with(s: Any, prefix: Any) -> ct.BoolType:
    need_str(s, prefix)
    return ct.BoolType(s.startswith(prefix))


def f_ends_with(s: Any, suffix: Any) -> ct.BoolType:
    need_str(s, suffix)
    return ct.BoolType(s.endswith(suffix))


def _regex(pattern: str) -> Any:
    try:
        return re2.compile(pattern)
    except re2.error as ex:
        raise EvalError(f"invalid regular expression {pattern!r}: {ex}") from None


def f_matches(s: Any, pattern: Any) -> ct.BoolType:
    need_str(s, pattern)
    return ct.BoolType(_regex(pattern).search(s) is not None)


def f_find(s: Any, pattern: Any) -> ct.StringType:
    need_str(s, pattern)
    m = _regex(pattern).search(s)
    return ct.StringType(m.group(0) if m else "")


def f_find_all(s: Any, pattern: Any, limit: Any = None) -> ct.ListType:
    need_str(s, pattern)
    found = [ct.StringType(m.group(0)) for m in _regex(pattern).finditer(s)]
    if limit is not None and int(limit) >= 0:
        found = found[: int(limit)]
    return ct.ListType(found)


def f_int(v: Any) -> ct.IntType:
    if isinstance(v, str):
        try:
            return ct.IntType(int(v, 10))
        except ValueError:
            raise EvalError(f"cannot convert {v!r} to int") from None
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            raise EvalError("integer overflow")
        return ct.IntType(int(v))
    if isinstance(v, int) and not is_bool(v):
        return ct.IntType(int(v))
    raise EvalError(f"no such overload: int({type_name(v)})")


def f_uint(v: Any) -> ct.UintType:
    if isinstance(v, str | int | float) and not is_bool(v):
        try:
            return ct.UintType(int(v) if not isinstance(v, str) else int(v, 10))
        except ValueError:
            raise EvalError(f"cannot convert {v!r} to uint") from None
    raise EvalError(f"no such overload: uint({type_name(v)})")


def f_double(v: Any) -> ct.DoubleType:
    if isinstance(v, str | int | float) and not is_bool(v):
        try:
            return ct.DoubleType(float(v))
        except ValueError:
            raise EvalError(f"cannot convert {v!r} to double") from None
    raise EvalError(f"no such overload: double({type_name(v)})")


def f_string(v: Any) -> ct.StringType:
    if is_bool(v):
        return ct.StringType("true" if v else "false")
    if isinstance(v, CelQuantity):
        return ct.StringType(str(v.q))
    if isinstance(v, CelSemver):
        return ct.StringType(str(v.v))
    if isinstance(v, bytes):
        return ct.StringType(v.decode("utf-8"))
    if isinstance(v, str | int | float):
        return ct.StringType(v if isinstance(v, str) else str(v))
    raise EvalError(f"no such overload: string({type_name(v)})")


def f_bool(v: Any) -> ct.BoolType:
    if is_bool(v):
        return ct.BoolType(v)
    if isinstance(v, str):
        if v in ("true", "True", "TRUE", "t", "1"):
            return ct.BoolType(True)
        if v in ("false", "False", "FALSE", "f", "0"):
            return ct.BoolType(False)
    raise EvalError(f"no such overload: bool({type_name(v)})")


def f_dyn(v: Any) -> Any:
    return v
