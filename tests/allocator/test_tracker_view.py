"""Over draco's device view: DeviceTaintRule taints and ResourceSlicePatch attributes
count for the allocator, and admin-access allocations leave devices free."""

from __future__ import annotations

from typing import Any

from operators.allocator import (
    NodeInfo,
    allocate,
    in_use_from_claims,
    in_use_from_tracker,
    inventory_from_tracker,
)
from operators.model import DeviceID, NamespacedName
from operators.tracker import Tracker
from operators.tracker.slice_patches import SlicePatchOverlay
from operators.tracker.taint_rules import TaintRuleOverlay
from tests.allocator.build import claim

DRIVER = "gpu.example.com"


def _slice() -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": "node-1-gpu"},
        "spec": {"driver": DRIVER, "nodeName": "node-1",
                 "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": f"gpu-{i}", "attributes": {"index": {"int": i}}}
                             for i in range(3)]},
    }


def _class() -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": "gpu"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}


def _rule(device: str) -> dict[str, Any]:
    return {"apiVersion": "resource.draco.dev/v1alpha1", "kind": "DeviceTaintRule",
            "metadata": {"name": "maint"},
            "spec": {"deviceSelector": {"driver": DRIVER, "pool": "node-1", "device": device},
                     "taint": {"key": "maint", "effect": "NoSchedule"}}}


def _patch(device: str) -> dict[str, Any]:
    return {"apiVersion": "resource.draco.dev/v1alpha1", "kind": "ResourceSlicePatch",
            "metadata": {"name": "blessed"},
            "spec": {"devices": {"filter": {"driver": DRIVER, "device": device},
                                 "attributes": {"example.com/blessed": {"bool": True}}}}}


def _allocated_claim(name: str, device: str, admin: bool) -> dict[str, Any]:
    result: dict[str, Any] = {"request": "r", "driver": DRIVER, "pool": "node-1", "device": device}
    if admin:
        result["adminAccess"] = True
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "r", "exactly": {
                "deviceClassName": "gpu", "adminAccess": admin}}]}},
            "status": {"allocation": {"devices": {"results": [result]}}}}


def _tracker(*objs: dict[str, Any]) -> Tracker:
    t = Tracker()
    t.register_overlay(TaintRuleOverlay())
    t.register_overlay(SlicePatchOverlay())
    for o in (_slice(), _class(), *objs):
        t.apply({"type": "ADDED", "object": o})
    return t


def _first_device(t: Tracker, requests: list[dict[str, Any]]) -> str | None:
    c = claim({"name": "new", "requests": requests})
    classes = {dc.name: dc for dc in t.device_classes()}
    out = allocate([c], NodeInfo("node-1"), inventory_from_tracker(t), classes,
                   in_use_from_tracker(t))
    return out.allocation_api(0)["devices"]["results"][0]["device"] if out.allocated else None


def test_a_taint_rule_keeps_the_device_away_unless_tolerated() -> None:
    t = _tracker(_rule("gpu-0"))
    assert _first_device(t, [{"name": "r", "class": "gpu"}]) == "gpu-1"
    tolerant = [{"name": "r", "class": "gpu", "tolerations": [{"key": "maint", "operator": "Exists"}]}]
    assert _first_device(t, tolerant) == "gpu-0"


def test_a_patched_attribute_is_what_selectors_see() -> None:
    t = _tracker(_patch("gpu-2"))
    blessed = [{"name": "r", "class": "gpu", "selectors": ['"blessed" in device.attributes["example.com"]']}]
    assert _first_device(t, blessed) == "gpu-2"


def test_admin_access_allocations_do_not_hold_devices() -> None:
    t = _tracker(_allocated_claim("admin", "gpu-0", True), _allocated_claim("user", "gpu-1", False))
    assert in_use_from_tracker(t) == {DeviceID(DRIVER, "node-1", "gpu-1")}
    claims = [t.claim(NamespacedName("default", n)) for n in ("admin", "user")]
    assert in_use_from_claims(c for c in claims if c is not None) == in_use_from_tracker(t)
    assert _first_device(t, [{"name": "r", "class": "gpu"}]) == "gpu-0"


def test_a_selector_reading_a_missing_attribute_fails_with_an_error_not_a_skip() -> None:
    t = _tracker(_patch("gpu-2"))
    c = claim({"name": "new", "requests": [
        {"name": "r", "class": "gpu", "selectors": ['device.attributes["example.com"].blessed']}]})
    out = allocate([c], NodeInfo("node-1"), inventory_from_tracker(t),
                   {dc.name: dc for dc in t.device_classes()}, in_use_from_tracker(t))
    assert out.status == "error"
    assert out.reason is not None and "gpu-0: CEL runtime error" in out.reason
    assert out.explain[0].requests[0].cel_errors
