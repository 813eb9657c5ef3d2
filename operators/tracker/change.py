"""What one `apply` (or one batch of them) changed, as told to subscribers."""

from __future__ import annotations

from dataclasses import dataclass, field

from operators.model import DeviceID, ModelError, NamespacedName, ObjectRef, PoolID


@dataclass(frozen=True, slots=True)
class Change:
    """Keys of everything whose tracked state differs after the update.

    `devices`: device views added, modified or removed (published content, overlay
    contributions, or an allocated device whose slice disappeared).
    `allocations`: devices whose set of allocations (claims) changed.
    `objects`: overlay-owned objects (e.g. `DeviceTaintRule x`) that were applied.
    `errors`: objects that could not be parsed; their previous state was dropped.
    """

    devices: frozenset[DeviceID] = frozenset()
    allocations: frozenset[DeviceID] = frozenset()
    pools: frozenset[PoolID] = frozenset()
    slices: frozenset[str] = frozenset()
    device_classes: frozenset[str] = frozenset()
    claims: frozenset[NamespacedName] = frozenset()
    pods: frozenset[NamespacedName] = frozenset()
    objects: frozenset[ObjectRef] = frozenset()
    errors: tuple[ModelError, ...] = ()

    @property
    def empty(self) -> bool:
        return not (
            self.devices
            or self.allocations
            or self.pools
            or self.slices
            or self.device_classes
            or self.claims
            or self.pods
            or self.objects
            or self.errors
        )


@dataclass(slots=True)
class ChangeBuilder:
    devices: set[DeviceID] = field(default_factory=set)
    allocations: set[DeviceID] = field(default_factory=set)
    pools: set[PoolID] = field(default_factory=set)
    slices: set[str] = field(default_factory=set)
    device_classes: set[str] = field(default_factory=set)
    claims: set[NamespacedName] = field(default_factory=set)
    pods: set[NamespacedName] = field(default_factory=set)
    objects: set[ObjectRef] = field(default_factory=set)
    errors: list[ModelError] = field(default_factory=list)

    def merge(self, c: Change) -> None:
        self.devices |= c.devices
        self.allocations |= c.allocations
        self.pools |= c.pools
        self.slices |= c.slices
        self.device_classes |= c.device_classes
        self.claims |= c.claims
        self.pods |= c.pods
        self.objects |= c.objects
        self.errors.extend(c.errors)

    def build(self) -> Change:
        return Change(
            devices=frozenset(self.devices),
            allocations=frozenset(self.allocations),
            pools=frozenset(self.pools),
            slices=frozenset(self.slices),
            device_classes=frozenset(self.device_classes),
            claims=frozenset(self.claims),
            pods=frozenset(self.pods),
            objects=frozenset(self.objects),
            errors=tuple(self.errors),
        )
