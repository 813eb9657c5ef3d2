"""Key resource.k8s.io/v1 validation: the limits and enums draco's objects must respect."""

from __future__ import annotations

from typing import Any

from operators.apiserver.validation import names
from operators.apiserver.validation.causes import (
    Cause,
    duplicate,
    forbidden,
    invalid,
    not_supported,
    required,
    too_long,
    too_many,
)

MAX_REQUESTS = 32
MAX_SUBREQUESTS = 8
MAX_SELECTORS = 32
MAX_TOLERATIONS = 16
MAX_CEL_LENGTH = 10 * 1024
MAX_DEVICES_PER_SLICE = 128
MAX_ATTRIBUTES_AND_CAPACITY = 32
EFFECTS = ["NoExecute", "NoSchedule", "None"]
OPERATORS = ["Equal", "Exists"]
ALLOCATION_MODES = ["All", "ExactCount"]


def selectors(items: Any, path: str) -> list[Cause]:
    items = items or []
    out: list[Cause] = []
    if len(items) > MAX_SELECTORS:
        out.append(too_many(path, len(items), MAX_SELECTORS))
    for i, s in enumerate(items):
        expr = ((s or {}).get("cel") or {}).get("expression")
        if not expr:
            out.append(required(f"{path}[{i}].cel.expression"))
        elif len(expr) > MAX_CEL_LENGTH:
            out.append(too_long(f"{path}[{i}].cel.expression", MAX_CEL_LENGTH))
    return out


def tolerations(items: Any, path: str) -> list[Cause]:
    items = items or []
    out: list[Cause] = []
    if len(items) > MAX_TOLERATIONS:
        out.append(too_many(path, len(items), MAX_TOLERATIONS))
    for i, t in enumerate(items):
        p = f"{path}[{i}]"
        op = t.get("operator") or "Equal"
        if t.get("key"):
            out += names.qualified_name(t["key"], f"{p}.key")
        if op not in OPERATORS:
            out.append(not_supported(f"{p}.operator", op, OPERATORS))
        elif op == "Exists" and t.get("value"):
            out.append(invalid(f"{p}.operator", op, "value must be empty when `operator` is 'Exists'"))
        elif op == "Equal" and not t.get("key"):
            out.append(invalid(f"{p}.operator", op, "must be 'Exists' when `key` is empty"))
        if t.get("effect") and t["effect"] not in EFFECTS:
            out.append(not_supported(f"{p}.effect", t["effect"], EFFECTS))
    return out


def _exact(spec: Any, path: str) -> list[Cause]:
    spec = spec or {}
    out = names.dns_subdomain(spec.get("deviceClassName"), f"{path}.deviceClassName") \
        if spec.get("deviceClassName") else [required(f"{path}.deviceClassName")]
    out += selectors(spec.get("selectors"), f"{path}.selectors")
    mode = spec.get("allocationMode") or "ExactCount"
    if mode not in ALLOCATION_MODES:
        out.append(not_supported(f"{path}.allocationMode", mode, ALLOCATION_MODES))
    elif mode == "ExactCount" and spec.get("count") is not None and spec["count"] <= 0:
        out.append(invalid(f"{path}.count", spec["count"], "must be greater than zero"))
    elif mode == "All" and spec.get("count"):
        out.append(invalid(f"{path}.count", spec["count"], "must not be specified when allocationMode is 'All'"))
    out += tolerations(spec.get("tolerations"), f"{path}.tolerations")
    return out


def claim_spec(spec: Any, path: str) -> list[Cause]:
    devices = (spec or {}).get("devices") or {}
    requests = devices.get("requests") or []
    out: list[Cause] = []
    if len(requests) > MAX_REQUESTS:
        out.append(too_many(f"{path}.devices.requests", len(requests), MAX_REQUESTS))
    seen: set[str] = set()
    for i, r in enumerate(requests):
        p = f"{path}.devices.requests[{i}]"
        out += names.dns_label(r.get("name"), f"{p}.name")
        if r.get("name") in seen:
            out.append(duplicate(f"{p}.name", r.get("name")))
        seen.add(r.get("name"))
        has_exact, has_first = r.get("exactly") is not None, r.get("firstAvailable") is not None
        if has_exact == has_first:
            out.append(invalid(p, None, "exactly one of `exactly` or `firstAvailable` is required"))
        if has_exact:
            out += _exact(r["exactly"], f"{p}.exactly")
        if has_first:
            subs = r["firstAvailable"] or []
            if not subs:
                out.append(required(f"{p}.firstAvailable"))
            if len(subs) > MAX_SUBREQUESTS:
                out.append(too_many(f"{p}.firstAvailable", len(subs), MAX_SUBREQUESTS))
            sub_seen: set[str] = set()
            for j, s in enumerate(subs):
                sp = f"{p}.firstAvailable[{j}]"
                out += names.dns_label(s.get("name"), f"{sp}.name")
                if s.get("name") in sub_seen:
                    out.append(duplicate(f"{sp}.name", s.get("name")))
                sub_seen.add(s.get("name"))
                out += _exact(s, sp)
    return out


def resource_claim(obj: dict[str, Any]) -> list[Cause]:
    return claim_spec(obj.get("spec"), "spec")


def resource_claim_update(old: dict[str, Any], new: dict[str, Any]) -> list[Cause]:
    out = resource_claim(new)
    if (old.get("spec") or {}) != (new.get("spec") or {}):
        out.append(invalid("spec", new.get("spec"), "field is immutable"))
    return out


def resource_claim_template(obj: dict[str, Any]) -> list[Cause]:
    return claim_spec(((obj.get("spec") or {}).get("spec")), "spec.spec")


def _attribute_value(v: Any, path: str) -> list[Cause]:
    kinds = [k for k in ("string", "int", "bool", "version") if isinstance(v, dict) and k in v]
    if len(kinds) != 1:
        return [invalid(path, v, "exactly one value must be specified")]
    return []


def resource_slice(obj: dict[str, Any]) -> list[Cause]:
    spec = obj.get("spec") or {}
    out: list[Cause] = []
    if not spec.get("driver"):
        out.append(required("spec.driver"))
    else:
        out += names.dns_subdomain(spec["driver"], "spec.driver")
    pool = spec.get("pool") or {}
    if not pool.get("name"):
        out.append(required("spec.pool.name"))
    if (pool.get("resourceSliceCount") or 0) <= 0:
        out.append(invalid("spec.pool.resourceSliceCount", pool.get("resourceSliceCount"),
                           "must be greater than zero"))
    if (pool.get("generation") or 0) < 0:
        out.append(invalid("spec.pool.generation", pool.get("generation"), "must be greater than or equal to 0"))
    placement = [k for k in ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection") if spec.get(k)]
    if len(placement) != 1:
        out.append(invalid("spec", None, "exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
                                         "`perDeviceNodeSelection` is required"))
    devices = spec.get("devices") or []
    if len(devices) > MAX_DEVICES_PER_SLICE:
        out.append(too_many("spec.devices", len(devices), MAX_DEVICES_PER_SLICE))
    seen: set[str] = set()
    for i, d in enumerate(devices):
        p = f"spec.devices[{i}]"
        out += names.dns_label(d.get("name"), f"{p}.name")
        if d.get("name") in seen:
            out.append(duplicate(f"{p}.name", d.get("name")))
        seen.add(d.get("name"))
        attrs, caps = d.get("attributes") or {}, d.get("capacity") or {}
        if len(attrs) + len(caps) > MAX_ATTRIBUTES_AND_CAPACITY:
            out.append(too_many(p, len(attrs) + len(caps), MAX_ATTRIBUTES_AND_CAPACITY))
        for name, v in attrs.items():
            out += _attribute_value(v, f"{p}.attributes[{name}]")
        for j, t in enumerate(d.get("taints") or []):
            tp = f"{p}.taints[{j}]"
            if not t.get("key"):
                out.append(required(f"{tp}.key"))
            else:
                out += names.qualified_name(t["key"], f"{tp}.key")
            if t.get("value"):
                out += names.label_value(t["value"], f"{tp}.value")
            if t.get("effect") not in EFFECTS:
                out.append(not_supported(f"{tp}.effect", t.get("effect"), EFFECTS) if t.get("effect")
                           else required(f"{tp}.effect"))
        per_device = d.get("nodeName") or d.get("nodeSelector") or d.get("allNodes")
        if per_device and not spec.get("perDeviceNodeSelection"):
            out.append(forbidden(p, "node selection per device requires `perDeviceNodeSelection`"))
    return out


def device_class(obj: dict[str, Any]) -> list[Cause]:
    return selectors((obj.get("spec") or {}).get("selectors"), "spec.selectors")
