"""The resource types the embedded API server serves, built-in and CRD-defined.

Discovery, OpenAPI, routing and Table output all read this one registry, so a CRD
created at run time shows up everywhere at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()  # "status", "eviction"
    list_kind: str = ""
    printer_columns: tuple[dict[str, Any], ...] = ()
    schema: Any = None  # StructuralSchema for CRDs
    crd: bool = False
    verbs: tuple[str, ...] = (
        "create", "delete", "deletecollection", "get", "list", "patch", "update", "watch",
    )

    def __post_init__(self) -> None:
        self.singular = self.singular or self.kind.lower()
        self.list_kind = self.list_kind or f"{self.kind}List"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> tuple[str, str]:
        """Storage key: one store per group+plural, whatever version is asked for."""
        return (self.group, self.plural)

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    def discovery(self) -> list[dict[str, Any]]:
        main: dict[str, Any] = {
            "name": self.plural, "singularName": self.singular, "namespaced": self.namespaced,
            "kind": self.kind, "verbs": list(self.verbs),
        }
        if self.short_names:
            main["shortNames"] = list(self.short_names)
        if self.categories:
            main["categories"] = list(self.categories)
        out = [main]
        for sub in self.subresources:
            if sub == "status":
                out.append({"name": f"{self.plural}/status", "singularName": "",
                            "namespaced": self.namespaced, "kind": self.kind,
                            "verbs": ["get", "patch", "update"]})
            elif sub == "eviction":
                out.append({"name": f"{self.plural}/eviction", "singularName": "",
                            "namespaced": self.namespaced, "group": "policy", "version": "v1",
                            "kind": "Eviction", "verbs": ["create"]})
        return out


def _builtin() -> list[ResourceType]:
    R = ResourceType
    return [
        R("", "v1", "namespaces", "Namespace", False, short_names=("ns",),
          subresources=("status",)),
        R("", "v1", "pods", "Pod", True, short_names=("po",), categories=("all",),
          subresources=("status", "eviction")),
        R("", "v1", "nodes", "Node", False, short_names=("no",), subresources=("status",)),
        R("", "v1", "events", "Event", True, short_names=("ev",)),
        R("", "v1", "configmaps", "ConfigMap", True, short_names=("cm",)),
        R("", "v1", "secrets", "Secret", True),
        R("", "v1", "serviceaccounts", "ServiceAccount", True, short_names=("sa",)),
        R("events.k8s.io", "v1", "events", "Event", True, short_names=("ev",)),
        R("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False),
        R("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False),
        R("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True,
          subresources=("status",)),
        R("resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", True),
        R("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True,
          short_names=("pdb",), subresources=("status",)),
        R("coordination.k8s.io", "v1", "leases", "Lease", True),
        R("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition",
          False, short_names=("crd", "crds"), categories=("api-extensions",),
          subresources=("status",)),
    ]


@dataclass
class Registry:
    types: dict[tuple[str, str, str], ResourceType] = field(default_factory=dict)

    @classmethod
    def with_builtins(cls) -> Registry:
        reg = cls()
        for rt in _builtin():
            reg.add(rt)
        return reg

    def add(self, rt: ResourceType) -> None:
        self.types[(rt.group, rt.version, rt.plural)] = rt

    def remove_group_plural(self, group: str, plural: str) -> None:
        for k in [k for k in self.types if k[0] == group and k[2] == plural]:
            del self.types[k]

    def get(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self.types.get((group, version, plural))

    def groups(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for g, v, _ in self.types:
            if g and v not in out.setdefault(g, []):
                out[g].append(v)
        return out

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return [rt for (g, v, _), rt in self.types.items() if g == group and v == version]

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        for rt in self.types.values():
            if rt.api_version == api_version and rt.kind == kind:
                return rt
        return None


def crd_types(crd: dict[str, Any], schema_factory: Any) -> list[ResourceType]:
    """ResourceTypes for every served version of a CRD."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    out = []
    for ver in spec.get("versions") or []:
        if not ver.get("served", True):
            continue
        subs = ver.get("subresources") or {}
        schema = ((ver.get("schema") or {}).get("openAPIV3Schema")) or None
        out.append(ResourceType(
            group=spec.get("group", ""), version=ver["name"], plural=names.get("plural", ""),
            kind=names.get("kind", ""), namespaced=spec.get("scope") == "Namespaced",
            singular=names.get("singular", ""), short_names=tuple(names.get("shortNames") or ()),
            categories=tuple(names.get("categories") or ()),
            subresources=("status",) if "status" in subs else (),
            list_kind=names.get("listKind", ""),
            printer_columns=tuple(ver.get("additionalPrinterColumns") or ()),
            schema=schema_factory(schema) if schema is not None else None,
            crd=True,
        ))
    return out
