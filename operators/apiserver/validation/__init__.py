"""Admission-time validation of built-in objects, with upstream's field causes."""

from __future__ import annotations

from typing import Any

from operators.apiserver.validation import claim_status, names, pods, resource
from operators.apiserver.validation.causes import Cause, too_long
from operators.apiserver.validation.eviction import eviction_allowed

__all__ = ["Cause", "eviction_allowed", "validate_create", "validate_metadata", "validate_status_update",
           "validate_update"]

# Kinds whose names are DNS labels rather than subdomains.
DNS_LABEL_NAMES = {"namespaces"}


MAX_ANNOTATIONS_SIZE = 256 * 1024


def validate_metadata(resource_name: str, obj: dict[str, Any]) -> list[Cause]:
    """ObjectMeta checks every kind gets (CRD objects included): names, labels, annotations."""
    meta = obj.get("metadata") or {}
    out: list[Cause] = []
    label = resource_name in DNS_LABEL_NAMES
    if meta.get("name"):
        out += names.object_name(meta["name"], "metadata.name", label)
    elif meta.get("generateName"):
        out += names.object_name(meta["generateName"], "metadata.generateName", label, prefix=True)
    out += names.labels(meta.get("labels"), "metadata.labels")
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        size = 0
        for k, v in annotations.items():
            out += names.qualified_name(str(k).lower(), "metadata.annotations")
            size += len(str(k)) + len(str(v))
        if size > MAX_ANNOTATIONS_SIZE:
            out.append(too_long("metadata.annotations", MAX_ANNOTATIONS_SIZE))
    for i, fin in enumerate(meta.get("finalizers") or []):
        out += names.qualified_name(fin, f"metadata.finalizers[{i}]")
    return out


_CREATE = {
    ("", "pods"): pods.validate_pod_create,
    ("resource.k8s.io", "resourceclaims"): resource.resource_claim,
    ("resource.k8s.io", "resourceclaimtemplates"): resource.resource_claim_template,
    ("resource.k8s.io", "resourceslices"): resource.resource_slice,
    ("resource.k8s.io", "deviceclasses"): resource.device_class,
}


def validate_create(resource_name: str, api_group: str, obj: dict[str, Any]) -> list[Cause]:
    # core/v1 Events skip ObjectMeta validation upstream (compatibility with old clients)
    out = [] if (api_group, resource_name) == ("", "events") else validate_metadata(resource_name, obj)
    check = _CREATE.get((api_group, resource_name))
    if check is not None:
        out += check(obj)
    return out


def validate_update(resource_name: str, api_group: str, old: dict[str, Any],
                    new: dict[str, Any]) -> list[Cause]:
    out = names.labels((new.get("metadata") or {}).get("labels"), "metadata.labels")
    if (api_group, resource_name) == ("", "pods"):
        return out + pods.validate_pod_update(old, new)
    if (api_group, resource_name) == ("resource.k8s.io", "resourceclaims"):
        return out + resource.resource_claim_update(old, new)
    if (api_group, resource_name) == ("resource.k8s.io", "resourceslices"):
        return out + resource.resource_slice_update(old, new)
    check = _CREATE.get((api_group, resource_name))
    if check is not None:
        out += check(new)
    return out


def validate_status_update(resource_name: str, api_group: str, old: dict[str, Any],
                           new: dict[str, Any]) -> list[Cause]:
    """Checks for writes to the status subresource (`new` is old with the new status)."""
    if (api_group, resource_name) == ("resource.k8s.io", "resourceclaims"):
        return claim_status.resource_claim_status(old, new)
    if (api_group, resource_name) == ("", "pods"):
        return pods.validate_pod_status(old, new)
    return []
