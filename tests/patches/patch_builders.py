"""Raw API dicts for the ResourceSlicePatch tests, from the compact table notation."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

DEFAULT_CREATED = "2026-01-01T00:00:00Z"


def slices_from_devices(devices: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One ResourceSlice per driver/pool, devices given as {id: "drv/pool/dev", ...}."""
    pools: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for d in devices:
        driver, pool, name = d["id"].split("/")
        dev: dict[str, Any] = {"name": name}
        if d.get("attributes"):
            dev["attributes"] = d["attributes"]
        if d.get("capacity"):
            dev["capacity"] = {k: {"value": str(v)} for k, v in d["capacity"].items()}
        pools.setdefault((driver, pool), []).append(dev)
    return [
        slice_obj(f"{pool}-{driver}", driver, pool, devs) for (driver, pool), devs in pools.items()
    ]


def slice_obj(
    name: str, driver: str, pool: str, devices: list[dict[str, Any]], generation: int = 1
) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": driver,
            "nodeName": pool,
            "pool": {"name": pool, "generation": generation, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def class_obj(name: str, selectors: Iterable[str] = ()) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": e}} for e in selectors]},
    }


def patch_obj(
    name: str,
    *,
    filter: Mapping[str, Any] | None = None,
    priority: int | None = None,
    attributes: Mapping[str, Any] | None = None,
    capacity: Mapping[str, Any] | None = None,
    created: str = DEFAULT_CREATED,
    generation: int = 1,
) -> dict[str, Any]:
    devices: dict[str, Any] = {}
    if filter is not None:
        flt = dict(filter)
        if "selectors" in flt:
            flt["selectors"] = [
                s if isinstance(s, Mapping) else {"cel": {"expression": s}}
                for s in flt["selectors"]
            ]
        devices["filter"] = flt
    if priority is not None:
        devices["priority"] = priority
    if attributes:
        devices["attributes"] = dict(attributes)
    if capacity:
        devices["capacity"] = dict(capacity)
    return {
        "apiVersion": "resource.draco.dev/v1alpha1",
        "kind": "ResourceSlicePatch",
        "metadata": {"name": name, "creationTimestamp": created, "generation": generation},
        "spec": {"devices": devices},
    }


def patch_from_case(p: Mapping[str, Any]) -> dict[str, Any]:
    return patch_obj(
        p["name"],
        filter=p.get("filter"),
        priority=p.get("priority"),
        attributes=p.get("attributes"),
        capacity=p.get("capacity"),
        created=p.get("created", DEFAULT_CREATED),
    )


def added(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "ADDED", "object": obj}
