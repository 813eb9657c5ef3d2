"""CRD validation rules (`x-kubernetes-validations`) evaluated with cel-python.

kube-apiserver checks each rule with `self` bound to the value at the rule's place in
the schema (and `oldSelf` to the stored value on updates; rules using `oldSelf` are
transition rules, skipped on create). A false result or an evaluation error becomes
a field cause at that path, with the rule's message.
"""

from __future__ import annotations

import sys
from functools import lru_cache
from typing import Any

import celpy

from operators.apiserver.validation.causes import Cause

_REASONS = {"FieldValueForbidden", "FieldValueRequired", "FieldValueDuplicate", "FieldValueInvalid"}
_MISSING = object()


@lru_cache(maxsize=1)
def _env() -> celpy.Environment:
    """cel-python's environment. Its constructor sets the interpreter's recursion limit
    to 2500, below the 3000 draco's CEL compiler sets for deep expressions: in a process
    that also allocates (`draco demo`, the embedded test cluster) the first CRD rule
    checked would lower, for the whole process, how deep a gang search may go before it
    answers "undecided". The limit is put back as it was (whoever set it: the
    rules checked here are shallow)."""
    limit = sys.getrecursionlimit()
    env = celpy.Environment()
    sys.setrecursionlimit(limit)
    return env


@lru_cache(maxsize=512)
def _program(rule: str) -> Any:
    env = _env()
    return env.program(env.compile(rule))


def _openapi_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def check(rules: list[dict[str, Any]], value: Any, old: Any, path: str) -> list[Cause]:
    out: list[Cause] = []
    for rule in rules:
        text = rule.get("rule") or ""
        activation = {"self": celpy.json_to_cel(value)}
        if "oldSelf" in text:
            if old is _MISSING or old is None:
                continue
            activation["oldSelf"] = celpy.json_to_cel(old)
        try:
            result = _program(text).evaluate(activation)
            if isinstance(result, celpy.CELEvalError):
                raise ValueError(str(result))
            ok = bool(result)
        except Exception as exc:  # noqa: BLE001 - an evaluation failure rejects, as upstream
            out.append({"reason": "FieldValueInvalid", "field": path,
                        "message": f'Invalid value: "{_openapi_type(value)}": rule evaluation error: {exc}'})
            continue
        if ok:
            continue
        message = rule.get("message") or f"failed rule: {text}"
        field = path + (rule.get("fieldPath") or "")
        reason = rule.get("reason") or "FieldValueInvalid"
        if reason not in _REASONS:
            reason = "FieldValueInvalid"
        prefix = {"FieldValueForbidden": "Forbidden", "FieldValueRequired": "Required value",
                  "FieldValueDuplicate": "Duplicate value"}.get(reason)
        text_out = f"{prefix}: {message}" if prefix else f'Invalid value: "{_openapi_type(value)}": {message}'
        out.append({"reason": reason, "field": field, "message": text_out})
    return out


MISSING = _MISSING


def syntax_error(expression: str) -> str | None:
    """Why a CEL expression does not parse, or None (types are not checked here)."""
    try:
        _env().compile(expression)
    except Exception as exc:  # noqa: BLE001 - any parser failure is the answer
        first = str(exc).strip().splitlines()
        return f"compilation failed: ERROR: <input>: Syntax error: {first[0] if first else 'empty expression'}"
    return None
