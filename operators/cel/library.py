"""The functions a DRA selector can call: CEL operators plus the Kubernetes libraries.

Upstream's DRA environment is the Kubernetes base environment (strings extension,
lists, regex, quantity, sets, optionals) plus semver and `cel.bind`. Every function here
takes and returns CEL values; errors are returned as `CELEvalError` values so that
`&&`, `||` and `?:` can absorb them the way CEL requires.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import wraps
from typing import Any

import celpy.celtypes as ct
import re2
from celpy.evaluation import CELEvalError

from operators.cel.values import (
    BOOL_TYPES,
    NONE,
    CelOptional,
    CelQuantity,
    CelSemver,
    DomainMap,
    EvalError,
    StrictMap,
    type_name,
)
from operators.model.quantity import Quantity
from operators.model.semver import Semver

Fn = Callable[..., Any]


class BudgetExceeded(BaseException):
    """Raised through every handler: a runaway expression must stop, not be absorbed."""


_NUMERIC = (ct.IntType, ct.UintType, ct.DoubleType)


def _is_bool(v: Any) -> bool:
    return isinstance(v, BOOL_TYPES)


def _kind(v: Any) -> str:
    name = type_name(v)
    return "number" if name in ("int", "uint", "double") else name


# -- operators -------------------------------------------------------------------


def op_eq(a: Any, b: Any) -> ct.BoolType:
    ka, kb = _kind(a), _kind(b)
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
    ka, kb = _kind(a), _kind(b)
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
    if type(a) is not type(b) or _is_bool(a):
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
    if not _is_bool(a):
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
        if not isinstance(key, ct.IntType | ct.UintType) or _is_bool(key):
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
    if (_is_bool(a) and not a) or (_is_bool(b) and not b):
        return ct.BoolType(False)
    for v in (a, b):
        if isinstance(v, CELEvalError):
            return v
        if not _is_bool(v):
            return CELEvalError(f"no such overload: {type_name(v)} && ...")
    return ct.BoolType(True)


def logical_or(a: Any, b: Any) -> Any:
    if (_is_bool(a) and a) or (_is_bool(b) and b):
        return ct.BoolType(True)
    for v in (a, b):
        if isinstance(v, CELEvalError):
            return v
        if not _is_bool(v):
            return CELEvalError(f"no such overload: {type_name(v)} || ...")
    return ct.BoolType(False)


def conditional(c: Any, a: Any, b: Any) -> Any:
    if isinstance(c, CELEvalError):
        return c
    if not _is_bool(c):
        return CELEvalError(f"no such overload: {type_name(c)} ? ... : ...")
    return a if c else b


# -- standard functions ----------------------------------------------------------


def f_size(v: Any) -> ct.IntType:
    if isinstance(v, str | bytes | list | dict):
        return ct.IntType(len(v))
    raise EvalError(f"no such overload: size({type_name(v)})")


def _need_str(*values: Any) -> None:
    for v in values:
        if not isinstance(v, str):
            raise EvalError(f"no such overload: expected string, got {type_name(v)}")


def f_contains(s: Any, sub: Any) -> ct.BoolType:
    _need_str(s, sub)
    return ct.BoolType(sub in s)


def f_starts_with(s: Any, prefix: Any) -> ct.BoolType:
    _need_str(s, prefix)
    return ct.BoolType(s.startswith(prefix))


def f_ends_with(s: Any, suffix: Any) -> ct.BoolType:
    _need_str(s, suffix)
    return ct.BoolType(s.endswith(suffix))


def _regex(pattern: str) -> Any:
    try:
        return re2.compile(pattern)
    except re2.error as ex:
        raise EvalError(f"invalid regular expression {pattern!r}: {ex}") from None


def f_matches(s: Any, pattern: Any) -> ct.BoolType:
    _need_str(s, pattern)
    return ct.BoolType(_regex(pattern).search(s) is not None)


def f_find(s: Any, pattern: Any) -> ct.StringType:
    _need_str(s, pattern)
    m = _regex(pattern).search(s)
    return ct.StringType(m.group(0) if m else "")


def f_find_all(s: Any, pattern: Any, limit: Any = None) -> ct.ListType:
    _need_str(s, pattern)
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
    if isinstance(v, int) and not _is_bool(v):
        return ct.IntType(int(v))
    raise EvalError(f"no such overload: int({type_name(v)})")


def f_uint(v: Any) -> ct.UintType:
    if isinstance(v, str | int | float) and not _is_bool(v):
        try:
            return ct.UintType(int(v) if not isinstance(v, str) else int(v, 10))
        except ValueError:
            raise EvalError(f"cannot convert {v!r} to uint") from None
    raise EvalError(f"no such overload: uint({type_name(v)})")


def f_double(v: Any) -> ct.DoubleType:
    if isinstance(v, str | int | float) and not _is_bool(v):
        try:
            return ct.DoubleType(float(v))
        except ValueError:
            raise EvalError(f"cannot convert {v!r} to double") from None
    raise EvalError(f"no such overload: double({type_name(v)})")


def f_string(v: Any) -> ct.StringType:
    if _is_bool(v):
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
    if _is_bool(v):
        return ct.BoolType(v)
    if isinstance(v, str):
        if v in ("true", "True", "TRUE", "t", "1"):
            return ct.BoolType(True)
        if v in ("false", "False", "FALSE", "f", "0"):
            return ct.BoolType(False)
    raise EvalError(f"no such overload: bool({type_name(v)})")


def f_dyn(v: Any) -> Any:
    return v


# -- strings extension -------------------------------------------------------------


def f_char_at(s: Any, i: Any) -> ct.StringType:
    _need_str(s)
    if not 0 <= int(i) <= len(s):
        raise EvalError(f"index out of range: {i}")
    return ct.StringType(s[int(i): int(i) + 1])


def f_index_of(s: Any, sub: Any, start: Any = None) -> ct.IntType:
    if isinstance(s, list):
        for i, v in enumerate(s):
            if op_eq(v, sub):
                return ct.IntType(i)
        return ct.IntType(-1)
    _need_str(s, sub)
    begin = 0 if start is None else int(start)
    if not 0 <= begin <= len(s):
        raise EvalError(f"index out of range: {begin}")
    return ct.IntType(s.find(sub, begin))


def f_last_index_of(s: Any, sub: Any, end: Any = None) -> ct.IntType:
    if isinstance(s, list):
        for i in range(len(s) - 1, -1, -1):
            if op_eq(s[i], sub):
                return ct.IntType(i)
        return ct.IntType(-1)
    _need_str(s, sub)
    if end is None:
        return ct.IntType(s.rfind(sub))
    if not 0 <= int(end) <= len(s):
        raise EvalError(f"index out of range: {end}")
    return ct.IntType(s.rfind(sub, 0, int(end) + len(sub)))


def f_lower_ascii(s: Any) -> ct.StringType:
    _need_str(s)
    return ct.StringType("".join(c.lower() if c.isascii() else c for c in s))


def f_upper_ascii(s: Any) -> ct.StringType:
    _need_str(s)
    return ct.StringType("".join(c.upper() if c.isascii() else c for c in s))


def f_replace(s: Any, old: Any, new: Any, count: Any = None) -> ct.StringType:
    _need_str(s, old, new)
    n = -1 if count is None else int(count)
    return ct.StringType(s.replace(old, new, n))


def f_split(s: Any, sep: Any, limit: Any = None) -> ct.ListType:
    _need_str(s, sep)
    n = -1 if limit is None else int(limit)
    if n == 0:
        return ct.ListType([])
    if sep == "":
        parts = list(s)
        if n > 0 and len(parts) > n:
            parts = parts[: n - 1] + ["".join(parts[n - 1:])]
    else:
        parts = s.split(sep, n - 1 if n > 0 else -1)
    return ct.ListType([ct.StringType(p) for p in parts])


def f_substring(s: Any, start: Any, end: Any = None) -> ct.StringType:
    _need_str(s)
    stop = len(s) if end is None else int(end)
    if not 0 <= int(start) <= stop <= len(s):
        raise EvalError(f"index out of range: {start}..{stop}")
    return ct.StringType(s[int(start): stop])


def f_trim(s: Any) -> ct.StringType:
    _need_str(s)
    return ct.StringType(s.strip())


def f_join(items: Any, sep: Any = "") -> ct.StringType:
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise EvalError("no such overload: join() needs a list of strings")
    _need_str(sep)
    return ct.StringType(sep.join(items))


def f_reverse(s: Any) -> ct.StringType:
    _need_str(s)
    return ct.StringType(s[::-1])


# -- Kubernetes lists library -------------------------------------------------------


def _need_list(v: Any) -> list[Any]:
    if not isinstance(v, list):
        raise EvalError(f"no such overload: expected list, got {type_name(v)}")
    return v


def f_is_sorted(v: Any) -> ct.BoolType:
    items = _need_list(v)
    return ct.BoolType(all(op_le(a, b) for a, b in zip(items, items[1:], strict=False)))


def f_sum(v: Any) -> Any:
    items = _need_list(v)
    total: Any = ct.IntType(0)
    if items and isinstance(items[0], ct.DoubleType):
        total = ct.DoubleType(0.0)
    for item in items:
        total = op_add(total, item)
    return total


def f_min(v: Any) -> Any:
    items = _need_list(v)
    if not items:
        raise EvalError("min called on empty list")
    best = items[0]
    for item in items[1:]:
        if op_lt(item, best):
            best = item
    return best


def f_max(v: Any) -> Any:
    items = _need_list(v)
    if not items:
        raise EvalError("max called on empty list")
    best = items[0]
    for item in items[1:]:
        if op_gt(item, best):
            best = item
    return best


# -- sets extension -------------------------------------------------------------------


def f_sets_contains(a: Any, b: Any) -> ct.BoolType:
    return ct.BoolType(all(op_in(x, _need_list(a)) for x in _need_list(b)))


def f_sets_equivalent(a: Any, b: Any) -> ct.BoolType:
    return ct.BoolType(bool(f_sets_contains(a, b)) and bool(f_sets_contains(b, a)))


def f_sets_intersects(a: Any, b: Any) -> ct.BoolType:
    return ct.BoolType(any(op_in(x, _need_list(a)) for x in _need_list(b)))


# -- quantity and semver -------------------------------------------------------------


def f_quantity(s: Any) -> CelQuantity:
    _need_str(s)
    try:
        return CelQuantity(Quantity.parse(s))
    except ValueError as ex:
        raise EvalError(str(ex)) from None


def f_is_quantity(s: Any) -> ct.BoolType:
    _need_str(s)
    try:
        Quantity.parse(s)
    except ValueError:
        return ct.BoolType(False)
    return ct.BoolType(True)


def f_semver(s: Any, normalize: Any = None) -> CelSemver:
    _need_str(s)
    if normalize is not None and not _is_bool(normalize):
        raise EvalError(f"no such overload: semver(string, {type_name(normalize)})")
    try:
        return CelSemver(Semver.parse(s, bool(normalize)))
    except ValueError as ex:
        raise EvalError(str(ex)) from None


def f_is_semver(s: Any, normalize: Any = None) -> ct.BoolType:
    _need_str(s)
    if normalize is not None and not _is_bool(normalize):
        raise EvalError(f"no such overload: isSemver(string, {type_name(normalize)})")
    try:
        Semver.parse(s, bool(normalize))
    except ValueError:
        return ct.BoolType(False)
    return ct.BoolType(True)


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


def _need_semver(v: Any, name: str) -> Semver:
    if not isinstance(v, CelSemver):
        raise EvalError(f"no such overload: {type_name(v)}.{name}()")
    return v.v


def f_major(v: Any) -> ct.IntType:
    return ct.IntType(_need_semver(v, "major").major)


def f_minor(v: Any) -> ct.IntType:
    return ct.IntType(_need_semver(v, "minor").minor)


def f_patch(v: Any) -> ct.IntType:
    return ct.IntType(_need_semver(v, "patch").patch)


# -- optionals ------------------------------------------------------------------------


def f_optional_of(v: Any) -> CelOptional:
    return CelOptional(True, v)


def f_optional_none() -> CelOptional:
    return NONE


def f_optional_of_non_zero(v: Any) -> CelOptional:
    zero = v is None or (not _is_bool(v) and isinstance(v, int | float | str | bytes | list | dict)
                         and not v) or (_is_bool(v) and not v)
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


# -- the table ---------------------------------------------------------------------

_ERROR_AWARE: dict[str, Fn] = {
    "_&&_": logical_and,
    "_||_": logical_or,
    "_?_:_": conditional,
}

_STRICT: dict[str, Fn] = {
    "_==_": op_eq, "_!=_": op_ne, "_<_": op_lt, "_<=_": op_le, "_>_": op_gt, "_>=_": op_ge,
    "_+_": op_add, "_-_": op_sub, "_*_": op_mul, "_/_": op_div, "_%_": op_mod,
    "-_": op_neg, "!_": op_not, "_in_": op_in, "_[_]": op_index, "_._": op_select,
    "_?._": op_opt_select, "_[?_]": op_opt_index,
    "size": f_size, "contains": f_contains, "startsWith": f_starts_with,
    "endsWith": f_ends_with, "matches": f_matches, "find": f_find, "findAll": f_find_all,
    "int": f_int, "uint": f_uint, "double": f_double, "string": f_string, "bool": f_bool,
    "dyn": f_dyn,
    "charAt": f_char_at, "indexOf": f_index_of, "lastIndexOf": f_last_index_of,
    "lowerAscii": f_lower_ascii, "upperAscii": f_upper_ascii, "replace": f_replace,
    "split": f_split, "substring": f_substring, "trim": f_trim, "join": f_join,
    "reverse": f_reverse,
    "isSorted": f_is_sorted, "sum": f_sum, "min": f_min, "max": f_max,
    "sets.contains": f_sets_contains, "sets.equivalent": f_sets_equivalent,
    "sets.intersects": f_sets_intersects,
    "quantity": f_quantity, "isQuantity": f_is_quantity, "sign": f_sign,
    "asInteger": f_as_integer, "isInteger": f_is_integer,
    "asApproximateFloat": f_as_approximate_float, "add": f_add, "sub": f_sub, "mul": f_mul,
    "semver": f_semver, "isSemver": f_is_semver, "major": f_major, "minor": f_minor,
    "patch": f_patch,
    "compareTo": f_compare_to, "isGreaterThan": f_is_greater_than, "isLessThan": f_is_less_than,
    "optional.of": f_optional_of, "optional.none": f_optional_none,
    "optional.ofNonZeroValue": f_optional_of_non_zero,
    "hasValue": f_has_value, "value": f_value, "orValue": f_or_value, "or": f_or,
}

# Namespaces whose `ns.fn(...)` calls are global functions, not methods on a variable.
NAMESPACES = frozenset({"optional", "sets"})


def _guarded(name: str, fn: Fn) -> Fn:
    """Propagate error arguments and turn Python exceptions into CEL error values."""

    @wraps(fn)
    def call(*args: Any) -> Any:
        for a in args:
            if isinstance(a, CELEvalError):
                return a
        try:
            return fn(*args)
        except BudgetExceeded:
            raise
        except CELEvalError as ex:
            return ex
        except EvalError as ex:
            return CELEvalError(str(ex))
        except ZeroDivisionError:
            return CELEvalError("division by zero")
        except (OverflowError, ValueError) as ex:
            return CELEvalError(f"{name}: {ex or 'integer overflow'}")
        except (TypeError, AttributeError, KeyError, IndexError):
            shown = ", ".join(type_name(a) for a in args)
            return CELEvalError(f"no such overload: {name}({shown})")
        except RecursionError:
            return CELEvalError("expression nesting too deep")

    return call


FUNCTIONS: dict[str, Fn] = {name: _guarded(name, fn) for name, fn in _STRICT.items()}
FUNCTIONS.update(_ERROR_AWARE)

# Needed by the device map builder.
__all__ = ["FUNCTIONS", "NAMESPACES", "BudgetExceeded", "StrictMap", "DomainMap"]
