"""The device binding: how a device becomes the `device` variable a selector reads.

`device.attributes["domain"].name` and `device.capacity["domain"].name` are grouped by
domain from the qualified names; attribute values become CEL strings, bools, ints or
semvers, capacities quantities. Conversions are memoized by value, because devices of
one model share them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

import celpy.celtypes as ct
from celpy.evaluation import CELEvalError

from operators.cel.values import CelQuantity, CelSemver, DomainMap, StrictMap
from operators.model.quantity import Quantity
from operators.model.semver import Semver
from operators.model.values import Attribute, split_qualified

_VALUE_MEMO_SIZE = 65_536


class CelDevice(Protocol):
    """What a selector sees of a device. Maps are keyed by qualified name `domain/name`."""

    @property
    def driver(self) -> str: ...

    @property
    def attributes(self) -> Mapping[str, Attribute]: ...

    @property
    def capacity(self) -> Mapping[str, str]: ...

    @property
    def allow_multiple_allocations(self) -> bool:
        """Read with getattr(..., False): objects without it count as False at run time."""
        ...


_attr_memo: dict[Attribute, Any] = {}
_capacity_memo: dict[str, Any] = {}


def _attribute_value(attr: Attribute, name: str) -> Any:
    cached = _attr_memo.get(attr)
    if cached is not None:
        return cached
    value: Any
    if attr.kind == "string":
        value = ct.StringType(str(attr.value))
    elif attr.kind == "bool":
        value = ct.BoolType(bool(attr.value))
    elif attr.kind == "int":
        value = ct.IntType(int(attr.value))
    else:
        try:
            value = CelSemver(Semver.parse(str(attr.value)))
        except ValueError as ex:
            # Not memoized: the message names the attribute.
            return CELEvalError(f"attribute {name}: parse semantic version: {ex}")
    if len(_attr_memo) >= _VALUE_MEMO_SIZE:
        _attr_memo.clear()
    _attr_memo[attr] = value
    return value


def _capacity_value(text: str, name: str) -> Any:
    cached = _capacity_memo.get(text)
    if cached is not None:
        return cached
    try:
        value = CelQuantity(Quantity.parse(text))
    except ValueError as ex:
        return CELEvalError(f"capacity {name}: {ex}")
    if len(_capacity_memo) >= _VALUE_MEMO_SIZE:
        _capacity_memo.clear()
    _capacity_memo[text] = value
    return value


def _grouped(items: Mapping[str, Any], convert: Callable[[Any, str], Any]) -> DomainMap:
    domains: dict[str, dict[Any, Any]] = {}
    for qualified, raw in items.items():
        domain, name = split_qualified(qualified)
        domains.setdefault(domain, {})[ct.StringType(name)] = convert(raw, qualified)
    return DomainMap({ct.StringType(d): StrictMap(values) for d, values in domains.items()})


def device_value(device: CelDevice) -> StrictMap:
    """The `device` variable: driver, attributes, capacity, allowMultipleAllocations."""
    return StrictMap({
        ct.StringType("driver"): ct.StringType(device.driver),
        ct.StringType("attributes"): _grouped(device.attributes, _attribute_value),
        ct.StringType("capacity"): _grouped(device.capacity, _capacity_value),
        ct.StringType("allowMultipleAllocations"): ct.BoolType(
            bool(getattr(device, "allow_multiple_allocations", False))),
    })


def clear_value_memos() -> None:
    _attr_memo.clear()
    _capacity_memo.clear()


__all__ = ["CelDevice", "clear_value_memos", "device_value"]
