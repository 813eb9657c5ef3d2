"""CEL's operators: equality, ordering, arithmetic, `in`, indexing, field selection,
optional selection, and the error-absorbing `&&`, `||` and `?:`.

Heterogeneous equality is false rather than an error, as in cel-go; ordering and
arithmetic need operands of one type.
"""

from __future__ import annotations

from typing import Any

import celpy.celtypes as ct
from celpy.evaluation import CELEvalError

from operators.cel.library.base import is_bool, kind
from operators.cel.values import NONE, CelOptional, DomainMap, EvalError, type_name


def op_eq(a: Any, b: Any) -> ct.BoolType:
    ka, kb = kind(a), kind(b)
    if ka != kb:
        return ct.BoolType(False)  # heterogeneous equality is false, not an error
    if ka == "number":
        return ct.BoolType(float(a) == float(b) if isinstance(a, float) or isinstance(b, float)
                           else int(a) == int(b))
    if ka == "list":
        return ct.BoolType(len(a) == len(b) and all(op_eq(x, y) for x, y in zip(a, b, strict=True)))
    if ka == "map":
        if len(a) != len(b):
            return ct.BoolType(False)
        for k, v in a.items():
            if k not in b or not op_eq(v, b[k]):
                return ct.BoolType(False)
        return ct.BoolType(True)
    return ct.BoolType(bool(a == b))


def op_ne(a: Any, b: Any) -> ct.BoolType:
    return ct.BoolType(not op_eq(a, b))


def _ordered(a: Any, b: Any, name: str) -> None:
    ka, kb = kind(a), kind(b)
    if ka != kb or ka not in ("number", "string", "bool", "bytes"):
        raise EvalError(f"no such overload: {type_name(a)} {name} {type_name(b)}")


def op_lt(a: Any, b: Any) -> ct.BoolType:
    _ordered(a, b, "<")
    return ct.BoolType(a < b)


def op_le(a: Any, b: Any) -> ct.BoolType:
    _ordered(a, b, "<=")
    return ct.BoolType(a <= b)


def op_gt(a: Any, b: Any) -> ct.BoolType:
    _ordered(a, b, ">")
    return ct.BoolType(a > b)


def op_ge(a: Any, b: Any) -> ct.BoolType:
    _ordered(a, b, ">=")
    return ct.BoolType(a >= b)


def _arith(name: str, a: Any, b: Any) -> None:
    if type(a) is not type(b) or is_bool(a):
        raise EvalError(f"no such overload: {type_name(a)} {name} {type_name(b)}")


def op_add(a: Any, b: Any) -> Any:
    if isinstance(a, list) and isinstance(b, list):
        return ct.ListType(list(a) + list(b))
    _arith("+", a, b)
    return a + b


def op_sub(a: Any, b: Any) -> Any:
    _arith("-", a, b)
    return a - b


def op_mul(a: Any, b: Any) -> Any:
    _arith("*", a, b)
    return a * b


def op_div(a: Any, b: Any) -> Any:
    _arith("/", a, b)
    return a / b


def op_mod(a: Any, b: Any) -> Any:
    _arith("%", a, b)
    return a % b


def op_neg(a: Any) -> Any:
    if not isinstance(a, ct.IntType | ct.DoubleType):
        raise EvalError(f"no such overload: -{type_name(a)}")
    return -a


def op_not(a: Any) -> Any:
    if not is_bool(a):
        raise EvalError(f"no such overload: !{type_name(a)}")
    return ct.BoolType(not a)


def op_in(item: Any, container: Any) -> ct.BoolType:
    if isinstance(container, dict):
        return ct.BoolType(item in container)
    if isinstance(container, list):
        return ct.BoolType(any(op_eq(item, c) for c in container))
    raise EvalError(f"no such overload: {type_name(item)} in {type_name(container)}")


def _lookup(container: Any, key: Any) -> Any:
    if isinstance(container, DomainMap):
        return container[key]
    if isinstance(container, dict):
        if key in container:
            return container[key]
        raise EvalError(f"no such key: {key}")
    if isinstance(container, list):
        if not isinstance(key, ct.IntType | ct.UintType) or is_bool(key):
            raise EvalError(f"no such overload: list[{type_name(key)}]")
        if not 0 <= key < len(container):
            raise EvalError(f"index out of bounds: {key}")
        return container[key]
    raise EvalError(f"no such overload: {type_name(container)}[{type_name(key)}]")


def op_index(container: Any, key: Any) -> Any:
    return _lookup(container, key)


def op_select(container: Any, field: str) -> Any:
    if isinstance(container, dict):
        return _lookup(container, ct.StringType(field))
    raise EvalError(f"type '{type_name(container)}' does not support field selection")


def op_opt_select(container: Any, field: Any) -> CelOptional:
    return op_opt_index(container, field)


def op_opt_index(container: Any, key: Any) -> CelOptional:
    if isinstance(container, CelOptional):
        if not container.present:
            return NONE
        container = container.value
    if isinstance(container, DomainMap):
        return CelOptional(True, container[key])
    if isinstance(container, dict):
        return CelOptional(True, container[key]) if key in container else NONE
    if isinstance(container, list):
        try:
            return CelOptional(True, _lookup(container, key))
        except EvalError:
            return NONE
    raise EvalError(f"no such overload: {type_name(container)}.?{key}")


def logical_and(a: Any, b: Any) -> Any:
    if (is_bool(a) and not a) or (is_bool(b) and not b):
        return ct.BoolType(False)
    for v in (a, b):
        if isinstance(v, CELEvalError):
            return v
        if not is_bool(v):
            return CELEvalError(f"no such overload: {type_name(v)} && ...")
    return ct.BoolType(True)


def logical_or(a: Any, b: Any) -> Any:
    if (is_bool(a) and a) or (is_bool(b) and b):
        return ct.BoolType(True)
    for v in (a, b):
        if isinstance(v, CELEvalError):
            return v
        if not is_bool(v):
            return CELEvalError(f"no such overload: {type_name(v)} || ...")
    return ct.BoolType(False)


def conditional(c: Any, a: Any, b: Any) -> Any:
    if isinstance(c, CELEvalError):
        return c
    if not is_bool(c):
        return CELEvalError(f"no such overload: {type_name(c)} ? ... : ...")
    return a if c else b
