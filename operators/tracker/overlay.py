"""The plug-in interface through which DeviceTaintRules and ResourceSlicePatches shape
the device view without the tracker knowing either kind.

Contract (all calls happen inside `Tracker.apply`, single-threaded):

* `kinds`: object kinds the overlay consumes. `Tracker.apply` routes events of those
  kinds to `apply`. A kind the tracker itself tracks (e.g. `DeviceClass`) is first
  stored by the tracker, then routed as the parsed object; other kinds arrive exactly
  as given to `Tracker.apply` (plain dict or an already parsed object) and the overlay
  parses them itself, raising `ModelError` for bad input.
* `apply` and `devices_changed` return the device IDs whose contribution may have
  changed; the tracker recomposes those views and reports the ones that really differ.
* `devices_changed` is told which devices entered (`added`), changed (`modified`) or
  left (`removed`) the device universe: published devices plus allocated devices whose
  slice is gone (those have no published device; their view keeps overlay taints).
* `contribution(id)` must describe the device *as published* plus the overlay's own
  state: overlays never see each other's output, so patch filters match published
  attributes, never patched ones.
* An overlay whose state changes on its own (a timer, a recompiled expression) calls
  `tracker.refresh(ids)`.

Overlays see the tracker only through `TrackerHandle`, the read side it promises them,
so this module sits below the `Tracker` class and overlays never import it: the
dependencies in this package point one way (change, overlay < views < pools < tracker).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any, Literal, Protocol, runtime_checkable

from operators.model import Attribute, Device, DeviceClass, DeviceID, DeviceTaint, PoolID
from operators.tracker.change import Change

EventType = Literal["ADDED", "MODIFIED", "DELETED"]

_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class AttributeOverride:
    """`value` None removes the published attribute; `patched_by` names the decider."""

    value: Attribute | None
    patched_by: str


@dataclass(frozen=True, slots=True)
class CapacityOverride:
    value: str | None
    patched_by: str


@dataclass(frozen=True, slots=True)
class DeviceContribution:
    """One overlay's effect on one device. Taints must carry their `source`."""

    attributes: Mapping[str, AttributeOverride] = field(default_factory=lambda: _EMPTY)
    capacity: Mapping[str, CapacityOverride] = field(default_factory=lambda: _EMPTY)
    taints: tuple[DeviceTaint, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.attributes or self.capacity or self.taints)


class TrackerHandle(Protocol):
    """What an overlay may ask of the tracker it is bound to: the published devices (never
    other overlays' output), the device universe, classes, and a way to recompose."""

    def now(self) -> datetime: ...

    def refresh(self, ids: Iterable[DeviceID]) -> Change: ...

    def device_ids(self) -> Iterable[DeviceID]: ...

    def published_device(self, device_id: DeviceID) -> Device | None: ...

    def published_devices(self) -> Iterable[Device]: ...

    def driver_pools(self, driver: str) -> list[PoolID]: ...

    def pool_device_ids(self, pool_id: PoolID) -> list[DeviceID]: ...

    def device_class(self, name: str) -> DeviceClass | None: ...


@runtime_checkable
class Overlay(Protocol):
    name: str
    kinds: frozenset[str]

    def bind(self, tracker: TrackerHandle) -> None: ...

    def apply(self, event_type: EventType, obj: Any) -> Iterable[DeviceID]: ...

    def devices_changed(
        self,
        added: frozenset[DeviceID],
        modified: frozenset[DeviceID],
        removed: frozenset[DeviceID],
    ) -> Iterable[DeviceID]: ...

    def contribution(self, device: DeviceID) -> DeviceContribution | None: ...


class OverlayBase:
    """Convenience base: keeps the tracker reference, ignores device changes."""

    name: str = "overlay"
    kinds: frozenset[str] = frozenset()

    def __init__(self) -> None:
        self.tracker: TrackerHandle | None = None

    def bind(self, tracker: TrackerHandle) -> None:
        self.tracker = tracker

    def apply(self, event_type: EventType, obj: Any) -> Iterable[DeviceID]:
        return ()

    def devices_changed(
        self,
        added: frozenset[DeviceID],
        modified: frozenset[DeviceID],
        removed: frozenset[DeviceID],
    ) -> Iterable[DeviceID]:
        return ()

    def contribution(self, device: DeviceID) -> DeviceContribution | None:
        return None
