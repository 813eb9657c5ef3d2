"""Kubernetes' lists library (isSorted, sum, min, max) and the cel-go sets extension."""

from __future__ import annotations

from typing import Any

import celpy.celtypes as ct

from operators.cel.library.base import need_list
from operators.cel.library.operators import op_add, op_gt, op_in, op_le, op_lt
from operators.cel.values import EvalError


def f_is_sorted(v: Any) -> ct.BoolType:
    items = need_list(v)
    return ct.BoolType(all(op_le(a, b) for a, b in zip(items, items[1:], strict=False)))


def f_sum(v: Any) -> Any:
    items = need_list(v)
    total: Any = ct.IntType(0)
    if items and isinstance(items[0], ct.DoubleType):
        total = ct.DoubleType(0.0)
    for item in items:
        total = op_add(total, item)
    return total


def _extreme(v: Any, name: str, better: Any) -> Any:
    items = need_list(v)
    if not items:
        raise EvalError(f"{name} called on empty list")
    best = items[0]
    for item in items[1:]:
        if better(item, best):
            best = item
    return best


def f_min(v: Any) -> Any:
    return _extreme(v, "min", op_lt)


def f_max(v: Any) -> Any:
    return _extreme(v, "max", op_gt)


def f_sets_contains(a: Any, b: Any) -> ct.BoolType:
    return ct.BoolType(all(op_in(x, need_list(a)) for x in need_list(b)))


def f_sets_equivalent(a: Any, b: Any) -> ct.BoolType:
    return ct.BoolType(bool(f_sets_contains(a, b)) and bool(f_sets_contains(b, a)))


def f_sets_intersects(a: Any, b: Any) -> ct.BoolType:
    return ct.BoolType(any(op_in(x, need_list(a)) for x in need_list(b)))
