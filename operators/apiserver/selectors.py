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
    parts, depth, cur = [], 0, []
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


def label_selector(text: str | None) -> Predicate:
    """`a=b,c!=d,e in (x,y),f notin (z),g,!h`; a bad selector is a 400 like upstream."""
    if not text:
        return lambda _obj: True
    checks: list[Callable[[Mapping[str, str]], bool]] = []
    for part in _split_top(text):
        m = _CMP.match(part)
        if m:
            key, op, value = m.groups()
            if op in ("=", "=="):
                checks.append(lambda ls, k=key, v=value: ls.get(k) == v)
            elif op == "!=":
                checks.append(lambda ls, k=key, v=value: ls.get(k) != v)
            else:
                try:
                    num = int(value)
                except ValueError:
                    raise APIError(400, f"unable to parse requirement: {part!r}") from None
                if op == ">":
                    checks.append(lambda ls, k=key, n=num: k in ls and ls[k].isdigit() and int(ls[k]) > n)
                else:
                    checks.append(lambda ls, k=key, n=num: k in ls and ls[k].isdigit() and int(ls[k]) < n)
            continue
        m = _SET.match(part)
        if not m:
            raise APIError(400, f"unable to parse requirement: {part!r}")
        neg, key, op, values = m.groups()
        if op:
            if neg:
                raise APIError(400, f"unable to parse requirement: {part!r}")
            vals = {v.strip() for v in values.split(",") if v.strip()}
            if op == "in":
                checks.append(lambda ls, k=key, vs=vals: ls.get(k) in vs)
            else:
                checks.append(lambda ls, k=key, vs=vals: ls.get(k) not in vs)
        elif neg:
            checks.append(lambda ls, k=key: k not in ls)
        else:
            checks.append(lambda ls, k=key: k in ls)

    def predicate(obj: Mapping[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(c(labels) for c in checks)

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
