"""Kubernetes' quantity library: quantity(), isQuantity() and the Quantity methods.

Arithmetic and comparison use `operators.model.quantity.Quantity`, the exact decimal
arithmetic that resource.Quantity does upstream.
"""

from __future__ import annotations

from typing import Any

import celpy.celtypes as ct

from operators.cel.library.base import need_str
from operators.cel.values import CelQuantity, EvalError, type_name
from operators.model.quantity import Quantity


def f_quantity(s: Any) -> CelQuantity:
    need_str(s)
    try:
        return CelQuantity(Quantity.parse(s))
    except ValueError as ex:
        raise EvalError(str(ex)) from None


def f_is_quantity(s: Any) -> ct.BoolType:
    need_str(s)
    try:
        Quantity.parse(s)
    except ValueError:
        return ct.BoolType(False)
    return ct.BoolType(True)


def _need_quantity(v: Any, name: str) -> Quantity:
    if not isinstance(v, CelQuantity):
        raise EvalError(f"no such overload: {type_name(v)}.{name}()")
    return v.q


def _operand(v: Any, name: str) -> Quantity:
    if isinstance(v, CelQuantity):
        return v.q
    if isinstance(v, ct.IntType):
        return Quantity.from_int(int(v))
    raise EvalError(f"no such overload: Quantity.{name}({type_name(v)})")


def f_sign(v: Any) -> ct.IntType:
    return ct.IntType(_need_quantity(v, "sign").sign())


def f_as_integer(v: Any) -> ct.IntType:
    value = _need_quantity(v, "asInteger").as_int64()
    if value is None:
        raise EvalError("cannot convert value to integer")
    return ct.IntType(value)


def f_is_integer(v: Any) -> ct.BoolType:
    return ct.BoolType(_need_quantity(v, "isInteger").as_int64() is not None)


def f_as_approximate_float(v: Any) -> ct.DoubleType:
    return ct.DoubleType(_need_quantity(v, "asApproximateFloat").as_approximate_float())


def f_add(a: Any, b: Any) -> CelQuantity:
    return CelQuantity(_need_quantity(a, "add").add(_operand(b, "add")))


def f_sub(a: Any, b: Any) -> CelQuantity:
    return CelQuantity(_need_quantity(a, "sub").sub(_operand(b, "sub")))


def f_mul(a: Any, b: Any) -> CelQuantity:
    if not isinstance(b, ct.IntType):
        raise EvalError(f"no such overload: Quantity.mul({type_name(b)})")
    return CelQuantity(_need_quantity(a, "mul").mul(int(b)))
