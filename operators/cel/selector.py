"""Compiled selectors with two caches: by expression text, and by the values read.

Many devices share a model: a selector on `device.attributes["d"].model` gives the same
answer for every device with the same model. Each compiled selector knows statically
which device fields it reads (`reads`) and caches results keyed by those values, so
10,000 devices of 20 models cost 20 evaluations. When the reads cannot be determined
(the expression iterates over `device.attributes`, say) the key is the whole device.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from celpy.evaluation import CELEvalError

from operators.cel.compiler import CompileError, Read, compile_expression
from operators.cel.device import CelDevice, clear_value_memos, device_value
from operators.cel.library import BudgetExceeded
from operators.cel.runtime import COST_LIMIT_MESSAGE, Scope, start_budget
from operators.cel.values import BOOL_TYPES, type_name

COMPILE_CACHE_SIZE = 1024
RESULT_CACHE_SIZE = 65_536


@dataclass(frozen=True, slots=True)
class CelResult:
    matched: bool
    error: str | None = None


@dataclass
class CelStats:
    """Work counters, so tests and benchmarks can see what the caches saved."""

    compilations: int = 0
    compile_cache_hits: int = 0
    evaluations: int = 0
    cache_hits: int = 0

    def reset(self) -> None:
        self.compilations = self.compile_cache_hits = self.evaluations = self.cache_hits = 0


stats = CelStats()
_MISSING = object()


# -- cache keys -------------------------------------------------------------------------

KeyFn = Callable[[CelDevice], Any]


def _extractor(read: Read) -> KeyFn:
    kind = read[0]
    if kind == "driver":
        return lambda d: d.driver
    if kind == "allowMultipleAllocations":
        return lambda d: bool(getattr(d, "allow_multiple_allocations", False))
    if kind == "attribute":
        name = read[1]
        return lambda d: d.attributes.get(name, _MISSING)
    if kind == "capacity":
        name = read[1]
        return lambda d: d.capacity.get(name, _MISSING)
    prefix = read[1] + "/"
    if kind == "attribute-domain":
        return lambda d: frozenset(kv for kv in d.attributes.items() if kv[0].startswith(prefix))
    return lambda d: frozenset(kv for kv in d.capacity.items() if kv[0].startswith(prefix))


def _whole_device(d: CelDevice) -> Any:
    return (d.driver, frozenset(d.attributes.items()), frozenset(d.capacity.items()),
            bool(getattr(d, "allow_multiple_allocations", False)))


def _key_function(reads: frozenset[Read] | None) -> KeyFn:
    if reads is None:
        return _whole_device
    extractors = [_extractor(r) for r in sorted(reads)]
    if len(extractors) == 1:
        return extractors[0]
    return lambda d: tuple(f(d) for f in extractors)


# -- compiled selectors ---------------------------------------------------------------------


@dataclass(eq=False)
class CompiledSelector:
    """One compiled expression. `reads` lists the device fields it reads, None if dynamic.

    Read entries: ("driver",), ("allowMultipleAllocations",), ("attribute", "dom/name"),
    ("capacity", "dom/name"), ("attribute-domain", "dom"), ("capacity-domain", "dom").
    """

    expression: str
    compile_error: str | None = None
    reads: frozenset[Read] | None = None
    evaluations: int = 0
    cache_hits: int = 0
    _program: Callable[[Any], Any] | None = field(default=None, repr=False)
    _key: KeyFn = field(default=_whole_device, repr=False)
    _results: dict[Any, CelResult] = field(default_factory=dict, repr=False)

    def evaluate(self, device: CelDevice, use_cache: bool = True) -> CelResult:
        """Never raises: every failure is a CelResult with `error` set."""
        if self._program is None:
            return CelResult(False, self.compile_error)
        if not use_cache:
            return self._run(device)
        try:
            key = self._key(device)
            cached = self._results.get(key)
        except TypeError:  # an unhashable value slipped in; evaluate without caching
            return self._run(device)
        if cached is not None:
            self.cache_hits += 1
            stats.cache_hits += 1
            return cached
        outcome = self._run(device)
        if len(self._results) >= RESULT_CACHE_SIZE:
            self._results.clear()
        self._results[key] = outcome
        return outcome

    def clear_cache(self) -> None:
        self._results.clear()

    def _run(self, device: CelDevice) -> CelResult:
        assert self._program is not None
        self.evaluations += 1
        stats.evaluations += 1
        try:
            value = device_value(device)
        except Exception as ex:
            return CelResult(False, f"invalid device: {type(ex).__name__}: {ex}")
        start_budget()
        try:
            outcome = self._program(Scope({"device": value}))
        except BudgetExceeded:
            return CelResult(False, COST_LIMIT_MESSAGE)
        except RecursionError:
            return CelResult(False, "expression nesting too deep")
        except Exception as ex:
            return CelResult(False, f"internal error: {type(ex).__name__}: {ex}")
        if isinstance(outcome, CELEvalError):
            message = outcome.args[0] if outcome.args else "evaluation error"
            return CelResult(False, str(message))
        if isinstance(outcome, BOOL_TYPES):
            return CelResult(bool(outcome), None)
        return CelResult(
            False, f"CEL result of type {type_name(outcome)} could not be converted to bool")


_compiled: OrderedDict[str, CompiledSelector] = OrderedDict()
_lock = threading.Lock()


def _compile(expression: str) -> CompiledSelector:
    if not isinstance(expression, str):
        return CompiledSelector(str(expression), "compilation failed: expression is not a string")
    try:
        compiled = compile_expression(expression)
    except CompileError as ex:
        return CompiledSelector(expression, str(ex))
    except Exception as ex:  # never let a selector take the caller down
        return CompiledSelector(expression, f"compilation failed: {type(ex).__name__}: {ex}")
    return CompiledSelector(expression, None, compiled.reads, _program=compiled.program,
                            _key=_key_function(compiled.reads))


def compile_selector(expression: str) -> CompiledSelector:
    """Compile once per expression text (LRU-cached); errors land in `compile_error`."""
    with _lock:
        selector = _compiled.get(expression)
        if selector is not None:
            _compiled.move_to_end(expression)
            stats.compile_cache_hits += 1
            return selector
    selector = _compile(expression)
    with _lock:
        stats.compilations += 1
        _compiled[expression] = selector
        while len(_compiled) > COMPILE_CACHE_SIZE:
            _compiled.popitem(last=False)
    return selector


def evaluate_selector(expression: str, device: CelDevice, use_cache: bool = True) -> CelResult:
    return compile_selector(expression).evaluate(device, use_cache)


def clear_caches() -> None:
    """Forget compiled selectors, cached results and memoized attribute values."""
    with _lock:
        for selector in _compiled.values():
            selector.clear_cache()
        _compiled.clear()
    clear_value_memos()
