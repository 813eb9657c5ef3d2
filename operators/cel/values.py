"""CEL runtime values that cel-python lacks: Quantity, Semver, optionals, device maps.

They wrap the exact model types so that the CEL layer and the tracker agree on what a
quantity or a version is.
"""

from __future__ import annotations

from typing import Any

import celpy.celtypes as ct
from celpy.evaluation import CELEvalError

from operators.model.quantity import Quantity
from operators.model.semver import Semver


class EvalError(Exception):
    """A CEL runtime error raised by draco's functions; becomes an error value."""


class CelQuantity:
    __slots__ = ("q",)

    def __init__(self, q: Quantity) -> None:
        self.q = q

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CelQuantity) and self.q == other.q

    def __hash__(self) -> int:
        return hash(self.q)

    def __repr__(self) -> str:
        return f"quantity({str(self.q)!r})"


class CelSemver:
    __slots__ = ("v",)

    def __init__(self, v: Semver) -> None:
        self.v = v

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CelSemver) and self.v == other.v

    def __hash__(self) -> int:
        return hash(self.v)

    def __repr__(self) -> str:
        return f"semver({str(self.v)!r})"


class CelOptional:
    """CEL `optional_type`: `present` False is `optional.none()`."""

    __slots__ = ("present", "value")

    def __init__(self, present: bool, value: Any = None) -> None:
        self.present = present
        self.value = value

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CelOptional) or self.present != other.present:
            return False
        return not self.present or bool(self.value == other.value)

    def __hash__(self) -> int:
        return hash((self.present, self.value if self.present else None))

    def __repr__(self) -> str:
        return f"optional.of({self.value!r})" if self.present else "optional.none()"


NONE = CelOptional(False)

# has() in transpiled code yields a Python bool; both count as CEL bool.
BOOL_TYPES = (ct.BoolType, bool)


class StrictMap(ct.MapType):
    """A map whose missing keys are errors, also through `.get` (which cel-python uses)."""

    def get(self, key: Any, default: Any = None) -> Any:
        return self[key]


class DomainMap(ct.MapType):
    """`device.attributes` / `device.capacity`: an unknown domain is an empty map."""

    def __missing__(self, key: Any) -> Any:
        return EMPTY_MAP


EMPTY_MAP = StrictMap({})


def type_name(value: Any) -> str:
    """The CEL type name, for error messages that read like upstream's."""
    if isinstance(value, CELEvalError):
        return "error"
    if isinstance(value, ct.BoolType | bool):
        return "bool"
    if isinstance(value, ct.UintType):
        return "uint"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "double"
    if isinstance(value, ct.BytesType | bytes):
        return "bytes"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "map"
    if value is None:
        return "null_type"
    if isinstance(value, CelQuantity):
        return "Quantity"
    if isinstance(value, CelSemver):
        return "Semver"
    if isinstance(value, CelOptional):
        return "optional_type"
    if isinstance(value, type):
        return "type"
    return type(value).__name__
