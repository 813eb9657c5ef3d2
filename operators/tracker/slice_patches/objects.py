"""The ResourceSlicePatch object as the overlay holds it, parsed and immutable."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any

from operators.model import Attribute, DeviceSelector, ObjectMeta

KIND = "ResourceSlicePatch"
MAX_ENTRIES = 32  # attributes and capacities combined, as for a device in a slice

_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class PatchFilter:
    """Unset (None) criteria do not restrict; an empty filter matches every device."""

    device_class_name: str | None = None
    driver: str | None = None
    pool: str | None = None
    device: str | None = None
    selectors: tuple[DeviceSelector, ...] = ()

    def to_api(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in (
            ("deviceClassName", self.device_class_name),
            ("driver", self.driver),
            ("pool", self.pool),
            ("device", self.device),
        ):
            if value is not None:
                out[key] = value
        if self.selectors:
            out["selectors"] = [s.to_api() for s in self.selectors]
        return out


@dataclass(frozen=True, slots=True)
class ResourceSlicePatch:
    """`attributes` values of None are removals (`null: {}` in the API)."""

    kind = KIND  # class attribute, not a field

    meta: ObjectMeta
    filter: PatchFilter = PatchFilter()
    priority: int = 0
    attributes: Mapping[str, Attribute | None] = field(default_factory=lambda: _EMPTY)
    capacity: Mapping[str, str] = field(default_factory=lambda: _EMPTY)

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def precedence(self) -> tuple[int, bool, datetime | None, str]:
        """Sort key: the first patch in this order wins a contested name."""
        created = self.meta.creation_timestamp
        return (-self.priority, created is None, created, self.meta.name)

    def effect(self) -> tuple[Any, ...]:
        """Everything but the filter that decides what the patch does to a device."""
        return (
            self.precedence,
            tuple(sorted(self.attributes.items())),
            tuple(sorted(self.capacity.items())),
        )


__all__ = ["KIND", "MAX_ENTRIES", "PatchFilter", "ResourceSlicePatch"]
