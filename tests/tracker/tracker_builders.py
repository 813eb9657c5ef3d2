"""Small builders for raw API dicts used by the tracker tests."""

from __future__ import annotations

from typing import Any

DRIVER = "gpu.example.com"


def slice_obj(
    name: str,
    pool: str,
    devices: list[str] | list[dict[str, Any]],
    *,
    generation: int = 1,
    count: int = 1,
    driver: str = DRIVER,
    node: str | None = None,
    model: str = "H100",
) -> dict[str, Any]:
    devs = [
        d if isinstance(d, dict) else {"name": d, "attributes": {"model": {"string": model}}}
        for d in devices
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": driver,
            "nodeName": node or pool,
            "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
            "devices": devs,
        },
    }


def claim_obj(
    name: str,
    results: list[tuple[str, str, str]] | None = None,
    *,
    namespace: str = "ns",
    admin: bool = False,
    reserved_for: list[str] | None = None,
    driver: str = DRIVER,
) -> dict[str, Any]:
    d: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
        "spec": {
            "devices": {
                "requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": "gpu", "adminAccess": admin}}
                ]
            }
        },
        "status": {},
    }
    if results is not None:
        d["status"]["allocation"] = {
            "devices": {
                "results": [
                    {
                        "request": "gpu",
                        "driver": drv,
                        "pool": pool,
                        "device": dev,
                        "adminAccess": admin,
                    }
                    for drv, pool, dev in results
                ]
            }
        }
    if reserved_for:
        d["status"]["reservedFor"] = [
            {"resource": "pods", "name": p, "uid": f"uid-{p}"} for p in reserved_for
        ]
    return d


def pod_obj(
    name: str,
    *,
    namespace: str = "ns",
    claims: list[str] | None = None,
    templates: dict[str, str | None] | None = None,
    extended: str | None = None,
    phase: str = "Pending",
) -> dict[str, Any]:
    rcs: list[dict[str, Any]] = [
        {"name": f"c{i}", "resourceClaimName": c} for i, c in enumerate(claims or [])
    ]
    statuses = []
    for ref, generated in (templates or {}).items():
        rcs.append({"name": ref, "resourceClaimTemplateName": f"tmpl-{ref}"})
        if generated is not None:
            statuses.append({"name": ref, "resourceClaimName": generated})
    status: dict[str, Any] = {"phase": phase, "resourceClaimStatuses": statuses}
    if extended:
        status["extendedResourceClaimStatus"] = {
            "resourceClaimName": extended,
            "requestMappings": [],
        }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
        "spec": {"resourceClaims": rcs, "containers": [{"name": "main", "image": "x"}]},
        "status": status,
    }


def ev(obj: Any, etype: str = "ADDED") -> dict[str, Any]:
    return {"type": etype, "object": obj}
