"""Field causes in the shape of metav1.StatusCause, built like upstream's field.Error."""

from __future__ import annotations

import json
from typing import Any, TypedDict


class Cause(TypedDict):
    reason: str
    message: str
    field: str


def _show(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    try:
        return json.dumps(value, separators=(",", ":"))
    except (TypeError, ValueError):
        return repr(value)


def required(field: str, detail: str = "") -> Cause:
    return {"reason": "FieldValueRequired", "field": field,
            "message": "Required value" + (f": {detail}" if detail else "")}


def invalid(field: str, value: Any, detail: str) -> Cause:
    return {"reason": "FieldValueInvalid", "field": field,
            "message": f"Invalid value: {_show(value)}: {detail}"}


def forbidden(field: str, detail: str) -> Cause:
    return {"reason": "FieldValueForbidden", "field": field, "message": f"Forbidden: {detail}"}


def not_supported(field: str, value: Any, supported: list[str]) -> Cause:
    options = ", ".join(json.dumps(s) for s in supported)
    return {"reason": "FieldValueNotSupported", "field": field,
            "message": f"Unsupported value: {_show(value)}: supported values: {options}"}


def too_many(field: str, actual: int, limit: int) -> Cause:
    return {"reason": "FieldValueTooMany", "field": field,
            "message": f"Too many: {actual}: must have at most {limit} {'item' if limit == 1 else 'items'}"}


def too_long(field: str, limit: int) -> Cause:
    return {"reason": "FieldValueTooLong", "field": field,
            "message": f"Too long: may not be more than {limit} bytes"}


def duplicate(field: str, value: Any) -> Cause:
    return {"reason": "FieldValueDuplicate", "field": field,
            "message": f"Duplicate value: {_show(value)}"}
