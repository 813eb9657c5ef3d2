"""Nothing the tracker keeps outlives its object: after every object of every kind is
deleted, each per-object structure inside the tracker and its overlays is empty again,
however many times the cluster churned (a long-running draco must not grow with churn).
"""

from __future__ import annotations

from typing import Any

from operators.cli.state import standard_overlays
from operators.tracker import Tracker
from operators.tracker.taint_rules import ensure_upstream_overlay

# Registrations, not per-object state: they are set up once and stay.
PLUMBING = {"_overlays", "_overlay_kinds", "_subscribers", "_batch", "stats", "clock", "tracker"}


def entries(obj: Any, seen: set[int] | None = None, path: str = "tracker") -> dict[str, int]:
    """Every non-empty dict, set or list reachable through the attributes of OBJ and of
    the tracker's own helper objects, by attribute path, with its length."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return {}
    seen.add(id(obj))
    out: dict[str, int] = {}
    names = list(getattr(obj, "__dict__", {})) + list(getattr(type(obj), "__slots__", ()))
    for name in names:
        if name in PLUMBING or not hasattr(obj, name):
            continue
        value = getattr(obj, name)
        where = f"{path}.{name}"
        if isinstance(value, (dict, set, list, frozenset)):
            if value:
                out[where] = len(value)
        elif type(value).__module__.startswith("operators.tracker"):
            out |= entries(value, seen, where)
    return out


def held(t: Tracker) -> dict[str, int]:
    """`entries` of the tracker and of each overlay it feeds."""
    out = entries(t)
    for overlay in t.overlays:
        out |= entries(overlay, path=type(overlay).__name__)
    return out


def tracker() -> Tracker:
    t = Tracker()
    for overlay in standard_overlays():
        t.register_overlay(overlay)
    ensure_upstream_overlay(t)
    return t


def world(n: int) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu", "uid": "dc"},
         "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}},
        {"apiVersion": "resource.draco.dev/v1alpha1", "kind": "DeviceTaintRule",
         "metadata": {"name": "maint", "uid": "r"},
         "spec": {"deviceSelector": {"driver": "gpu.example.com", "pool": "node-0"},
                  "taint": {"key": "example.com/m", "effect": "NoExecute"}}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
         "metadata": {"name": "up", "uid": "u"},
         "spec": {"deviceSelector": {"driver": "gpu.example.com", "device": "gpu-1"},
                  "taint": {"key": "example.com/u", "effect": "NoSchedule"}}},
        {"apiVersion": "resource.draco.dev/v1alpha1", "kind": "ResourceSlicePatch",
         "metadata": {"name": "label", "uid": "p", "generation": 1},
         "spec": {"devices": {"filter": {"deviceClassName": "gpu", "selectors": [{"cel": {
             "expression": 'device.attributes["gpu.example.com"].model == "H100"'}}]},
             "attributes": {"example.com/rack": {"string": "r1"}}}}},
    ]
    for node in range(n):
        objs.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                     "metadata": {"name": f"node-{node}", "uid": f"s{node}"},
                     "spec": {"driver": "gpu.example.com", "nodeName": f"node-{node}",
                              "pool": {"name": f"node-{node}", "generation": 1, "resourceSliceCount": 1},
                              "devices": [{"name": f"gpu-{d}", "attributes": {"model": {"string": "H100"}}}
                                          for d in range(4)]}})
        for d in range(3):
            name = f"p-{node}-{d}"
            objs.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                         "metadata": {"name": name, "namespace": "ns", "uid": f"c-{name}"},
                         "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
                         "status": {"allocation": {"devices": {"results": [
                             {"request": "gpu", "driver": "gpu.example.com", "pool": f"node-{node}",
                              "device": f"gpu-{d}"}]}},
                             "reservedFor": [{"resource": "pods", "name": name, "uid": f"u-{name}"}]}})
            objs.append({"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}"},
                         "spec": {"nodeName": f"node-{node}", "containers": [{"name": "c", "image": "i"}],
                                  "resourceClaims": [{"name": "gpu", "resourceClaimName": name}]}})
    # a malformed one: its error is kept while it exists, and released with it
    objs.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bad", "namespace": "ns", "uid": "b"},
                 "spec": {"resourceClaims": [{"x": 1}]}})
    return objs


def test_every_per_object_structure_is_released_with_its_object() -> None:
    t = tracker()
    empty = held(t)
    objs = world(20)
    for cycle in range(3):
        for obj in objs:
            t.apply({"type": "ADDED", "object": obj})
        full = held(t)
        assert full["tracker._usage.pods"] == 60 and full["tracker.errors"] == 1, full
        assert len(list(t.devices())) == 80 and any(v.taints for v in t.devices())
        for obj in reversed(objs):
            t.apply({"type": "DELETED", "object": obj})
        assert held(t) == empty, f"cycle {cycle}: left after every object was deleted"
