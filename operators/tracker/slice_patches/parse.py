"""Parsing a ResourceSlicePatch from its API dict, with errors naming the bad field.

Importing this module registers the parser, so `operators.model.parse_object` knows the
kind (the package's `__init__` imports it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from operators.model import Attribute, FieldError, parse_attribute, register_parser
from operators.model import fields as f
from operators.model.devices import parse_capacity_value
from operators.model.meta import parse_meta
from operators.model.selectors import parse_device_selectors
from operators.tracker.slice_patches.objects import (
    KIND,
    MAX_ENTRIES,
    PatchFilter,
    ResourceSlicePatch,
)

_DOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_EMPTY: Mapping[str, Any] = MappingProxyType({})


def _check_qualified(name: object, what: str) -> str:
    if not isinstance(name, str) or not name:
        raise FieldError(f"{what} names must be non-empty strings")
    domain, slash, short = name.rpartition("/")
    if not slash or not domain:
        raise FieldError(
            f"{what} name {name!r} must be fully qualified (domain/name), "
            "e.g. gpu.example.com/model"
        )
    if len(domain) > 63 or not _DOMAIN.match(domain):
        raise FieldError(f"domain {domain!r} must be a DNS subdomain of at most 63 characters")
    if len(short) > 32 or not _IDENTIFIER.match(short):
        raise FieldError(f"name {short!r} must be a C identifier of at most 32 characters")
    return name


def _null_key(value: object) -> object:
    """YAML readers turn an unquoted `null:` key into None; the API spells it "null"."""
    if isinstance(value, Mapping) and None in value:
        return {("null" if k is None else k): v for k, v in value.items()}
    return value


def _nullable_attribute(value: object) -> Attribute | None:
    value = _null_key(value)
    if isinstance(value, Mapping) and value.get("null") is not None:
        others = sorted(k for k, v in value.items() if k != "null" and v is not None)
        if others:
            raise FieldError(f"exactly one of string, int, bool, version, null may be set, got "
                             f"{['null', *others]}")
        if not isinstance(value["null"], Mapping) or value["null"]:
            raise FieldError("must be an empty object", "null")
        return None
    return parse_attribute(value)


def _optional_name(d: Mapping[str, Any], key: str) -> str | None:
    value = f.opt_string(d, key)
    return value or None  # "" is how some clients spell "unset"


def parse_patch_filter(d: Mapping[str, Any] | None) -> PatchFilter:
    if not d:
        return PatchFilter()
    return PatchFilter(
        device_class_name=_optional_name(d, "deviceClassName"),
        driver=_optional_name(d, "driver"),
        pool=_optional_name(d, "pool"),
        device=_optional_name(d, "device"),
        selectors=parse_device_selectors(d),
    )


def _parse_devices(devices: Mapping[str, Any]) -> tuple[PatchFilter, int, dict[str, Attribute | None], dict[str, str]]:
    raw_filter = f.opt_obj(devices, "filter")  # names "filter" itself if not an object
    try:
        flt = parse_patch_filter(raw_filter)
    except FieldError as e:
        raise e.at("filter") from None
    priority = f.opt_integer(devices, "priority")
    attributes: dict[str, Attribute | None] = {}
    for name, value in f.obj(devices, "attributes").items():
        try:
            attributes[_check_qualified(name, "attribute")] = _nullable_attribute(value)
        except FieldError as e:
            raise e.at(str(name)).at("attributes") from None
    capacity: dict[str, str] = {}
    for name, value in f.obj(devices, "capacity").items():
        try:
            _check_qualified(name, "capacity")
            value = _null_key(value)
            if isinstance(value, Mapping) and value.get("null") is not None:
                raise FieldError("capacity cannot be removed; set it to 0 instead")
            capacity[name] = parse_capacity_value(value)
        except FieldError as e:
            raise e.at(str(name)).at("capacity") from None
    if len(attributes) + len(capacity) > MAX_ENTRIES:
        raise FieldError(
            f"at most {MAX_ENTRIES} attributes and capacities combined, got "
            f"{len(attributes) + len(capacity)}",
            "attributes",
        )
    return flt, priority or 0, attributes, capacity


def parse_resource_slice_patch(d: Mapping[str, Any]) -> ResourceSlicePatch:
    """Raises FieldError naming the bad field (`parse_object` turns it into ModelError)."""
    meta = parse_meta(d, namespaced=False)
    spec = f.obj(d, "spec", required=True)
    try:
        devices = f.obj(spec, "devices", required=True)
        try:
            flt, priority, attributes, capacity = _parse_devices(devices)
        except FieldError as e:
            raise e.at("devices") from None
    except FieldError as e:
        raise e.at("spec") from None
    return ResourceSlicePatch(
        meta=meta,
        filter=flt,
        priority=priority,
        attributes=MappingProxyType(attributes) if attributes else _EMPTY,
        capacity=MappingProxyType(capacity) if capacity else _EMPTY,
    )


register_parser(KIND, parse_resource_slice_patch)

__all__ = ["parse_patch_filter", "parse_resource_slice_patch"]
