"""The three PATCH flavours kube-apiserver accepts, over plain JSON values.

Strategic merge knows the list merge keys of the fields kubectl and draco touch
(containers, conditions, schedulingGates, tolerations, finalizers, …); lists without
a merge key are replaced whole, as upstream does for atomic lists.
"""

from __future__ import annotations

import copy
from typing import Any


class PatchError(Exception):
    """A malformed patch: the server answers 400 (422 for a failed JSON-patch test)."""


def apply_merge_patch(obj: dict[str, Any], patch: Any) -> dict[str, Any]:
    """RFC 7386: objects merge recursively, null deletes, everything else replaces."""
    if not isinstance(patch, dict):
        raise PatchError("a merge patch must be a JSON object")
    result = _merge(obj, patch)
    assert isinstance(result, dict)
    return result


def _merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merge(out.get(key), value)
    return out


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _walk(doc: Any, parts: list[str], path: str) -> Any:
    cur = doc
    for p in parts:
        if isinstance(cur, dict):
            if p not in cur:
                raise PatchError(f"path {path!r} does not exist")
            cur = cur[p]
        elif isinstance(cur, list):
            try:
                cur = cur[int(p)]
            except (ValueError, IndexError):
                raise PatchError(f"path {path!r} does not exist") from None
        else:
            raise PatchError(f"path {path!r} does not exist")
    return cur


def apply_json_patch(obj: dict[str, Any], ops: Any) -> dict[str, Any]:
    """RFC 6902 (add, remove, replace, move, copy, test)."""
    if not isinstance(ops, list):
        raise PatchError("a JSON patch must be a list of operations")
    doc: Any = copy.deepcopy(obj)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"invalid JSON patch operation: {op!r}")
        kind, path = op["op"], op["path"]
        parts = _pointer(path)
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchError(f"operation {kind} needs a value")
        if kind == "test":
            if _walk(doc, parts, path) != op["value"]:
                raise PatchError(f"test operation failed at {path!r}")
            continue
        if kind in ("move", "copy"):
            src = _pointer(op.get("from", ""))
            value = copy.deepcopy(_walk(doc, src, op.get("from", "")))
            if kind == "move":
                doc = _remove(doc, src, op.get("from", ""))
            doc = _add(doc, parts, value, path)
        elif kind == "add":
            doc = _add(doc, parts, copy.deepcopy(op["value"]), path)
        elif kind == "remove":
            doc = _remove(doc, parts, path)
        elif kind == "replace":
            doc = _remove(doc, parts, path)
            doc = _add(doc, parts, copy.deepcopy(op["value"]), path)
        else:
            raise PatchError(f"unknown JSON patch operation {kind!r}")
    if not isinstance(doc, dict):
        raise PatchError("the patched document is not an object")
    return doc


def _add(doc: Any, parts: list[str], value: Any, path: str) -> Any:
    if not parts:
        return value
    parent = _walk(doc, parts[:-1], path)
    last = parts[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        else:
            try:
                idx = int(last)
            except ValueError:
                raise PatchError(f"invalid array index in {path!r}") from None
            if idx > len(parent) or idx < 0:
                raise PatchError(f"array index out of range in {path!r}")
            parent.insert(idx, value)
    else:
        raise PatchError(f"path {path!r} does not exist")
    return doc


def _remove(doc: Any, parts: list[str], path: str) -> Any:
    if not parts:
        raise PatchError("cannot remove the whole document")
    parent = _walk(doc, parts[:-1], path)
    last = parts[-1]
    try:
        if isinstance(parent, dict):
            del parent[last]
        elif isinstance(parent, list):
            del parent[int(last)]
        else:
            raise KeyError(last)
    except (KeyError, ValueError, IndexError):
        raise PatchError(f"path {path!r} does not exist") from None
    return doc


# Merge keys of the lists strategic merge treats as maps, by field name.
MERGE_KEYS: dict[str, str] = {
    "containers": "name", "initContainers": "name", "ephemeralContainers": "name",
    "volumes": "name", "env": "name", "volumeMounts": "mountPath", "ports": "containerPort",
    "conditions": "type", "schedulingGates": "name", "resourceClaims": "name",
    "imagePullSecrets": "name", "ownerReferences": "uid", "claims": "name",
    "resourceClaimStatuses": "name", "hostAliases": "ip", "topologySpreadConstraints": "topologyKey",
}
# Primitive lists merged as sets.
SET_LISTS = {"finalizers"}


def apply_strategic_merge_patch(obj: dict[str, Any], patch: Any, kind: str,
                                api_version: str) -> dict[str, Any]:
    if not isinstance(patch, dict):
        raise PatchError("a strategic merge patch must be a JSON object")
    result = _strategic(obj, patch)
    if not isinstance(result, dict):
        raise PatchError("the patched document is not an object")
    return result


def _strategic(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    out = dict(target) if isinstance(target, dict) else {}
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key in ("$retainKeys", "$patch"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if isinstance(out.get(field), list) and isinstance(value, list):
                out[field] = [v for v in out[field] if v not in value]
            continue
        if value is None:
            out.pop(key, None)
        elif isinstance(value, list) and key in MERGE_KEYS and isinstance(out.get(key), list):
            out[key] = _merge_list(out[key], value, MERGE_KEYS[key])
        elif isinstance(value, list) and key in SET_LISTS and isinstance(out.get(key), list):
            out[key] = list(out[key]) + [v for v in value if v not in out[key]]
        else:
            out[key] = _strategic(out.get(key), value)
    if isinstance(retain, list):
        out = {k: v for k, v in out.items() if k in retain}
    return out


def _merge_list(current: list[Any], patch: list[Any], key: str) -> list[Any]:
    out = [copy.deepcopy(x) for x in current]
    if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
        return [copy.deepcopy(p) for p in patch if not (isinstance(p, dict) and "$patch" in p)]
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            raise PatchError(f"list item without merge key {key!r}: {item!r}")
        idx = next((i for i, x in enumerate(out) if isinstance(x, dict) and x.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if idx is not None:
                del out[idx]
            continue
        if idx is None:
            out.append({k: v for k, v in copy.deepcopy(item).items() if k != "$patch"})
        else:
            out[idx] = _strategic(out[idx], item)
    return out
