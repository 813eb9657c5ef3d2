"""meta.k8s.io/v1 Table output, which `kubectl get` asks for.

CRDs get their additionalPrinterColumns (a small JSONPath subset: fields, indexes,
`[*]` and `[?(@.k=="v")]` filters, which is what printer columns use in practice);
built-in kinds get upstream's columns where `printers` has them, else Name and Age.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from operators.apiserver.printers import PRINTERS
from operators.apiserver.registry import ResourceType

_TOKEN = re.compile(r"\.([A-Za-z0-9_$-]+)|\[(\d+)\]|\[\*\]|\[\?\(@\.([A-Za-z0-9_.-]+)\s*==\s*['\"](.*?)['\"]\)\]")


def jsonpath(obj: Any, path: str) -> list[Any]:
    path = path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1]
    path = path.removeprefix("$")
    if not path.startswith((".", "[")):
        path = "." + path
    current = [obj]
    pos = 0
    while pos < len(path):
        m = _TOKEN.match(path, pos)
        if not m:
            return []
        pos = m.end()
        name, index, fkey, fval = m.groups()
        nxt: list[Any] = []
        for cur in current:
            if name is not None:
                if isinstance(cur, dict) and name in cur:
                    nxt.append(cur[name])
            elif index is not None:
                if isinstance(cur, list) and int(index) < len(cur):
                    nxt.append(cur[int(index)])
            elif fkey is not None:
                if isinstance(cur, list):
                    for item in cur:
                        val: Any = item
                        for seg in fkey.split("."):
                            val = val.get(seg) if isinstance(val, dict) else None
                        if val is not None and str(val) == fval:
                            nxt.append(item)
            elif isinstance(cur, list):  # [*]
                nxt.extend(cur)
        current = nxt
    return current


def human_duration(seconds: float) -> str:
    """kubectl-style ages: 45s, 3m12s, 5h, 2d…"""
    s = int(max(seconds, 0))
    if s < 120:
        return f"{s}s"
    m = s // 60
    if m < 10:
        return f"{m}m{s % 60}s" if s % 60 else f"{m}m"
    if m < 180:
        return f"{m}m"
    h = m // 60
    if h < 8:
        return f"{h}h{m % 60}m" if m % 60 else f"{h}h"
    if h < 48:
        return f"{h}h"
    d = h // 24
    if d < 365 * 2:
        return f"{d}d"
    return f"{d // 365}y"


def _age(ts: Any, now: datetime) -> str:
    if not isinstance(ts, str):
        return "<unknown>"
    try:
        t = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        return "<invalid>"
    return human_duration((now - t).total_seconds())


def _cell(value: list[Any], col_type: str, now: datetime) -> Any:
    if not value:
        return None
    if col_type == "date":
        return _age(value[0], now)
    if len(value) == 1:
        v = value[0]
        if isinstance(v, (dict, list)):
            import json
            return json.dumps(v, separators=(",", ":"))
        return v
    return ",".join(str(v) for v in value)


def columns(rt: ResourceType) -> list[dict[str, Any]]:
    cols = [{"name": "Name", "type": "string", "format": "name", "description": "Name",
             "priority": 0}]
    extra = [dict(c) for c in rt.printer_columns]
    for c in extra:
        c.setdefault("priority", 0)
        c.setdefault("format", "")
        c.setdefault("description", "")
    cols += [{k: c[k] for k in ("name", "type", "format", "description", "priority")} for c in extra]
    if not any(c.get("jsonPath") == ".metadata.creationTimestamp" for c in extra):
        cols.append({"name": "Age", "type": "date", "format": "", "description": "Age",
                     "priority": 0})
    return cols


def table(rt: ResourceType, items: list[dict[str, Any]], list_meta: dict[str, Any]) -> dict[str, Any]:
    now = datetime.now(UTC)
    printer = None if rt.crd else PRINTERS.get((rt.group, rt.plural))
    if printer is not None:
        cols, row = printer
        return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta,
                "columnDefinitions": cols, "rows": [{"cells": row(obj, lambda ts: _age(ts, now)), "object": {
                    "kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                    "metadata": obj.get("metadata") or {}}} for obj in items]}
    extra = list(rt.printer_columns)
    has_age = any(c.get("jsonPath") == ".metadata.creationTimestamp" for c in extra)
    rows = []
    for obj in items:
        meta = obj.get("metadata") or {}
        cells: list[Any] = [meta.get("name", "")]
        cells += [_cell(jsonpath(obj, c.get("jsonPath", "")), c.get("type", "string"), now)
                  for c in extra]
        if not has_age:
            cells.append(_age(meta.get("creationTimestamp"), now))
        rows.append({"cells": cells, "object": {
            "kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": meta,
        }})
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta,
            "columnDefinitions": columns(rt), "rows": rows}
