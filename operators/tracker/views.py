"""Read-only results the tracker hands out: composed device views, pool status, allocations."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from operators.model import (
    Attribute,
    Device,
    DeviceID,
    DeviceTaint,
    NamespacedName,
    NodePlacement,
    PoolID,
)
from operators.model.devices import NO_PLACEMENT, KeyedByDeviceID
from operators.model.quantity import Quantity
from operators.tracker.overlay import DeviceContribution

_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class DeviceView(KeyedByDeviceID):
    """A device as draco's controllers see it: published device + overlays.

    `device` is the device as its driver published it; None for an allocated device
    whose slice is gone (its view then carries only overlay taints).
    `patched_attributes` / `patched_capacity` map each overridden (or removed) name to
    the patch that decided it; `patched_by` lists those patches, sorted.
    """

    id: DeviceID
    device: Device | None
    attributes: Mapping[str, Attribute] = field(default_factory=lambda: _EMPTY)
    capacity: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    taints: tuple[DeviceTaint, ...] = ()
    patched_by: tuple[str, ...] = ()
    patched_attributes: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    patched_capacity: Mapping[str, str] = field(default_factory=lambda: _EMPTY)

    def __hash__(self) -> int:  # the maps are unhashable; equal views share an id
        return hash(self.id)

    @property
    def published(self) -> bool:
        return self.device is not None

    @property
    def placement(self) -> NodePlacement:
        return self.device.placement if self.device is not None else NO_PLACEMENT

    @property
    def node_name(self) -> str | None:
        return self.placement.node_name

    @property
    def allow_multiple_allocations(self) -> bool:
        return self.device.allow_multiple_allocations if self.device is not None else False

    @property
    def slice_name(self) -> str | None:
        return self.device.slice_name if self.device is not None else None


def compose(
    device_id: DeviceID, device: Device | None, contributions: Sequence[DeviceContribution]
) -> DeviceView:
    """Published device + contributions, applied in overlay registration order."""
    if device is None:
        taints: tuple[DeviceTaint, ...] = ()
        attributes: Mapping[str, Attribute] = _EMPTY
        capacity: Mapping[str, str] = _EMPTY
    else:
        taints, attributes, capacity = device.taints, device.attributes, device.capacity
    if not contributions:
        return DeviceView(device_id, device, attributes, capacity, taints)
    attrs: dict[str, Attribute] | None = None
    caps: dict[str, str] | None = None
    patched_attrs: dict[str, str] = {}
    patched_caps: dict[str, str] = {}
    extra: list[DeviceTaint] = []
    for c in contributions:
        if c.attributes:
            if attrs is None:
                attrs = dict(attributes)
            for name, ov in c.attributes.items():
                if ov.value is None:
                    attrs.pop(name, None)
                else:
                    attrs[name] = ov.value
                patched_attrs[name] = ov.patched_by
        if c.capacity:
            if caps is None:
                caps = dict(capacity)
            for cname, cov in c.capacity.items():
                if cov.value is None:
                    caps.pop(cname, None)
                else:
                    caps[cname] = cov.value
                patched_caps[cname] = cov.patched_by
        extra.extend(c.taints)
    return DeviceView(
        id=device_id,
        device=device,
        attributes=MappingProxyType(attrs) if attrs is not None else attributes,
        capacity=MappingProxyType(caps) if caps is not None else capacity,
        taints=taints + tuple(extra) if extra else taints,
        patched_by=tuple(sorted(set(patched_attrs.values()) | set(patched_caps.values()))),
        patched_attributes=MappingProxyType(patched_attrs) if patched_attrs else _EMPTY,
        patched_capacity=MappingProxyType(patched_caps) if patched_caps else _EMPTY,
    )


@dataclass(frozen=True, slots=True)
class PoolStatus:
    """A pool as upstream's allocator judges it.

    Only slices of the newest generation count. `complete` is False when the number
    of those slices differs from their `resourceSliceCount`; `valid` is False when a
    device name repeats. `reason` explains the first problem ("" when usable).
    """

    id: PoolID
    generation: int
    resource_slice_count: int
    slices: tuple[str, ...]
    outdated_slices: tuple[str, ...]
    device_count: int
    complete: bool
    valid: bool
    reason: str

    @property
    def usable(self) -> bool:
        return self.complete and self.valid


@dataclass(frozen=True, slots=True)
class Allocation:
    """One claim's use of one device (a claim may name a device in several results)."""

    claim: NamespacedName
    request: str
    admin_access: bool = False
    share_id: str | None = None  # KEP-5075: one share of a multi-allocatable device
    consumed: tuple[tuple[str, Quantity], ...] = ()  # the share's consumedCapacity
