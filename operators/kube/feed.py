"""Feeding the shared tracker from kopf watch streams.

Only kopf's low-level event handlers are used: they cost no PATCH calls on the watched
objects (state-changing handlers would annotate every ResourceSlice and Pod).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import kopf
import structlog

from operators.tracker import Tracker

log = structlog.get_logger("draco.feed")

# kind -> (group, version, plural)
WATCHED: dict[str, tuple[str, str, str]] = {
    "ResourceSlice": ("resource.k8s.io", "v1", "resourceslices"),
    "DeviceClass": ("resource.k8s.io", "v1", "deviceclasses"),
    "ResourceClaim": ("resource.k8s.io", "v1", "resourceclaims"),
    "Pod": ("", "v1", "pods"),
    "DeviceTaintRule": ("resource.draco.dev", "v1alpha1", "devicetaintrules"),
}


def register_feed(registry: kopf.OperatorRegistry, tracker: Tracker, kinds: Iterable[str]) -> None:
    for kind in kinds:
        group, version, plural = WATCHED[kind]

        def make(kind: str, plural: str) -> Any:
            async def feed(event: Mapping[str, Any], **_: Any) -> None:
                body = event.get("object")
                if not isinstance(body, Mapping):
                    return
                change = tracker.apply({"type": event.get("type") or "ADDED",
                                        "object": {"kind": kind, **dict(body)}})
                for err in change.errors:
                    log.error("bad object", kind=err.ref.kind, namespace=err.ref.namespace,
                              name=err.ref.name, error=str(err))
            feed.__name__ = f"feed_{plural}"
            return feed

        kopf.on.event(group=group, version=version, plural=plural, registry=registry)(make(kind, plural))
