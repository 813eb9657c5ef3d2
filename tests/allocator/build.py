"""Turns the compact objects of the allocator tables into model objects.

Defaults keep the tables short: class `class-a` selects driver `driver-a`, `class-b`
driver `driver-b`; a slice is node-local to `node-1`, generation 1, one slice per pool;
the node tried is `node-1` without labels unless a case says otherwise (`node: null`
means no node).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from operators.allocator import Inventory, NodeInfo, Shares, inventory_from_slices
from operators.model import (
    DeviceClass,
    DeviceID,
    ResourceClaim,
    ResourceSlice,
    parse_device_class,
    parse_resource_claim,
    parse_resource_slice,
)
from operators.model.quantity import parse_quantity

DEFAULT_CLASSES = [
    {"name": "class-a", "selectors": ['device.driver == "driver-a"']},
    {"name": "class-b", "selectors": ['device.driver == "driver-b"']},
]


def device_class_api(c: Mapping[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": e}} for e in c.get("selectors", [])]}
    if "config" in c:
        spec["config"] = [{"opaque": o} for o in c["config"]]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": c["name"]}, "spec": spec}


def device_class(c: Mapping[str, Any]) -> DeviceClass:
    return parse_device_class(device_class_api(c))


def _device(d: Any) -> dict[str, Any]:
    if isinstance(d, str):
        return {"name": d}
    out = dict(d)
    return out


def resource_slice_api(s: Mapping[str, Any], index: int) -> dict[str, Any]:
    driver = s.get("driver", "driver-a")
    pool = s.get("pool", "pool-1")
    spec: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": pool, "generation": s.get("generation", 1),
                 "resourceSliceCount": s.get("count", 1)},
    }
    if "sharedCounters" in s:  # a counter slice: the API allows no devices beside the sets
        spec["sharedCounters"] = s["sharedCounters"]
    else:
        spec["devices"] = [_device(d) for d in s.get("devices", [])]
    if s.get("allNodes"):
        spec["allNodes"] = True
    elif "nodeSelector" in s:
        spec["nodeSelector"] = s["nodeSelector"]
    elif s.get("perDevice"):
        spec["perDeviceNodeSelection"] = True
    else:
        spec["nodeName"] = s.get("node", "node-1")
    name = s.get("name", f"{pool}-slice-{index}")
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": name}, "spec": spec}


def resource_slice(s: Mapping[str, Any], index: int) -> ResourceSlice:
    return parse_resource_slice(resource_slice_api(s, index))


def _spec(r: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"deviceClassName": r.get("class", "class-a")}
    if r.get("mode") == "All":
        out["allocationMode"] = "All"
    elif "count" in r:
        out["count"] = r["count"]
    if "selectors" in r:
        out["selectors"] = [{"cel": {"expression": e}} for e in r["selectors"]]
    if "tolerations" in r:
        out["tolerations"] = r["tolerations"]
    if "adminAccess" in r:
        out["adminAccess"] = r["adminAccess"]
    if "capacity" in r:
        out["capacity"] = r["capacity"]
    return out


def _request(r: Mapping[str, Any]) -> dict[str, Any]:
    if "firstAvailable" in r:
        return {"name": r["name"], "firstAvailable": [
            {"name": s["name"], **_spec(s)} for s in r["firstAvailable"]]}
    return {"name": r["name"], "exactly": _spec(r)}


def claim_api(c: Mapping[str, Any]) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": [_request(r) for r in c.get("requests", [])]}
    if "constraints" in c:
        devices["constraints"] = c["constraints"]
    if "config" in c:
        devices["config"] = c["config"]
    meta: dict[str, Any] = {"name": c.get("name", "claim-0"), "namespace": "default"}
    if "annotations" in c:
        meta["annotations"] = c["annotations"]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": meta, "spec": {"devices": devices}}


def claim(c: Mapping[str, Any]) -> ResourceClaim:
    return parse_resource_claim(claim_api(c))


def device_id(text: str) -> DeviceID:
    driver, pool, device = text.split("/")
    return DeviceID(driver, pool, device)


def case_inputs(case: Mapping[str, Any]) -> tuple[
        list[ResourceClaim], NodeInfo | None, Inventory, dict[str, DeviceClass], set[DeviceID]]:
    classes = {c.name: c for c in map(device_class, DEFAULT_CLASSES + case.get("classes", []))}
    slices = [resource_slice(s, i) for i, s in enumerate(case.get("slices", []))]
    node_raw = case.get("node", {"name": "node-1"})
    node = None if node_raw is None else NodeInfo(node_raw["name"], node_raw.get("labels", {}))
    claims = [claim(c) for c in case["claims"]]
    in_use = {device_id(x) for x in case.get("inUse", [])}
    return claims, node, inventory_from_slices(slices), classes, in_use


def case_shares(case: Mapping[str, Any]) -> Shares:
    """`shared: ["driver/pool/device=name:amount,…"]`: shares other claims hold."""
    out = Shares()
    for text in case.get("shared", []):
        device, _, amounts = text.partition("=")
        out.add(device_id(device), [(n, parse_quantity(a)) for n, _, a in
                                    (x.partition(":") for x in amounts.split(",") if x)])
    return out
