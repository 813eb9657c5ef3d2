"""Typed field readers for plain API dicts.

Each reader raises `FieldError` naming the offending key; callers wrap nested reads
with `FieldError.at` so the full path appears only when something is wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, TypeVar

from operators.model.errors import FieldError

_EMPTY: Mapping[str, Any] = MappingProxyType({})
T = TypeVar("T")


def type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    return type(value).__name__


def obj(d: Mapping[str, Any], key: str, *, required: bool = False) -> Mapping[str, Any]:
    v = d.get(key)
    if v is None:
        if required:
            raise FieldError("required field is missing", key)
        return _EMPTY
    if not isinstance(v, Mapping):
        raise FieldError(f"expected an object, got {type_name(v)}", key)
    return v


def opt_obj(d: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    return None if d.get(key) is None else obj(d, key)


def lst(d: Mapping[str, Any], key: str, *, required: bool = False) -> list[Any] | tuple[Any, ...]:
    v = d.get(key)
    if v is None:
        if required:
            raise FieldError("required field is missing", key)
        return ()
    if not isinstance(v, list | tuple):
        raise FieldError(f"expected an array, got {type_name(v)}", key)
    return v


def each(d: Mapping[str, Any], key: str, parse: Callable[[Any], T], *,
         required: bool = False) -> tuple[T, ...]:
    """The array at `key`, every entry parsed; a bad entry's error names it (`key[i]…`)."""
    out = []
    for i, item in enumerate(lst(d, key, required=required)):
        try:
            out.append(parse(item))
        except FieldError as e:
            raise e.at(f"[{i}]").at(key) from None
    return tuple(out)


def as_object(value: object) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise FieldError(f"expected an object, got {type_name(value)}")
    return value


def objects(d: Mapping[str, Any], key: str, parse: Callable[[Mapping[str, Any]], T], *,
            required: bool = False) -> tuple[T, ...]:
    """As `each`, for an array of objects: an entry that is not one is an error at `key[i]`."""
    return each(d, key, lambda item: parse(as_object(item)), required=required)


def string(d: Mapping[str, Any], key: str, *, required: bool = False, default: str = "") -> str:
    v = d.get(key)
    if v is None or (required and v == ""):
        if required:
            raise FieldError("required field is missing", key)
        return default
    if not isinstance(v, str):
        raise FieldError(f"expected a string, got {type_name(v)}", key)
    return v


def opt_string(d: Mapping[str, Any], key: str) -> str | None:
    return None if d.get(key) is None else string(d, key)


def integer(d: Mapping[str, Any], key: str, *, required: bool = False, default: int = 0) -> int:
    v = d.get(key)
    if v is None:
        if required:
            raise FieldError("required field is missing", key)
        return default
    if isinstance(v, bool) or not isinstance(v, int):
        raise FieldError(f"expected an integer, got {type_name(v)}", key)
    return v


def opt_integer(d: Mapping[str, Any], key: str) -> int | None:
    return None if d.get(key) is None else integer(d, key)


def boolean(d: Mapping[str, Any], key: str, *, default: bool = False) -> bool:
    v = d.get(key)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise FieldError(f"expected a boolean, got {type_name(v)}", key)
    return v


def opt_bool(d: Mapping[str, Any], key: str) -> bool | None:
    return None if d.get(key) is None else boolean(d, key)


def enum(d: Mapping[str, Any], key: str, allowed: tuple[str, ...], *, default: str) -> str:
    v = d.get(key)
    if v is None or v == "":
        return default
    if not isinstance(v, str):
        raise FieldError(f"expected a string, got {type_name(v)}", key)
    if v not in allowed:
        raise FieldError(f"unknown value {v!r}; expected one of {', '.join(allowed)}", key)
    return v


def parse_time(value: object) -> datetime:
    """RFC 3339 string (or a datetime, as YAML loaders produce) -> aware UTC datetime."""
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, str):
        try:
            dt = datetime.fromisoformat(value)
        except ValueError:
            raise FieldError(f"not an RFC 3339 timestamp: {value!r}") from None
    else:
        raise FieldError(f"expected a timestamp string, got {type_name(value)}")
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt


def opt_time(d: Mapping[str, Any], key: str) -> datetime | None:
    v = d.get(key)
    if v is None:
        return None
    try:
        return parse_time(v)
    except FieldError as e:
        raise e.at(key) from None


def string_map(d: Mapping[str, Any], key: str) -> Mapping[str, str]:
    v = obj(d, key)
    if not v:
        return _EMPTY
    for k, item in v.items():
        if not isinstance(item, str):
            raise FieldError(f"expected a string, got {type_name(item)}", str(k), key)
    return MappingProxyType(dict(v))


def string_list(d: Mapping[str, Any], key: str) -> tuple[str, ...]:
    items = lst(d, key)
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise FieldError(f"expected a string, got {type_name(item)}", f"[{i}]", key)
    return tuple(items)


def freeze(value: Any) -> Any:
    """Deep read-only copy of free-form JSON (opaque parameters, affinity)."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """Inverse of `freeze`: plain dicts and lists, ready to serialise or send."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [thaw(v) for v in value]
    return value


EMPTY_MAP = _EMPTY
