"""What every library module shares: the budget escape and the argument checks.

Functions raise `EvalError` for a wrong argument; the table in `__init__` turns that
into a CEL error value, so `&&`, `||` and `?:` can absorb it the way CEL requires.
"""

from __future__ import annotations

from typing import Any

from operators.cel.values import BOOL_TYPES, EvalError, type_name


class BudgetExceeded(BaseException):
    """Raised through every handler: a runaway expression must stop, not be absorbed."""


def is_bool(v: Any) -> bool:
    return isinstance(v, BOOL_TYPES)


def kind(v: Any) -> str:
    """The type name, with int, uint and double all counting as "number"."""
    name = type_name(v)
    return "number" if name in ("int", "uint", "double") else name


def need_str(*values: Any) -> None:
    for v in values:
        if not isinstance(v, str):
            raise EvalError(f"no such overload: expected string, got {type_name(v)}")


def need_list(v: Any) -> list[Any]:
    if not isinstance(v, list):
        raise EvalError(f"no such overload: expected list, got {type_name(v)}")
    return v


__all__ = ["BudgetExceeded", "is_bool", "kind", "need_list", "need_str"]
