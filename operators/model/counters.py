"""Partitionable devices (KEP-4815): shared counter sets and what devices consume of them.

A driver that publishes one GPU as overlapping partitions (the whole GPU, two halves,
seven slices) declares the GPU's finite resources once, as a counter set in a slice
of its own (`spec.sharedCounters`), and each partition says how much of which set it
uses (`consumesCounters`). Upstream allocates a partition only while, for every
counter of the pool, what allocated and chosen partitions consume stays within the
counter's value; the sets are looked up by name within the device's pool (same driver,
pool name and generation), whichever slice of the pool declares them.

Values are `Quantity`s: compared exactly, as upstream compares them, and shown as the
driver spelled them.

Also here: which device fields draco models at all. A device that carries a field
outside that list (an alpha of a newer Kubernetes) is never allocated as if the field
were absent: `unsupported_fields` names it, the allocator leaves the device out and
says why (fail closed).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from operators.model import fields as f
from operators.model.errors import FieldError
from operators.model.quantity import Quantity, parse_quantity

# The Device fields of resource.k8s.io/v1 that draco reads and acts on.
DEVICE_FIELDS = frozenset({
    "name", "attributes", "capacity", "consumesCounters", "nodeName", "nodeSelector",
    "allNodes", "taints", "bindsToNode", "bindingConditions", "bindingFailureConditions",
    "allowMultipleAllocations",
})
COUNTER_CONSUMPTION_FIELDS = frozenset({"counterSet", "counters"})
CAPACITY_FIELDS = frozenset({"value", "requestPolicy"})


@dataclass(frozen=True, slots=True)
class CounterSet:
    """One `sharedCounters` entry: named counters with their total values."""

    name: str
    counters: Mapping[str, Quantity]
    slice_name: str = ""


@dataclass(frozen=True, slots=True)
class CounterConsumption:
    """One `consumesCounters` entry of a device: how much of which counters of a set."""

    counter_set: str
    counters: Mapping[str, Quantity]


def _counter_values(d: Mapping[str, Any], key: str) -> Mapping[str, Quantity]:
    """`counters: {name: {value: quantity}}` -> {name: Quantity}. No counters at all is an
    empty set (nothing to count), as upstream's allocator reads it; the API server
    requires at least one, so only files and programs send none."""
    raw = f.obj(d, key)
    out: dict[str, Quantity] = {}
    for name, counter in raw.items():
        try:
            if not isinstance(name, str) or not name:
                raise FieldError("counter names must be non-empty strings")
            if not isinstance(counter, Mapping):
                raise FieldError(f"expected an object, got {f.type_name(counter)}")
            value = counter.get("value")
            if value is None:
                raise FieldError("required field is missing", "value")
            if isinstance(value, bool) or not isinstance(value, str | int):
                raise FieldError(f"expected a quantity string, got {f.type_name(value)}", "value")
            try:
                out[name] = parse_quantity(str(value))
            except ValueError as e:
                raise FieldError(f"invalid quantity {value!r}: {e}", "value") from None
        except FieldError as e:
            raise e.at(str(name)).at(key) from None
    return MappingProxyType(out)


def parse_counter_set(d: object, slice_name: str = "") -> CounterSet:
    if not isinstance(d, Mapping):
        raise FieldError(f"expected an object, got {f.type_name(d)}")
    return CounterSet(f.string(d, "name", required=True), _counter_values(d, "counters"), slice_name)


def parse_consumption(d: object) -> CounterConsumption:
    if not isinstance(d, Mapping):
        raise FieldError(f"expected an object, got {f.type_name(d)}")
    return CounterConsumption(f.string(d, "counterSet", required=True), _counter_values(d, "counters"))


def unsupported_fields(d: Mapping[str, Any]) -> tuple[str, ...]:
    """Paths of the fields of device D that draco does not model, sorted ("" none)."""
    out = [k for k in d if k not in DEVICE_FIELDS and d[k] is not None]
    consumes = d.get("consumesCounters")
    if isinstance(consumes, list):
        for i, c in enumerate(consumes):
            if isinstance(c, Mapping):
                out += [f"consumesCounters[{i}].{k}" for k in c
                        if k not in COUNTER_CONSUMPTION_FIELDS and c[k] is not None]
    capacity = d.get("capacity")
    if isinstance(capacity, Mapping):
        for name, c in capacity.items():
            if isinstance(c, Mapping):
                out += [f"capacity[{name}].{k}" for k in c if k not in CAPACITY_FIELDS and c[k] is not None]
    return tuple(sorted(out))


__all__ = [
    "CAPACITY_FIELDS",
    "COUNTER_CONSUMPTION_FIELDS",
    "DEVICE_FIELDS",
    "CounterConsumption",
    "CounterSet",
    "parse_consumption",
    "parse_counter_set",
    "unsupported_fields",
]
