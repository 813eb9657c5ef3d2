"""Object metadata every draco view needs: identity, concurrency token, lifecycle."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from operators.model import fields as f
from operators.model.errors import FieldError


class NamespacedName(NamedTuple):
    """Key of a namespaced object (claims, pods) in tracker indexes and notifications."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class ObjectMeta:
    name: str
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    generation: int = 0
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None
    labels: Mapping[str, str] = field(default_factory=lambda: f.EMPTY_MAP)
    annotations: Mapping[str, str] = field(default_factory=lambda: f.EMPTY_MAP)
    controller_uid: str = ""  # the UID of the ownerReference marked controller, if any

    @property
    def key(self) -> NamespacedName:
        return NamespacedName(self.namespace, self.name)

    @property
    def deleting(self) -> bool:
        return self.deletion_timestamp is not None


class NamespacedObject:
    """Name, namespace and key read from `meta`, for the namespaced objects draco keys by
    them (claims, pods)."""

    __slots__ = ()
    meta: ObjectMeta

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def namespace(self) -> str:
        return self.meta.namespace

    @property
    def key(self) -> NamespacedName:
        return self.meta.key


def peek_identity(d: Mapping[str, Any]) -> tuple[str, str]:
    """(namespace, name) without validation, so even a broken object can be named."""
    md = d.get("metadata")
    if not isinstance(md, Mapping):
        return "", ""
    ns, name = md.get("namespace"), md.get("name")
    return (ns if isinstance(ns, str) else ""), (name if isinstance(name, str) else "")


def _controller_uid(md: Mapping[str, Any]) -> str:
    """metav1.GetControllerOf: the first ownerReference with `controller: true`. Entries
    draco cannot read are skipped (they control nothing it can check)."""
    refs = md.get("ownerReferences")
    if not isinstance(refs, list):
        return ""
    for r in refs:
        if isinstance(r, Mapping) and r.get("controller") is True and isinstance(r.get("uid"), str):
            return str(r["uid"])
    return ""


def parse_meta(d: Mapping[str, Any], *, namespaced: bool) -> ObjectMeta:
    try:
        md = f.obj(d, "metadata", required=True)
        name = f.string(md, "name", required=True)
        namespace = f.string(md, "namespace", required=namespaced)
        return ObjectMeta(
            name=name,
            namespace=namespace,
            uid=f.string(md, "uid"),
            resource_version=f.string(md, "resourceVersion"),
            generation=f.integer(md, "generation"),
            creation_timestamp=f.opt_time(md, "creationTimestamp"),
            deletion_timestamp=f.opt_time(md, "deletionTimestamp"),
            labels=f.string_map(md, "labels"),
            annotations=f.string_map(md, "annotations"),
            controller_uid=_controller_uid(md),
        )
    except FieldError as e:
        if e.segments and e.segments[-1] == "metadata":
            raise
        raise e.at("metadata") from None
