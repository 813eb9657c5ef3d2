"""Admission-time validation of built-in objects, with upstream's field causes."""

from __future__ import annotations

from typing import Any

from operators.apiserver.validation import names, pods, resource
from operators.apiserver.validation.causes import Cause
from operators.apiserver.validation.eviction import eviction_allowed

__all__ = ["Cause", "eviction_allowed", "validate_create", "validate_update"]

# Kinds whose names are DNS labels rather than subdomains.
DNS_LABEL_NAMES = {"namespaces"}


def _metadata(resource_name: str, obj: dict[str, Any]) -> list[Cause]:
    meta = obj.get("metadata") or {}
    out: list[Cause] = []
    name = meta.get("name")
    if name:
        check = names.dns_label if resource_name in DNS_LABEL_NAMES else names.dns_subdomain
        out += check(name, "metadata.name")
    out += names.labels(meta.get("labels"), "metadata.labels")
    return out


_CREATE = {
    ("", "pods"): pods.validate_pod_create,
    ("resource.k8s.io", "resourceclaims"): resource.resource_claim,
    ("resource.k8s.io", "resourceclaimtemplates"): resource.resource_claim_template,
    ("resource.k8s.io", "resourceslices"): resource.resource_slice,
    ("resource.k8s.io", "deviceclasses"): resource.device_class,
}


def validate_create(resource_name: str, api_group: str, obj: dict[str, Any]) -> list[Cause]:
    out = _metadata(resource_name, obj)
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
    check = _CREATE.get((api_group, resource_name))
    if check is not None:
        out += check(new)
    return out
