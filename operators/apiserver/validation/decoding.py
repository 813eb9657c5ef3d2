"""What kube-apiserver's typed decoder rejects before validation even runs.

Built-in kinds are decoded into Go structs: a number that is not an integer (or does
not fit int64) in an integer field, a value of the wrong JSON type, or a quantity that
does not parse makes the request fail with 400 BadRequest, "<Kind> in version "v1"
cannot be handled as a <Kind>: …". The shapes below cover the fields of the kinds
draco uses whose Go types are not plain strings; everything else passes through.
"""

from __future__ import annotations

import re
from typing import Any

from operators.apiserver.errors import APIError
from operators.apiserver.validation.resource_shapes import RESOURCE_V1

INT64, INT32, BOOL, STRING, QUANTITY, ANY = "int64", "int32", "bool", "string", "quantity", "any"
_LIMITS = {INT64: 2**63, INT32: 2**31}

QUANTITY_RE = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
QUANTITY_FORMAT = f"quantities must match the regular expression '{QUANTITY_RE}'"
QUANTITY_SUFFIX = "unable to parse quantity's suffix"
_DECIMAL = {"", "n", "u", "m", "k", "M", "G", "T", "P", "E"}
_BINARY = {"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"}
_SUFFIX_SHAPE = re.compile(r"^[eEinumkKMGTP]*[-+]?[0-9]*$")


def quantity_error(text: str) -> str | None:
    """Why `text` is not a resource.Quantity (upstream's parser rules), or None."""
    if not text:
        return QUANTITY_FORMAT
    pos = 1 if text[0] in "+-" else 0
    m = re.compile(r"[0-9]*(\.[0-9]*)?").match(text, pos)
    rest = text[m.end():] if m else text[pos:]
    if not _SUFFIX_SHAPE.match(rest):
        return QUANTITY_FORMAT
    if rest in _DECIMAL or rest in _BINARY:
        return None
    if len(rest) > 1 and rest[0] in "eE" and re.fullmatch(r"[-+]?[0-9]+", rest[1:]):
        return None
    return QUANTITY_SUFFIX


_META: dict[str, Any] = {
    "name": STRING, "generateName": STRING, "namespace": STRING, "selfLink": STRING, "uid": STRING,
    "resourceVersion": STRING, "generation": INT64, "creationTimestamp": STRING,
    "deletionTimestamp": STRING, "deletionGracePeriodSeconds": INT64, "labels": {"*": STRING},
    "annotations": {"*": STRING}, "ownerReferences": ANY, "finalizers": [STRING], "managedFields": ANY,
}
_RESOURCES = {"requests": {"*": QUANTITY}, "limits": {"*": QUANTITY}, "claims": ANY}
_CONTAINERS = [{"name": STRING, "image": STRING, "resources": _RESOURCES}]


def _with_meta(shape: dict[str, Any]) -> dict[str, Any]:
    return {**shape, "metadata": _META}


# Complete shapes: unknown fields are found (and refused with fieldValidation=Strict).
COMPLETE: dict[tuple[str, str], dict[str, Any]] = {
    ("resource.k8s.io", "resourceslices"): _with_meta(RESOURCE_V1["ResourceSlice"]),
    ("resource.k8s.io", "deviceclasses"): _with_meta(RESOURCE_V1["DeviceClass"]),
    ("resource.k8s.io", "resourceclaims"): _with_meta(RESOURCE_V1["ResourceClaim"]),
    ("resource.k8s.io", "resourceclaimtemplates"): {
        **_with_meta(RESOURCE_V1["ResourceClaimTemplate"]),
        "spec": {**RESOURCE_V1["ResourceClaimTemplate"]["spec"], "metadata": _META},
    },
}
# Partial shapes: only the typed fields listed are checked.
PARTIAL: dict[tuple[str, str], dict[str, Any]] = {
    ("", "pods"): {"spec": {
        "containers": _CONTAINERS, "initContainers": _CONTAINERS, "nodeName": STRING,
        "terminationGracePeriodSeconds": INT64, "activeDeadlineSeconds": INT64, "priority": INT32,
        "overhead": {"*": QUANTITY}, "resources": _RESOURCES,
    }},
    ("", "nodes"): {"status": {"capacity": {"*": QUANTITY}, "allocatable": {"*": QUANTITY}}},
}


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _number(value: Any) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def _check(value: Any, shape: Any, path: str, field: str, owner: str, unknown: list[str] | None) -> str | None:
    """Why `value` does not decode into `shape`, or None; unknown fields are collected
    into `unknown` (and removed from `value`) when the shape is complete."""
    if value is None or shape == ANY:
        return None
    go_field = f"Go struct field {owner}.{field}"
    if isinstance(shape, dict):
        inner_owner = shape.get("@type", owner)
        if not isinstance(value, dict):
            return f"json: cannot unmarshal {_json_type(value)} into {go_field} of type object"
        for key in list(value):
            sub_shape = shape.get("*", shape.get(key)) if key != "@type" else None
            if sub_shape is None:
                if unknown is not None:
                    unknown.append(f"{path}.{key}" if path else key)
                    del value[key]
                continue
            mapped = "*" in shape
            sub_path = f"{path}.{key}" if path and not mapped else (f"{path}[{key}]" if mapped else key)
            sub_field = field if mapped else (f"{field}.{key}" if field else key)
            err = _check(value[key], sub_shape, sub_path, sub_field, owner if mapped else inner_owner, unknown)
            if err:
                return err
        return None
    if isinstance(shape, list):
        if not isinstance(value, list):
            return f"json: cannot unmarshal {_json_type(value)} into {go_field} of type array"
        for i, item in enumerate(value):
            err = _check(item, shape[0], f"{path}[{i}]", field, owner, unknown)
            if err:
                return err
        return None
    if shape in _LIMITS:
        ok = isinstance(value, int) and not isinstance(value, bool) and -_LIMITS[shape] <= value < _LIMITS[shape]
        if not ok:
            what = f"number {_number(value)}" if _json_type(value) == "number" else _json_type(value)
            return f"json: cannot unmarshal {what} into {go_field} of type {shape}"
    elif shape == BOOL and not isinstance(value, bool):
        return f"json: cannot unmarshal {_json_type(value)} into {go_field} of type bool"
    elif shape == STRING and not isinstance(value, str):
        return f"json: cannot unmarshal {_json_type(value)} into {go_field} of type string"
    elif shape == QUANTITY:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            return QUANTITY_FORMAT
        return quantity_error(value.strip() if isinstance(value, str) else _number(value))
    return None


def decode(group: str, plural: str, kind: str, version: str, obj: dict[str, Any],
           field_validation: str = "") -> None:
    """Do to `obj` what kube-apiserver's typed decoder does: raise its 400 for values that
    do not fit their Go type, and drop unknown fields of the kinds whose shape is complete
    (refusing them instead when the client asked for fieldValidation=Strict)."""
    complete = COMPLETE.get((group, plural))
    shape = complete or {"metadata": _META, **PARTIAL.get((group, plural), {})}
    unknown: list[str] | None = [] if complete is not None else None
    err = _check(obj, shape, "", "", kind, unknown)
    if not err and unknown and field_validation == "Strict":
        err = "strict decoding error: " + ", ".join(f'unknown field "{u}"' for u in unknown)
    if err:
        raise APIError(400, f'{kind} in version "{version}" cannot be handled as a {kind}: {err}')
