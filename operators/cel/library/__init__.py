"""The functions a DRA selector can call: CEL operators plus the Kubernetes libraries.

Upstream's DRA environment is the Kubernetes base environment (strings extension,
lists, regex, quantity, sets, optionals) plus semver and `cel.bind`. Every function here
takes and returns CEL values; errors are returned as `CELEvalError` values so that
`&&`, `||` and `?:` can absorb them the way CEL requires.

One module per library, the way upstream composes the environment:

    base.py       shared argument checks, BudgetExceeded
    operators.py  ==, <, +, in, [], ., ?., [?], &&, ||, ?:
    standard.py   size, contains, matches, find, int/uint/double/string/bool/dyn
    strings.py    the strings extension
    lists.py      the Kubernetes lists library and the sets extension
    quantity.py   quantity() and the Quantity methods
    semver.py     semver() and the Semver methods
    compare.py    compareTo/isGreaterThan/isLessThan for quantities and semvers
    optionals.py  optional.of/none/ofNonZeroValue and the Optional methods

This module keeps only the table that names them for the compiler and the runtime, and
the guard that turns Python exceptions into CEL error values. How devices are bound
into an expression is the runtime's business (`operators.cel.values`, `.runtime`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from celpy.evaluation import CELEvalError

from operators.cel.library.base import BudgetExceeded
from operators.cel.library.compare import f_compare_to, f_is_greater_than, f_is_less_than
from operators.cel.library.lists import (
    f_is_sorted,
    f_max,
    f_min,
    f_sets_contains,
    f_sets_equivalent,
    f_sets_intersects,
    f_sum,
)
from operators.cel.library.operators import (
    conditional,
    logical_and,
    logical_or,
    op_add,
    op_div,
    op_eq,
    op_ge,
    op_gt,
    op_in,
    op_index,
    op_le,
    op_lt,
    op_mod,
    op_mul,
    op_ne,
    op_neg,
    op_not,
    op_opt_index,
    op_opt_select,
    op_select,
    op_sub,
)
from operators.cel.library.optionals import (
    f_has_value,
    f_optional_none,
    f_optional_of,
    f_optional_of_non_zero,
    f_or,
    f_or_value,
    f_value,
)
from operators.cel.library.quantity import (
    f_add,
    f_as_approximate_float,
    f_as_integer,
    f_is_integer,
    f_is_quantity,
    f_mul,
    f_quantity,
    f_sign,
    f_sub,
)
from operators.cel.library.semver import f_is_semver, f_major, f_minor, f_patch, f_semver
from operators.cel.library.standard import (
    f_bool,
    f_contains,
    f_double,
    f_dyn,
    f_ends_with,
    f_find,
    f_find_all,
    f_int,
    f_matches,
    f_size,
    f_starts_with,
    f_string,
    f_uint,
)
from operators.cel.library.strings import (
    f_char_at,
    f_index_of,
    f_join,
    f_last_index_of,
    f_lower_ascii,
    f_replace,
    f_reverse,
    f_split,
    f_substring,
    f_trim,
    f_upper_ascii,
)
from operators.cel.values import DomainMap, EvalError, StrictMap, type_name

Fn = Callable[..., Any]

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
