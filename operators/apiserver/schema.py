"""Structural openAPIV3Schema handling for CRDs: pruning, defaulting, validation.

Order as in kube-apiserver: unknown fields are pruned (and reported for
fieldValidation=Strict), defaults applied, then the result validated; causes carry
upstream's reasons and messages so `kubectl apply` errors read the same.
"""

from __future__ import annotations

import copy
import re
from datetime import datetime
from typing import Any

from operators.apiserver import celrules
from operators.apiserver.validation.causes import (
    Cause,
    invalid,
    not_supported,
    required,
    too_long,
    too_many,
)

BLOCKING = {"FieldValueNotSupported", "FieldValueRequired", "FieldValueTooLong", "FieldValueTooMany",
            "FieldValueTypeInvalid"}
_MISSING = object()


def ratchet(causes: list[Cause], obj: dict[str, Any], old: dict[str, Any] | None) -> list[Cause]:
    """CAUSES without those about a value that OLD already had (none on a create)."""
    if old is None:
        return causes
    return [c for c in causes if value_at(obj, c["field"]) != value_at(old, c["field"])]


def value_at(obj: Any, path: str) -> Any:
    """The value at a cause's field path (`spec.items[2].name`), or a sentinel."""
    cur = obj
    for part in path.replace("[", ".[").split("."):
        if not part:
            continue
        if part.startswith("["):
            try:
                cur = cur[int(part[1:-1])]
            except (ValueError, IndexError, TypeError, KeyError):
                return _MISSING
        elif isinstance(cur, dict) and part in cur:
            cur = cur[part]
        else:
            return _MISSING
    return cur


RULES_SKIPPED = ("Invalid value: null: some validation rules were not checked because the object was "
                 "invalid; correct the existing errors to complete validation")


def _has_rules(schema: Any) -> bool:
    if not isinstance(schema, dict):
        return False
    if schema.get("x-kubernetes-validations"):
        return True
    subs = list((schema.get("properties") or {}).values()) + [schema.get("items"), schema.get("additionalProperties")]
    return any(_has_rules(x) for x in subs)


_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool}


def _type_ok(value: Any, t: str) -> bool:
    if t == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if t == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    expected = _TYPES.get(t)
    return expected is None or isinstance(value, expected)


class StructuralSchema:
    def __init__(self, openapi_v3_schema: dict[str, Any]) -> None:
        self.root = openapi_v3_schema or {}

    # -- pruning

    def unknown_fields(self, obj: dict[str, Any]) -> list[str]:
        found: list[str] = []
        self._prune(copy.deepcopy(obj), self.root, "", found, top=True)
        return found

    def prune(self, obj: dict[str, Any]) -> dict[str, Any]:
        out = copy.deepcopy(obj)
        self._prune(out, self.root, "", [], top=True)
        return out

    def _prune(self, value: Any, schema: dict[str, Any], path: str, found: list[str],
               top: bool = False) -> None:
        if schema.get("x-kubernetes-preserve-unknown-fields") and not schema.get("properties"):
            return
        if isinstance(value, dict):
            props = schema.get("properties")
            addl = schema.get("additionalProperties")
            for key in list(value):
                if top and key in ("apiVersion", "kind", "metadata"):
                    continue
                sub_path = f"{path}.{key}" if path else key
                if props is not None and key in props:
                    self._prune(value[key], props[key], sub_path, found)
                elif isinstance(addl, dict):
                    self._prune(value[key], addl, sub_path, found)
                elif addl is True or schema.get("x-kubernetes-preserve-unknown-fields"):
                    continue
                else:
                    found.append(sub_path)
                    del value[key]
        elif isinstance(value, list) and isinstance(schema.get("items"), dict):
            for i, item in enumerate(value):
                self._prune(item, schema["items"], f"{path}[{i}]", found)

    # -- defaulting

    def default(self, obj: dict[str, Any]) -> dict[str, Any]:
        out = copy.deepcopy(obj)
        self._default(out, self.root)
        return out

    def _default(self, value: Any, schema: dict[str, Any]) -> None:
        if isinstance(value, dict):
            for key, sub in (schema.get("properties") or {}).items():
                if key not in value and "default" in sub:
                    value[key] = copy.deepcopy(sub["default"])
                if key in value:
                    self._default(value[key], sub)
            addl = schema.get("additionalProperties")
            if isinstance(addl, dict):
                for key in value:
                    self._default(value[key], addl)
        elif isinstance(value, list) and isinstance(schema.get("items"), dict):
            for item in value:
                self._default(item, schema["items"])

    # -- validation

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[Cause]:
        """Causes against the schema and its CEL rules. On an update (OLD given), what did
        not change is not rejected again (validation ratcheting, GA upstream), before
        deciding whether the rules can run: a controller can still write the status of
        an object a newer schema version or a bug left invalid."""
        out: list[Cause] = []
        body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
        root = dict(self.root)
        props = {k: v for k, v in (root.get("properties") or {}).items()
                 if k not in ("apiVersion", "kind", "metadata")}
        root["properties"] = props
        root["required"] = [r for r in root.get("required") or [] if r != "metadata"]
        self._validate_value(body, root, "", out)
        # As upstream: validation rules run only when the schema found no blocking error.
        out = ratchet(out, obj, old)
        if any(c["reason"] in BLOCKING for c in out):
            if _has_rules(root):
                out.append({"reason": "FieldValueInvalid", "field": "", "message": RULES_SKIPPED})
        else:
            # rules at the root also see the object's name (upstream gives them
            # metadata.name and metadata.generateName, nothing else of metadata)
            meta = obj.get("metadata")
            named = {k: meta[k] for k in ("name", "generateName")
                     if isinstance(meta, dict) and isinstance(meta.get(k), str)}
            self._rules({**body, "metadata": named}, root, "", out)
            out = ratchet(out, obj, old)
        return out

    def _rules(self, value: Any, schema: dict[str, Any], path: str, out: list[Cause]) -> None:
        if value is None:
            return
        if schema.get("x-kubernetes-validations"):
            out += celrules.check(schema["x-kubernetes-validations"], value, celrules.MISSING, path)
        if isinstance(value, dict):
            props = schema.get("properties") or {}
            addl = schema.get("additionalProperties")
            for key, sub in value.items():
                sub_schema = props.get(key) if key in props else (addl if isinstance(addl, dict) else None)
                if sub_schema is not None:
                    self._rules(sub, sub_schema, f"{path}.{key}" if path else key, out)
        elif isinstance(value, list) and isinstance(schema.get("items"), dict):
            for i, item in enumerate(value):
                self._rules(item, schema["items"], f"{path}[{i}]", out)

    def _validate(self, value: Any, schema: dict[str, Any], path: str, out: list[Cause]) -> None:
        self._validate_value(value, schema, path, out)

    def _validate_value(self, value: Any, schema: dict[str, Any], path: str, out: list[Cause]) -> None:
        if value is None:
            if not schema.get("nullable"):
                t = schema.get("type")
                if t:
                    out.append({"reason": "FieldValueTypeInvalid", "field": path,
                                "message": f'Invalid value: "null": {path} in body must be of type {t}: "null"'})
            return
        if schema.get("x-kubernetes-int-or-string"):
            if not (isinstance(value, (int, str)) and not isinstance(value, bool)):
                out.append(invalid(path, value, "must be an integer or a string"))
            return
        t = schema.get("type")
        if t and not _type_ok(value, t):
            actual = {dict: "object", list: "array", str: "string", bool: "boolean",
                      int: "integer", float: "number"}.get(type(value), type(value).__name__)
            out.append({"reason": "FieldValueTypeInvalid", "field": path,
                        "message": f'Invalid value: "{actual}": {path} in body must be of type {t}: "{actual}"'})
            return
        if "enum" in schema and value not in schema["enum"]:
            out.append(not_supported(path, value, [str(e) for e in schema["enum"]]))
        if isinstance(value, str):
            if "maxLength" in schema and len(value) > schema["maxLength"]:
                out.append(too_long(path, schema["maxLength"]))
            if "minLength" in schema and len(value) < schema["minLength"]:
                out.append(invalid(path, value,
                                   f"{path} in body should be at least {schema['minLength']} chars long"))
            if "pattern" in schema and not re.search(schema["pattern"], value):
                out.append(invalid(path, value,
                                   f"{path} in body should match '{schema['pattern']}'"))
            if schema.get("format") == "date-time":
                try:
                    datetime.fromisoformat(value.replace("Z", "+00:00"))
                except ValueError:
                    out.append(invalid(path, value, f"{path} in body must be of type date-time"))
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if "minimum" in schema and value < schema["minimum"]:
                out.append(invalid(path, value,
                                   f"{path} in body should be greater than or equal to {schema['minimum']}"))
            if "maximum" in schema and value > schema["maximum"]:
                out.append(invalid(path, value,
                                   f"{path} in body should be less than or equal to {schema['maximum']}"))
        if isinstance(value, list):
            if "maxItems" in schema and len(value) > schema["maxItems"]:
                out.append(too_many(path, len(value), schema["maxItems"]))
            if "minItems" in schema and len(value) < schema["minItems"]:
                out.append(invalid(path, value,
                                   f"{path} in body should have at least {schema['minItems']} items"))
            items = schema.get("items")
            if isinstance(items, dict):
                for i, item in enumerate(value):
                    self._validate(item, items, f"{path}[{i}]", out)
                if schema.get("x-kubernetes-list-type") == "map":
                    keys = schema.get("x-kubernetes-list-map-keys") or []
                    seen: set[tuple[Any, ...]] = set()
                    for i, item in enumerate(value):
                        k = tuple((item or {}).get(key) for key in keys)
                        if k in seen:
                            out.append({"reason": "FieldValueDuplicate", "field": f"{path}[{i}]",
                                        "message": f"Duplicate value: {dict(zip(keys, k, strict=True))}"})
                        seen.add(k)
                elif schema.get("x-kubernetes-list-type") == "set":
                    seen_v: list[Any] = []
                    for i, item in enumerate(value):
                        if item in seen_v:
                            out.append({"reason": "FieldValueDuplicate", "field": f"{path}[{i}]",
                                        "message": f"Duplicate value: {item!r}"})
                        seen_v.append(item)
        if isinstance(value, dict):
            for req in schema.get("required") or []:
                if req not in value:
                    out.append(required(f"{path}.{req}" if path else req))
            if "maxProperties" in schema and len(value) > schema["maxProperties"]:
                out.append(too_many(path, len(value), schema["maxProperties"]))
            if "minProperties" in schema and len(value) < schema["minProperties"]:
                out.append(invalid(path, len(value), f"{path} in body should have at least "
                                                     f"{schema['minProperties']} properties"))
            props = schema.get("properties") or {}
            addl = schema.get("additionalProperties")
            for key, sub_value in value.items():
                sub_path = f"{path}.{key}" if path else key
                if key in props:
                    self._validate(sub_value, props[key], sub_path, out)
                elif isinstance(addl, dict):
                    self._validate(sub_value, addl, sub_path, out)
