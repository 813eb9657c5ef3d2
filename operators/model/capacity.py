"""Consumable capacity (KEP-5075): request policies of shared devices, and capacity
requests of claims.

A device with `allowMultipleAllocations` may be in several claims at once; each
allocation consumes part of its capacities, and `requestPolicy` says which amounts a
request may take (a default, a range with a step, or a list of values). Requests ask
with `capacity.requests`. Values are `Quantity`s (exact, and printed as spelled: the
consumed amounts written into allocation results keep upstream's formats).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from operators.model import fields as f
from operators.model.errors import FieldError
from operators.model.quantity import Quantity, parse_quantity
from operators.model.values import qualify

POLICY_FIELDS = frozenset({"default", "validValues", "validRange"})
RANGE_FIELDS = frozenset({"min", "max", "step"})


@dataclass(frozen=True, slots=True)
class CapacityPolicy:
    """`capacity[name].requestPolicy`; `range_set` when `validRange` is given."""

    default: Quantity | None = None
    valid_values: tuple[Quantity, ...] = ()
    range_set: bool = False
    min: Quantity | None = None
    max: Quantity | None = None
    step: Quantity | None = None


def quantity(value: object) -> Quantity:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise FieldError(f"expected a quantity string, got {f.type_name(value)}")
    try:
        return parse_quantity(str(value))
    except ValueError as e:
        raise FieldError(f"invalid quantity {value!r}: {e}") from None


def _opt_quantity(d: Mapping[str, Any], key: str) -> Quantity | None:
    v = d.get(key)
    if v is None:
        return None
    try:
        return quantity(v)
    except FieldError as e:
        raise e.at(key) from None


def parse_policy(d: object) -> CapacityPolicy:
    if not isinstance(d, Mapping):
        raise FieldError(f"expected an object, got {f.type_name(d)}")
    rng = d.get("validRange")
    values = f.each(d, "validValues", quantity)
    if rng is None:
        return CapacityPolicy(_opt_quantity(d, "default"), values)
    if not isinstance(rng, Mapping):
        raise FieldError(f"expected an object, got {f.type_name(rng)}", "validRange")
    try:
        lo, hi, step = (_opt_quantity(rng, k) for k in ("min", "max", "step"))
    except FieldError as e:
        raise e.at("validRange") from None
    return CapacityPolicy(_opt_quantity(d, "default"), values, True, lo, hi, step)


def parse_policies(d: Mapping[str, Any], driver: str) -> Mapping[str, CapacityPolicy]:
    """The request policies of a device's capacities, by qualified name (only those set).
    A capacity published both short and qualified has the qualified entry's policy (or
    none), as its value is the qualified entry's (`devices._qualified_map`)."""
    raw = d.get("capacity")
    if not isinstance(raw, Mapping):
        return MappingProxyType({})
    out: dict[str, CapacityPolicy] = {}
    for name, c in raw.items():
        if "/" not in str(name) and qualify(str(name), driver) in raw:
            continue
        if isinstance(c, Mapping) and c.get("requestPolicy") is not None:
            try:
                out[qualify(str(name), driver)] = parse_policy(c["requestPolicy"])
            except FieldError as e:
                raise e.at("requestPolicy").at(str(name)).at("capacity") from None
    return MappingProxyType(out)


def parse_capacity_requests(d: Mapping[str, Any]) -> Mapping[str, Quantity]:
    """`capacity.requests` of a request or subrequest, by name as written."""
    raw = d.get("capacity")
    if raw is None:
        return MappingProxyType({})
    if not isinstance(raw, Mapping):
        raise FieldError(f"expected an object, got {f.type_name(raw)}", "capacity")
    requests = raw.get("requests") or {}
    if not isinstance(requests, Mapping):
        raise FieldError(f"expected an object, got {f.type_name(requests)}", "requests").at("capacity")
    out: dict[str, Quantity] = {}
    for name, v in requests.items():
        try:
            out[str(name)] = quantity(v)
        except FieldError as e:
            raise e.at(str(name)).at("requests").at("capacity") from None
    return MappingProxyType(out)


def parse_consumed(d: Mapping[str, Any]) -> Mapping[str, Quantity]:
    """`consumedCapacity` of an allocation result."""
    raw = d.get("consumedCapacity")
    if not raw:
        return MappingProxyType({})
    if not isinstance(raw, Mapping):
        raise FieldError(f"expected an object, got {f.type_name(raw)}", "consumedCapacity")
    out: dict[str, Quantity] = {}
    for name, v in raw.items():
        try:
            out[str(name)] = quantity(v)
        except FieldError as e:
            raise e.at(str(name)).at("consumedCapacity") from None
    return MappingProxyType(out)


__all__ = ["CapacityPolicy", "parse_capacity_requests", "parse_consumed", "parse_policies",
           "parse_policy", "quantity"]
