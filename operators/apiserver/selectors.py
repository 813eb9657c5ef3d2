"""Label and field selectors as kube-apiserver parses them for list and watch."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from operators.apiserver.errors import APIError

Predicate = Callable[[Mapping[str, Any]], bool]

_SET = re.compile(r"^\s*(!?)\s*([A-Za-z0-9./_-]+)\s*(?:\s(in|notin)\s*\((.*?)\))?\s*$")
_CMP = re.compile(r"^\s*([A-Za-z0-9./_-]+)\s*(==|!=|=|>|<)\s*([A-Za-z0-9._-]*)\s*$")


def _split_top(text: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    cur: list[str] = []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p for p in parts if p.strip()]


Requirement = tuple[str, str, frozenset[str]]  # key, operator, values


def _holds(req: Requirement, labels: Mapping[str, str]) -> bool:
    key, op, values = req
    value = labels.get(key)
    if op in ("=", "==", "in"):
        return value in values
    if op in ("!=", "notin"):
        return value not in values
    if op == "exists":
        return key in labels
    if op == "!":
        return key not in labels
    if value is None or not value.isdigit():
        return False
    bound = int(next(iter(values)))
    return int(value) > bound if op == ">" else int(value) < bound


def parse_label_selector(text: str) -> list[Requirement]:
    reqs: list[Requirement] = []
    for part in _split_top(text):
        m = _CMP.match(part)
        if m:
            key, op, value = m.groups()
            if op in (">", "<") and not value.isdigit():
                raise APIError(400, f"unable to parse requirement: {part!r}")
            reqs.append((key, op, frozenset({value})))
            continue
        m = _SET.match(part)
        if not m:
            raise APIError(400, f"unable to parse requirement: {part!r}")
        neg, key, op, values = m.groups()
        if op:
            if neg:
                raise APIError(400, f"unable to parse requirement: {part!r}")
            reqs.append((key, op, frozenset(v.strip() for v in values.split(",") if v.strip())))
        else:
            reqs.append((key, "!" if neg else "exists", frozenset()))
    return reqs


def label_selector(text: str | None) -> Predicate:
    """`a=b,c!=d,e in (x,y),f notin (z),g,!h`; a bad selector is a 400 like upstream."""
    if not text:
        return lambda _obj: True
    reqs = parse_label_selector(text)

    def predicate(obj: Mapping[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(_holds(r, labels) for r in reqs)

    return predicate


def _field(obj: Mapping[str, Any], path: str) -> str:
    cur: Any = obj
    for seg in path.split("."):
        if not isinstance(cur, Mapping):
            return ""
        cur = cur.get(seg)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


SUPPORTED_FIELDS = {"metadata.name", "metadata.namespace"}
EXTRA_FIELDS = {
    "pods": {"spec.nodeName", "status.phase", "spec.schedulerName", "spec.serviceAccountName"},
    "events": {"involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
               "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
               "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type",
               "regarding.kind", "regarding.namespace", "regarding.name", "regarding.uid"},
    "resourceslices": {"spec.driver", "spec.nodeName"},
    "nodes": {"spec.unschedulable"},
}


def field_selector(text: str | None, plural: str, crd: bool = False) -> Predicate:
    """`metadata.name=x,spec.nodeName!=y`; an unsupported field is a 400 like upstream."""
    if not text:
        return lambda _obj: True
    allowed = SUPPORTED_FIELDS | EXTRA_FIELDS.get(plural, set())
    checks: list[tuple[str, bool, str]] = []
    for part in text.split(","):
        if not part.strip():
            continue
        m = re.match(r"^\s*([A-Za-z0-9._-]+)\s*(==|!=|=)\s*(.*?)\s*$", part)
        if not m:
            raise APIError(400, f"invalid selector: {text!r}; can't understand {part!r}")
        key, op, value = m.groups()
        if key not in allowed:
            raise APIError(400, f'field label not supported: {key}')
        checks.append((key, op != "!=", value))

    def predicate(obj: Mapping[str, Any]) -> bool:
        return all((_field(obj, k) == v) == eq for k, eq, v in checks)

    return predicate
