"""Devices described as data, for the CEL tests."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from operators.model.values import Attribute


@dataclass(frozen=True)
class FakeDevice:
    driver: str = ""
    attributes: Mapping[str, Attribute] = field(default_factory=dict)
    capacity: Mapping[str, str] = field(default_factory=dict)
    allow_multiple_allocations: bool = False


def device_from_data(data: Mapping[str, Any]) -> FakeDevice:
    attributes: dict[str, Attribute] = {}
    for name, value in (data.get("attributes") or {}).items():
        ((kind, raw),) = value.items()
        attributes[name] = Attribute(kind, raw)
    return FakeDevice(
        driver=data.get("driver", ""),
        attributes=attributes,
        capacity={k: str(v) for k, v in (data.get("capacity") or {}).items()},
        allow_multiple_allocations=bool(data.get("allow_multiple_allocations", False)),
    )
