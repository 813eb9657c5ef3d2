"""resource.k8s.io/v1 validation: the limits, enums and name rules of upstream's
`pkg/apis/resource/validation` for the GA fields (alpha-gated fields are not checked:
a 1.34 server with its alpha gates off drops them instead).

CEL expressions are only length-checked here; upstream also compiles them.
"""

from __future__ import annotations

import re
from typing import Any

from operators.apiserver import celrules
from operators.apiserver.validation import names
from operators.apiserver.validation.causes import (
    Cause,
    duplicate,
    invalid,
    not_supported,
    required,
    too_long,
    too_many,
)

MAX_REQUESTS = 32
MAX_SUBREQUESTS = 8
MAX_SELECTORS = 32
MAX_CONSTRAINTS = 32
MAX_CONFIG = 32
MAX_TOLERATIONS = 16
MAX_CEL_LENGTH = 10 * 1024
MAX_DEVICES_PER_SLICE = 128
MAX_ATTRIBUTES_AND_CAPACITY = 32
MAX_TAINTS_PER_DEVICE = 4
MAX_ATTRIBUTE_VALUE = 64
MAX_ID_LENGTH = 32
MAX_DRIVER_LENGTH = 63
MAX_POOL_NAME = 253
EFFECTS = ["NoExecute", "NoSchedule", "None"]
OPERATORS = ["Equal", "Exists"]
ALLOCATION_MODES = ["All", "ExactCount"]
PLACEMENT = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"
REQUEST_REF = "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"

_NUM = r"(0|[1-9]\d*)"
_PRE = r"(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)"
_BUILD = r"[0-9a-zA-Z-]+"
SEMVER = re.compile(rf"^{_NUM}\.{_NUM}\.{_NUM}(-{_PRE}(\.{_PRE})*)?(\+{_BUILD}(\.{_BUILD})*)?$")


def default_claim_spec(spec: Any) -> None:
    """v1 defaulting: allocationMode ExactCount, count 1, toleration operator Equal."""
    devices = (spec or {}).get("devices") if isinstance(spec, dict) else None
    for r in (devices or {}).get("requests") or []:
        if not isinstance(r, dict):
            continue
        for ex in [r.get("exactly"), *(r.get("firstAvailable") or [])]:
            if not isinstance(ex, dict):
                continue
            ex.setdefault("allocationMode", "ExactCount")
            if ex["allocationMode"] == "ExactCount" and not ex.get("count"):
                ex["count"] = 1
            for t in ex.get("tolerations") or []:
                if isinstance(t, dict) and not t.get("operator"):
                    t["operator"] = "Equal"


def driver_name(value: Any, path: str) -> list[Cause]:
    """As a CSI driver name: DNS subdomain after lower-casing, at most 63 bytes."""
    value = value or ""
    out: list[Cause] = [required(path)] if not value else []
    if len(value) > MAX_DRIVER_LENGTH:
        out.append(too_long(path, MAX_DRIVER_LENGTH))
    if names.dns_subdomain(str(value).lower(), path):
        out.append(invalid(path, value, names.DNS_SUBDOMAIN_MSG))
    return out


def pool_name(value: Any, path: str) -> list[Cause]:
    if not value:
        return [required(path)]
    out = [too_long(path, MAX_POOL_NAME)] if len(value) > MAX_POOL_NAME else []
    for part in str(value).split("/"):
        out += names.dns_subdomain(part, path)
    return out


def c_identifier(value: str, path: str) -> list[Cause]:
    out = [too_long(path, MAX_ID_LENGTH)] if len(value) > MAX_ID_LENGTH else []
    if not names.C_IDENTIFIER.match(value):
        out.append(invalid(path, value, names.C_IDENTIFIER_MSG))
    return out


def qualified_name(value: str, path: str) -> list[Cause]:
    """Attribute and capacity names: `identifier` or `domain/identifier`."""
    if not value:
        return [required(path, "name required")]
    parts = value.split("/")
    if len(parts) == 1:
        return c_identifier(parts[0], path)
    out: list[Cause] = []
    if len(parts) == 2:
        out += driver_name(parts[0], path) if parts[0] else [required(path, "the domain must not be empty")]
        out += c_identifier(parts[1], path) if parts[1] else [required(path, "the name must not be empty")]
    return out


def _key_path(path: str, key: str) -> str:
    if len(key) > 96:  # upstream shortens long keys in the middle
        key = key[:47] + "..." + key[-46:]
    return f"{path}[{key}]"


def selectors(items: Any, path: str) -> list[Cause]:
    items = items or []
    out: list[Cause] = []
    for i, s in enumerate(items):
        cel = (s or {}).get("cel")
        if cel is None:
            out.append(required(f"{path}[{i}].cel"))
        elif len(cel.get("expression") or "") > MAX_CEL_LENGTH:
            out.append(too_long(f"{path}[{i}].cel.expression", MAX_CEL_LENGTH))
        elif (err := celrules.syntax_error(cel.get("expression") or "")) is not None:
            out.append(invalid(f"{path}[{i}].cel.expression", cel.get("expression") or "", err))
    if len(items) > MAX_SELECTORS:
        out.append(too_many(path, len(items), MAX_SELECTORS))
    return out


def tolerations(items: Any, path: str) -> list[Cause]:
    items = items or []
    out: list[Cause] = []
    for i, t in enumerate(items):
        p = f"{path}[{i}]"
        op = t.get("operator") or "Equal"
        if t.get("key"):
            out += names.qualified_name(t["key"], f"{p}.key")
        if op == "Exists":
            if t.get("value"):
                out.append(invalid(f"{p}.value", t["value"], "must be empty for operator `Exists`"))
        elif op == "Equal":
            out += names.label_value(t.get("value") or "", f"{p}.value")
        else:
            out.append(not_supported(f"{p}.operator", op, OPERATORS))
        if t.get("effect") and t["effect"] not in EFFECTS:
            out.append(not_supported(f"{p}.effect", t["effect"], EFFECTS))
    if len(items) > MAX_TOLERATIONS:
        out.append(too_many(path, len(items), MAX_TOLERATIONS))
    return out


def _exact(spec: Any, path: str) -> list[Cause]:
    spec = spec or {}
    out = names.dns_subdomain(spec.get("deviceClassName"), f"{path}.deviceClassName") \
        if spec.get("deviceClassName") else [required(f"{path}.deviceClassName")]
    out += selectors(spec.get("selectors"), f"{path}.selectors")
    mode = spec.get("allocationMode") or "ExactCount"
    count = spec.get("count") or 0
    if mode == "All":
        if count:
            out.append(invalid(f"{path}.count", count, "must not be specified when allocationMode is 'All'"))
    elif mode == "ExactCount":
        if count <= 0:
            out.append(invalid(f"{path}.count", count, "must be greater than zero"))
    else:
        out.append(not_supported(f"{path}.allocationMode", mode, ALLOCATION_MODES))
    out += tolerations(spec.get("tolerations"), f"{path}.tolerations")
    return out


def _named_set(items: list[Any], limit: int, path: str, key: str = "name") -> list[Cause]:
    out: list[Cause] = []
    seen: set[Any] = set()
    for i, item in enumerate(items):
        value = item.get(key) if isinstance(item, dict) else item
        if value in seen:  # 1.34 names the key field (1.37 the entry: a path convention)
            out.append(duplicate(f"{path}[{i}].{key}" if isinstance(item, dict) else f"{path}[{i}]", value))
        seen.add(value)
    if limit >= 0 and len(items) > limit:
        out.append(too_many(path, len(items), limit))
    return out


def _request_refs(refs: list[Any], path: str, known: dict[str, set[str] | None]) -> list[Cause]:
    out: list[Cause] = []
    for j, ref in enumerate(refs):
        rp = f"{path}[{j}]"
        segs = str(ref).split("/")
        if len(segs) > 2:
            out.append(invalid(rp, ref, REQUEST_REF))
            continue
        for seg in segs:
            out += names.dns_label(seg, rp)
        subs = known.get(segs[0], set())
        ok = segs[0] in known and (len(segs) == 1 or (subs is not None and segs[1] in subs))
        if not ok:
            out.append(invalid(rp, ref, REQUEST_REF))
    return out + _named_set(refs, MAX_REQUESTS, path)


def claim_spec(spec: Any, path: str) -> list[Cause]:
    devices = (spec or {}).get("devices") or {}
    requests = devices.get("requests") or []
    out: list[Cause] = []
    known: dict[str, set[str] | None] = {}
    for i, r in enumerate(requests):
        p = f"{path}.devices.requests[{i}]"
        out += names.dns_label(r.get("name"), f"{p}.name")
        subs = r.get("firstAvailable") or []
        known[r.get("name")] = {s.get("name") for s in subs} if subs else None
        if subs:
            for j, s in enumerate(subs):
                sp = f"{p}.firstAvailable[{j}]"
                out += names.dns_label(s.get("name"), f"{sp}.name")
                out += _exact(s, sp)
            out += _named_set(subs, MAX_SUBREQUESTS, f"{p}.firstAvailable")
        if r.get("exactly") is not None:
            out += _exact(r["exactly"], f"{p}.exactly")
        n = bool(subs) + (r.get("exactly") is not None)
        if n == 0:
            out.append(required(p, "exactly one of `exactly` or `firstAvailable` is required"))
        elif n == 2:
            out.append(invalid(p, None, "exactly one of `exactly` or `firstAvailable` is required, "
                                        "but multiple fields are set"))
    out += _named_set(requests, MAX_REQUESTS, f"{path}.devices.requests")
    constraints = devices.get("constraints") or []
    for i, c in enumerate(constraints):
        cp = f"{path}.devices.constraints[{i}]"
        out += _request_refs(c.get("requests") or [], f"{cp}.requests", known)
        attr = c.get("matchAttribute")
        if attr is None:
            out.append(required(f"{cp}.matchAttribute"))
        else:
            out += qualified_name(attr, f"{cp}.matchAttribute")
            if attr and "/" not in attr:
                out.append(invalid(f"{cp}.matchAttribute", attr, "must include a domain"))
    if len(constraints) > MAX_CONSTRAINTS:
        out.append(too_many(f"{path}.devices.constraints", len(constraints), MAX_CONSTRAINTS))
    config = devices.get("config") or []
    for i, c in enumerate(config):
        cp = f"{path}.devices.config[{i}]"
        out += _request_refs(c.get("requests") or [], f"{cp}.requests", known)
        out += _opaque(c, cp)
    if len(config) > MAX_CONFIG:
        out.append(too_many(f"{path}.devices.config", len(config), MAX_CONFIG))
    return out


def _opaque(config: dict[str, Any], path: str) -> list[Cause]:
    opaque = config.get("opaque")
    if opaque is None:
        return [required(f"{path}.opaque")]
    out = driver_name(opaque.get("driver"), f"{path}.opaque.driver")
    if opaque.get("parameters") is None:
        out.append(required(f"{path}.opaque.parameters"))
    elif not isinstance(opaque["parameters"], dict):
        out.append(invalid(f"{path}.opaque.parameters", "<value omitted>", "must be a valid JSON object"))
    return out


def resource_claim(obj: dict[str, Any]) -> list[Cause]:
    return claim_spec(obj.get("spec"), "spec")


def resource_claim_update(old: dict[str, Any], new: dict[str, Any]) -> list[Cause]:
    out = []
    if (old.get("spec") or {}) != (new.get("spec") or {}):
        out.append(invalid("spec", new.get("spec"), "field is immutable"))
    return out + resource_claim(new)


def resource_claim_template(obj: dict[str, Any]) -> list[Cause]:
    return claim_spec(((obj.get("spec") or {}).get("spec")), "spec.spec")


def _attribute(v: Any, path: str) -> list[Cause]:
    v = v if isinstance(v, dict) else {}
    kinds = [k for k in ("bool", "int", "string", "version") if v.get(k) is not None]
    out: list[Cause] = []
    if isinstance(v.get("string"), str) and len(v["string"]) > MAX_ATTRIBUTE_VALUE:
        out.append(too_long(f"{path}.string", MAX_ATTRIBUTE_VALUE))
    if isinstance(v.get("version"), str):
        if not SEMVER.match(v["version"]):
            out.append(invalid(f"{path}.version", v["version"],
                               "must be a string compatible with semver.org spec 2.0.0"))
        if len(v["version"]) > MAX_ATTRIBUTE_VALUE:
            out.append(too_long(f"{path}.version", MAX_ATTRIBUTE_VALUE))
    if not kinds:
        out.append(required(path, "exactly one value must be specified"))
    elif len(kinds) > 1:
        out.append(invalid(path, v, "exactly one value must be specified"))
    return out


def _taint(t: dict[str, Any], path: str) -> list[Cause]:
    out = names.qualified_name(t.get("key") or "", f"{path}.key")
    if t.get("value"):
        out += names.label_value(t["value"], f"{path}.value")
    if not t.get("effect"):
        out.append(required(f"{path}.effect"))
    elif t["effect"] not in EFFECTS:
        out.append(not_supported(f"{path}.effect", t["effect"], EFFECTS))
    return out


def _device(d: dict[str, Any], p: str, per_device: bool) -> list[Cause]:
    out = names.dns_label(d.get("name"), f"{p}.name")
    attrs, caps = d.get("attributes") or {}, d.get("capacity") or {}
    if len(attrs) + len(caps) > MAX_ATTRIBUTES_AND_CAPACITY:
        out.append(invalid(p, len(attrs) + len(caps), "the total number of attributes and capacities "
                                                      f"must not exceed {MAX_ATTRIBUTES_AND_CAPACITY}"))
    # a bad key at its key path, as 1.34 reports it (1.37 reports it at the map)
    for name, v in attrs.items():
        out += qualified_name(name, _key_path(f"{p}.attributes", name))
        out += _attribute(v, _key_path(f"{p}.attributes", name))
    for name in caps:
        out += qualified_name(name, _key_path(f"{p}.capacity", name))
    taints = d.get("taints") or []
    for j, t in enumerate(taints):
        out += _taint(t, f"{p}.taints[{j}]")
    if len(taints) > MAX_TAINTS_PER_DEVICE:
        out.append(too_many(f"{p}.taints", len(taints), MAX_TAINTS_PER_DEVICE))
    placed = [k for k in ("nodeName", "nodeSelector", "allNodes") if d.get(k) is not None]
    if placed and not per_device:
        out.append(invalid(p, None, "`nodeName`, `nodeSelector` and `allNodes` can only be set if "
                                    "`perDeviceNodeSelection` is set to true in the ResourceSlice spec"))
    return out


def resource_slice(obj: dict[str, Any]) -> list[Cause]:
    spec = obj.get("spec") or {}
    out = driver_name(spec.get("driver"), "spec.driver")
    pool = spec.get("pool") or {}
    out += pool_name(pool.get("name"), "spec.pool.name")
    if (pool.get("resourceSliceCount") or 0) <= 0:
        out.append(invalid("spec.pool.resourceSliceCount", pool.get("resourceSliceCount") or 0,
                           "must be greater than zero"))
    if (pool.get("generation") or 0) < 0:
        out.append(invalid("spec.pool.generation", pool.get("generation"),
                           "must be greater than or equal to zero"))
    placed: list[str] = []
    if spec.get("nodeName") is not None:
        if spec["nodeName"]:
            placed.append("`nodeName`")
            out += names.dns_subdomain(spec["nodeName"], "spec.nodeName")
        else:
            out.append(invalid("spec.nodeName", "", "must be either unset or set to a non-empty string"))
    if spec.get("nodeSelector") is not None:
        placed.append("`nodeSelector`")
        terms = (spec["nodeSelector"] or {}).get("nodeSelectorTerms") or []
        if len(terms) != 1:
            out.append(invalid("spec.nodeSelector.nodeSelectorTerms", terms,
                               "must have exactly one node selector term"))
    for flag in ("allNodes", "perDeviceNodeSelection"):
        if spec.get(flag) is True:
            placed.append(f"`{flag}`")
        elif spec.get(flag) is not None:
            out.append(invalid(f"spec.{flag}", spec[flag], "must be either unset or set to true"))
    if not placed:
        out.append(required("spec", PLACEMENT))
    elif len(placed) > 1:
        out.append(invalid("spec", "{" + ", ".join(placed) + "}", PLACEMENT + ", but multiple fields are set"))
    devices = spec.get("devices") or []
    for i, d in enumerate(devices):
        out += _device(d, f"spec.devices[{i}]", spec.get("perDeviceNodeSelection") is True)
    out += _named_set(devices, MAX_DEVICES_PER_SLICE, "spec.devices")
    return out


def resource_slice_update(old: dict[str, Any], new: dict[str, Any]) -> list[Cause]:
    out: list[Cause] = []
    o, n = old.get("spec") or {}, new.get("spec") or {}
    for path, a, b in (("spec.pool.name", (o.get("pool") or {}).get("name"), (n.get("pool") or {}).get("name")),
                       ("spec.driver", o.get("driver"), n.get("driver")),
                       ("spec.nodeName", o.get("nodeName"), n.get("nodeName"))):
        if a != b:
            out.append(invalid(path, b, "field is immutable"))
    return resource_slice(new) + out


def device_class(obj: dict[str, Any]) -> list[Cause]:
    spec = obj.get("spec") or {}
    out = selectors(spec.get("selectors"), "spec.selectors")
    config = spec.get("config") or []
    for i, c in enumerate(config):
        out += _opaque(c, f"spec.config[{i}]")
    if len(config) > MAX_CONFIG:
        out.append(too_many("spec.config", len(config), MAX_CONFIG))
    return out

