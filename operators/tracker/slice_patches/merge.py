"""The pure merge: per attribute/capacity name, which matching patch wins.

Conflicts are settled per name: highest priority (unset = 0), then older
creationTimestamp (a missing one counts as newest), then lower name. An attribute set
to `null` removes the published attribute; capacity can only be set. A removal of an
attribute the driver does not publish changes nothing and is left out of the verdict,
so it does not put the patch into `patched_by`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from operators.model import Attribute
from operators.tracker.overlay import AttributeOverride, CapacityOverride, DeviceContribution
from operators.tracker.slice_patches.objects import ResourceSlicePatch

_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class PatchedDevice:
    """The patches' verdict for one device, before it is merged into the view.

    `attributes` / `capacity`: winning value per qualified name (None = removed);
    `attribute_patches` / `capacity_patches`: the patch that decided each name;
    `patched_by`: those patches, sorted; `matching`: every patch whose filter matches
    the device, winners first (a patch can match and still decide nothing).
    """

    attributes: Mapping[str, Attribute | None]
    capacity: Mapping[str, str]
    attribute_patches: Mapping[str, str]
    capacity_patches: Mapping[str, str]
    patched_by: tuple[str, ...]
    matching: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Resolved:
    """Winners for one set of patches. `contribution` is None when a winner is a removal
    (whether it changes anything depends on the device's published attributes)."""

    order: tuple[str, ...]
    attributes: Mapping[str, Attribute | None]
    attribute_patches: Mapping[str, str]
    capacity: Mapping[str, str]
    capacity_patches: Mapping[str, str]
    contribution: DeviceContribution | None


def resolve(patches: Iterable[ResourceSlicePatch]) -> Resolved:
    """Per-name winners among the patches that match one device. The result depends only
    on the set of patches, so devices that share the set can share it."""
    ordered = sorted(patches, key=lambda p: p.precedence)
    attrs: dict[str, Attribute | None] = {}
    attr_by: dict[str, str] = {}
    caps: dict[str, str] = {}
    cap_by: dict[str, str] = {}
    for p in ordered:
        name = p.meta.name
        for q, value in p.attributes.items():
            if q not in attr_by:
                attr_by[q] = name
                attrs[q] = value
        for q, cap in p.capacity.items():
            if q not in cap_by:
                cap_by[q] = name
                caps[q] = cap
    contribution = None
    if all(v is not None for v in attrs.values()):
        contribution = DeviceContribution(
            attributes=MappingProxyType(
                {q: AttributeOverride(v, attr_by[q]) for q, v in attrs.items()}
            ) if attrs else _EMPTY,
            capacity=MappingProxyType(
                {q: CapacityOverride(v, cap_by[q]) for q, v in caps.items()}
            ) if caps else _EMPTY,
        )
    return Resolved(tuple(p.meta.name for p in ordered), MappingProxyType(attrs),
                    MappingProxyType(attr_by), MappingProxyType(caps), MappingProxyType(cap_by),
                    contribution)


def verdict(r: Resolved, published: Mapping[str, Attribute]) -> PatchedDevice:
    """The verdict for one device; `published` (its attributes as the driver published
    them) matters only when some winner is a removal."""
    attrs, attr_by = r.attributes, r.attribute_patches
    if r.contribution is None:  # some winner is a removal: keep only real ones
        gone = [q for q, v in attrs.items() if v is None and q not in published]
        if gone:
            attrs = MappingProxyType({q: v for q, v in attrs.items() if q not in gone})
            attr_by = MappingProxyType({q: n for q, n in attr_by.items() if q not in gone})
    return PatchedDevice(
        attributes=attrs,
        capacity=r.capacity,
        attribute_patches=attr_by,
        capacity_patches=r.capacity_patches,
        patched_by=tuple(sorted(set(attr_by.values()) | set(r.capacity_patches.values()))),
        matching=r.order,
    )


def contribution_of(v: PatchedDevice) -> DeviceContribution | None:
    """The verdict in the form the tracker composes into the device view."""
    attrs = {q: AttributeOverride(a, v.attribute_patches[q]) for q, a in v.attributes.items()}
    caps = {q: CapacityOverride(c, v.capacity_patches[q]) for q, c in v.capacity.items()}
    if not attrs and not caps:
        return None
    return DeviceContribution(
        attributes=MappingProxyType(attrs) if attrs else _EMPTY,
        capacity=MappingProxyType(caps) if caps else _EMPTY,
    )


__all__ = ["PatchedDevice", "Resolved", "contribution_of", "resolve", "verdict"]
