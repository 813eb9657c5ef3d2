"""Malformed and extreme API objects for the property tests.

Each object is a valid one from the example cluster with one field replaced, deleted or
added: wrong types, huge and negative numbers, NaN, long and unicode strings, unknown
enum values. One change at a time keeps the failing object obvious when a test fails.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]

RULE: dict[str, Any] = {
    "apiVersion": "resource.draco.dev/v1alpha1", "kind": "DeviceTaintRule",
    "metadata": {"name": "gpu-0-maintenance", "creationTimestamp": "2026-11-20T10:00:00Z"},
    "spec": {"deviceSelector": {"driver": "gpu.example.com", "pool": "node-a", "device": "gpu-0"},
             "taint": {"key": "example.com/maintenance", "value": "planned", "effect": "NoExecute",
                       "timeAdded": "2026-11-20T10:00:00Z"}},
}
# A toleration that does not match the rule's taint, so mutations have one to break.
TOLERATION = {"key": "example.com/other", "operator": "Equal", "value": "x", "effect": "NoExecute",
              "tolerationSeconds": 60}
KINDS = {"ResourceSlice", "DeviceClass", "ResourceClaim", "Pod", "DeviceTaintRule", "ResourceSlicePatch"}


def base_objects() -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = []
    for name in ("cluster.yaml", "patches.yaml"):
        objects += [d for d in yaml.safe_load_all((ROOT / "examples" / name).read_text())
                    if isinstance(d, dict) and d.get("kind") in KINDS]
    objects.append(copy.deepcopy(RULE))
    for obj in objects:
        if obj["kind"] == "ResourceClaim" and obj["metadata"]["name"] == "training":
            obj["status"]["allocation"]["devices"]["results"][0]["tolerations"] = [dict(TOLERATION)]
    return objects


INTERESTING_STRINGS = [
    "", " ", "NoExecute", "NoSchedule", "None", "Bogus", "Exists", "Equal", "Gt", "All", "ExactCount",
    "-1", "0", "9223372036854775807", "1e400", "nan", "80Gi", "not-a-quantity", "10000000000000000000000000000Ki",
    "2026-13-45T99:99:99Z", "9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "ü/ñ", "🙂" * 3,
    "a" * 300, "x/" * 40, "device.attributes[\"gpu.example.com\"].model == ", "1/0 == 1",
    "gpu.example.com", "node-a", "gpu-0", "pods", "\x00", "line\nbreak",
]
INTERESTING_INTS = [0, -1, 1, 2**31, 2**63 - 1, 2**63, -(2**63) - 1, 10**26, -(10**30), 300000000000]

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.sampled_from(INTERESTING_INTS),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
    st.sampled_from(INTERESTING_STRINGS),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.one_of(st.text(max_size=8), st.sampled_from(["key", "operator", "effect", "name"])),
                      inner, max_size=3),
    max_leaves=6,
)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for k, v in value.items():
            out += paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += paths(v, (*prefix, i))
    return out


def mutate(obj: dict[str, Any], path: tuple[Any, ...], op: str, new: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    parent: Any = out
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if op == "delete":
        del parent[last]
    elif op == "add" and isinstance(parent[last], dict):
        parent[last]["unknownField\u00e9"] = new
    elif op == "add" and isinstance(parent[last], list):
        parent[last].append(new)
    else:
        parent[last] = new
    return out


@st.composite
def mutated(draw: st.DrawFn) -> tuple[list[dict[str, Any]], int, tuple[Any, ...]]:
    """(objects, index of the mutated one, the path that changed)."""
    objects = base_objects()
    index = draw(st.integers(0, len(objects) - 1))
    path = draw(st.sampled_from(paths(objects[index])))
    op = draw(st.sampled_from(["replace", "replace", "delete", "add"]))
    objects[index] = mutate(objects[index], path, op, draw(values))
    return objects, index, path
