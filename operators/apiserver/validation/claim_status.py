"""ResourceClaim status updates as upstream validates them: what draco's allocator and
kube-scheduler write (allocation results, reservedFor) must pass the same checks."""

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
    too_many,
)
from operators.apiserver.validation.resource import MAX_CONFIG, MAX_REQUESTS, driver_name, pool_name

MAX_RESERVED_FOR = 256
CONFIG_SOURCES = ["FromClaim", "FromClass"]
REQUEST_REF = "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"


def _request_names(claim: dict[str, Any]) -> dict[str, set[str] | None]:
    known: dict[str, set[str] | None] = {}
    for r in (((claim.get("spec") or {}).get("devices") or {}).get("requests")) or []:
        subs = r.get("firstAvailable") or []
        known[r.get("name")] = {s.get("name") for s in subs} if subs else None
    return known


def _ref(ref: Any, path: str, known: dict[str, set[str] | None]) -> list[Cause]:
    segs = str(ref).split("/")
    if len(segs) > 2:
        return [invalid(path, ref, REQUEST_REF)]
    out: list[Cause] = []
    for seg in segs:
        out += names.dns_label(seg, path)
    subs = known.get(segs[0])
    if segs[0] not in known or (len(segs) == 2 and (subs is None or segs[1] not in subs)):
        out.append(invalid(path, ref, REQUEST_REF))
    return out


def _allocation(alloc: dict[str, Any], path: str, known: dict[str, set[str] | None]) -> list[Cause]:
    devices = alloc.get("devices") or {}
    out: list[Cause] = []
    results = devices.get("results") or []
    for i, r in enumerate(results):
        p = f"{path}.devices.results[{i}]"
        out += _ref(r.get("request"), f"{p}.request", known)
        out += driver_name(r.get("driver"), f"{p}.driver")
        out += pool_name(r.get("pool"), f"{p}.pool")
        out += names.dns_label(r.get("device"), f"{p}.device")
    if len(results) > MAX_REQUESTS:
        out.append(too_many(f"{path}.devices.results", len(results), MAX_REQUESTS))
    config = devices.get("config") or []
    for i, c in enumerate(config):
        p = f"{path}.devices.config[{i}]"
        source = c.get("source") or ""
        if not source:
            out.append(required(f"{p}.source"))
        elif source not in CONFIG_SOURCES:
            out.append(not_supported(f"{p}.source", source, CONFIG_SOURCES))
        for j, ref in enumerate(c.get("requests") or []):
            out += _ref(ref, f"{p}.requests[{j}]", known)
    if len(config) > 2 * MAX_CONFIG:
        out.append(too_many(f"{path}.devices.config", len(config), 2 * MAX_CONFIG))
    return out


def resource_claim_status(old: dict[str, Any], new: dict[str, Any]) -> list[Cause]:
    status, old_status = new.get("status") or {}, old.get("status") or {}
    out: list[Cause] = []
    reserved = status.get("reservedFor") or []
    seen: set[Any] = set()
    for i, ref in enumerate(reserved):
        p = f"status.reservedFor[{i}]"
        for key in ("resource", "name", "uid"):
            if not (ref or {}).get(key):
                out.append(required(f"{p}.{key}"))
        uid = (ref or {}).get("uid")
        if uid in seen:
            out.append(duplicate(f"{p}.uid", uid))
        seen.add(uid)
    if len(reserved) > MAX_RESERVED_FOR:
        out.append(too_many("status.reservedFor", len(reserved), MAX_RESERVED_FOR))
    alloc, old_alloc = status.get("allocation"), old_status.get("allocation")
    if reserved:
        if alloc is None:
            out.append(forbidden("status.reservedFor", "may not be specified when `allocated` is not set"))
        elif (new.get("metadata") or {}).get("deletionTimestamp"):
            before = [r for r in old_status.get("reservedFor") or []]
            if any(r not in before for r in reserved):
                out.append(forbidden("status.reservedFor", "new entries may not be added while "
                                                           "`deallocationRequested` or `deletionTimestamp` are set"))
    if alloc is not None and old_alloc is not None:
        if alloc != old_alloc:
            out.append(invalid("status.allocation", alloc, "field is immutable"))
    elif alloc is not None:
        out += _allocation(alloc, "status.allocation", _request_names(new))
    return out
