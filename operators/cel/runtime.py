"""What transpiled selectors call at run time: scopes, error capture, macros, budget.

The budget stands in for upstream's runtime cost limit: every macro iteration is one
step, and evaluation also stops when its wall-clock allowance runs out. Exceeding
either raises `BudgetExceeded`, which no CEL operator can absorb.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import celpy.celtypes as ct
from celpy.evaluation import CELEvalError

from operators.cel.library import FUNCTIONS, BudgetExceeded
from operators.cel.values import BOOL_TYPES, type_name

MAX_STEPS = 100_000
MAX_SECONDS = 0.5
COST_LIMIT_MESSAGE = "operation cancelled: actual cost limit exceeded"

_state = threading.local()


def start_budget(max_steps: int = MAX_STEPS, max_seconds: float = MAX_SECONDS) -> None:
    _state.steps_left = max_steps
    _state.deadline = time.perf_counter() + max_seconds


def _step() -> None:
    left = _state.steps_left - 1
    _state.steps_left = left
    if left < 0:
        raise BudgetExceeded()
    if left % 256 == 0 and time.perf_counter() > _state.deadline:
        raise BudgetExceeded()


class Scope:
    """The activation transpiled code reads variables from (`activation.device`)."""

    __slots__ = ("_parent", "_vars")

    def __init__(self, variables: dict[str, Any], parent: Scope | None = None) -> None:
        self._vars = variables
        self._parent = parent

    def __getattr__(self, name: str) -> Any:
        scope: Scope | None = self
        while scope is not None:
            if name in scope._vars:
                return scope._vars[name]
            scope = scope._parent
        raise NameError(name)

    def resolve_variable(self, name: str) -> Any:
        return self.__getattr__(name)

    def nested_activation(self, vars: dict[str, Any]) -> Scope:  # noqa: A002 - celpy's name
        return Scope(vars, self)


def result(activation: Scope, expression: Callable[[Scope], Any]) -> Any:
    """Evaluate a sub-expression, turning failures into CEL error values."""
    try:
        return expression(activation)
    except BudgetExceeded:
        raise
    except CELEvalError as ex:
        return ex
    except NameError as ex:
        return CELEvalError(f"undeclared reference to '{ex.args[0] if ex.args else '?'}'")
    except RecursionError:
        return CELEvalError("expression nesting too deep")
    except Exception as ex:
        return CELEvalError(f"evaluation error: {type(ex).__name__}: {ex}")


def _items(activation: Scope, source: Callable[[Scope], Any]) -> list[Any] | CELEvalError:
    value = result(activation, source)
    if isinstance(value, CELEvalError):
        return value
    if isinstance(value, list):
        return list(value)
    if isinstance(value, dict):
        return list(value.keys())
    return CELEvalError(f"got '{type_name(value)}', expected iterable type")


Body = Callable[[Scope], Any]


def _quantifier(name: str, decisive: bool) -> Callable[[Scope, str, Body, Body], Any]:
    """all() (decisive False) and exists() (decisive True), commutative as CEL's && and ||:
    an item whose predicate is `decisive` settles the answer even after errors; otherwise
    the first error (or non-boolean) is the answer, and with none, `not decisive`."""

    def macro(activation: Scope, var: str, body: Body, source: Body) -> Any:
        items = _items(activation, source)
        if isinstance(items, CELEvalError):
            return items
        error: Any = None
        for item in items:
            _step()
            value = result(Scope({var: item}, activation), body)
            if isinstance(value, BOOL_TYPES):
                if bool(value) == decisive:
                    return ct.BoolType(decisive)
            elif error is None:
                error = value if isinstance(value, CELEvalError) else CELEvalError(
                    f"no such overload: {name}() predicate returned {type_name(value)}")
        return error if error is not None else ct.BoolType(not decisive)

    return macro


macro_all = _quantifier("all", decisive=False)
macro_exists = _quantifier("exists", decisive=True)


def _evaluate_all(activation: Scope, var: str, body: Body, source: Body,
                  predicate: str | None) -> list[tuple[Any, Any]] | CELEvalError:
    """(item, value) for every item, for the macros that need every value: the first error
    is the answer, and for a `predicate` macro so is the first non-boolean value."""
    items = _items(activation, source)
    if isinstance(items, CELEvalError):
        return items
    out: list[tuple[Any, Any]] = []
    for item in items:
        _step()
        value = result(Scope({var: item}, activation), body)
        if isinstance(value, CELEvalError):
            return value
        if predicate is not None and not isinstance(value, BOOL_TYPES):
            return CELEvalError(f"no such overload: {predicate}() predicate returned {type_name(value)}")
        out.append((item, value))
    return out


def macro_exists_one(activation: Scope, var: str, body: Body, source: Body) -> Any:
    values = _evaluate_all(activation, var, body, source, "exists_one")
    if isinstance(values, CELEvalError):
        return values
    return ct.BoolType(sum(bool(v) for _, v in values) == 1)


def macro_map(activation: Scope, var: str, body: Body, source: Body) -> Any:
    values = _evaluate_all(activation, var, body, source, None)
    if isinstance(values, CELEvalError):
        return values
    return ct.ListType([v for _, v in values])


def macro_filter(activation: Scope, var: str, body: Body, source: Body) -> Any:
    values = _evaluate_all(activation, var, body, source, "filter")
    if isinstance(values, CELEvalError):
        return values
    return ct.ListType([item for item, v in values if v])


MACROS: dict[str, Callable[..., Any]] = {
    "all": macro_all,
    "exists": macro_exists,
    "exists_one": macro_exists_one,
    "map": macro_map,
    "filter": macro_filter,
}

__all__ = ["FUNCTIONS", "MACROS", "Scope", "result", "start_budget", "COST_LIMIT_MESSAGE"]
