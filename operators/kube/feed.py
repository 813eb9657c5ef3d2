"""Feeding the shared tracker from kopf watch streams.

Only kopf's low-level event handlers are used: they cost no PATCH calls on the watched
objects (state-changing handlers would annotate every ResourceSlice and Pod).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import Any

import kopf
import structlog

from operators.kube.supervision import guarded
from operators.tracker import Tracker

log = structlog.get_logger("draco.feed")

# kind -> (group, version, plural); an empty version watches the group's preferred one
WATCHED: dict[str, tuple[str, str, str]] = {
    "ResourceSlice": ("resource.k8s.io", "v1", "resourceslices"),
    "DeviceClass": ("resource.k8s.io", "v1", "deviceclasses"),
    "ResourceClaim": ("resource.k8s.io", "v1", "resourceclaims"),
    "Pod": ("", "v1", "pods"),
    "DeviceTaintRule": ("resource.draco.dev", "v1alpha1", "devicetaintrules"),
    "ResourceSlicePatch": ("resource.draco.dev", "v1alpha1", "resourceslicepatches"),
    # upstream's own rule (v1 from 1.37, v1beta2/v1alpha3 behind gates before): watched
    # where served; bodies keep kind DeviceTaintRule and are told apart by apiVersion
    "DeviceTaintRule.resource.k8s.io": ("resource.k8s.io", "", "devicetaintrules"),
}
UPSTREAM_RULE_VERSIONS = ("v1", "v1beta2", "v1alpha3")


FeedHandler = Callable[..., Coroutine[Any, Any, None]]


def feed_handler(tracker: Tracker, kind: str, seen: dict[str, set[tuple[str, str]]],
                 gate: SyncGate | None = None) -> FeedHandler:
    """The kopf event handler that applies `kind`'s watch events to the tracker.

    A watch event the tracker cannot take is one skipped object (logged, counted in
    draco_controller_errors_total{controller="feed",step=kind}), never a dead feed; the
    gate still hears of it so the initial sync does not wait for it forever.
    """
    async def feed(event: Mapping[str, Any], **_: Any) -> None:
        body = event.get("object")
        if not isinstance(body, Mapping):
            return
        meta = body.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        ident = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        with guarded("feed", kind, kind=kind, namespace=ident[0], name=ident[1]):
            change = tracker.apply({"type": event.get("type") or "ADDED",
                                    "object": {"kind": kind, **dict(body)}})
            for err in change.errors:
                log.error("bad object", kind=err.ref.kind, namespace=err.ref.namespace,
                          name=err.ref.name, error=str(err))
        seen.setdefault(kind, set()).add(ident)
        if gate is not None:
            gate.observe(kind, body)

    group, _, plural = WATCHED[kind]
    feed.__name__ = f"feed_{plural}" + ("_k8s" if kind.endswith(".resource.k8s.io") else "")
    return feed


def register_feed(registry: kopf.OperatorRegistry, tracker: Tracker, kinds: Iterable[str],
                  gate: SyncGate | None = None) -> dict[str, set[tuple[str, str]]]:
    """Feed `kinds` into the tracker; returns the keys seen so far per kind (for the gate)."""
    seen: dict[str, set[tuple[str, str]]] = {}
    for kind in kinds:
        group, version, plural = WATCHED[kind]
        kopf.on.event(group=group, version=version or None, plural=plural, registry=registry)(
            feed_handler(tracker, kind, seen, gate))
    return seen


class SyncGate:
    """Holds controllers back until kopf's initial listing reached the tracker.

    kopf's watch streams deliver the initial state object by object with no
    end-of-list marker; a controller that decided before all kinds arrived could see a
    rule but not yet its pods. Upstream waits for informer sync; draco lists each kind
    once at startup and waits until the feed has delivered every object of that list
    (objects deleted meanwhile are released when their DELETED event arrives).
    """

    def __init__(self) -> None:
        self.expected: dict[str, set[tuple[str, str]]] = {}
        self.primed = asyncio.Event()
        self.done = asyncio.Event()

    def observe(self, kind: str, body: Mapping[str, Any]) -> None:
        waiting = self.expected.get(kind)
        if waiting:
            meta = body.get("metadata")
            meta = meta if isinstance(meta, Mapping) else {}
            waiting.discard((str(meta.get("namespace") or ""), str(meta.get("name") or "")))
            self._check()

    def _check(self) -> None:
        if self.primed.is_set() and not any(self.expected.values()):
            self.done.set()

    async def prime(self, kinds: Iterable[str], client: Any, seen: Mapping[str, set[tuple[str, str]]]) -> None:
        for kind in kinds:
            group, version, plural = WATCHED[kind]
            # A list that fails (no credentials, a garbled answer) leaves that kind
            # unawaited: the controllers start late rather than never.
            with guarded("feed", "initial-sync", kind=kind):
                if version:
                    prefix = f"/apis/{group}/{version}" if group else f"/api/{version}"
                    resp = await client.get(f"{prefix}/{plural}")
                else:  # a kind the server may not serve at all (upstream's rule before 1.37):
                    # listed, not looked up, so missing RBAC shows as a 403 where it matters
                    for candidate in UPSTREAM_RULE_VERSIONS:
                        resp = await client.get(f"/apis/{group}/{candidate}/{plural}")
                        if resp.status != 404:
                            break
                    if resp.status == 404:
                        continue  # not served: nothing to wait for
                if not resp.ok:
                    log.warning("cannot list for the initial sync", kind=kind, status=resp.status)
                    continue
                keys = {((i.get("metadata") or {}).get("namespace") or "", (i.get("metadata") or {}).get("name") or "")
                        for i in (resp.body or {}).get("items") or [] if isinstance(i, Mapping)}
                self.expected[kind] = keys - seen.get(kind, set())
        self.primed.set()
        self._check()

    async def wait(self, timeout: float = 30.0) -> bool:
        try:
            await asyncio.wait_for(self.done.wait(), timeout)
            return True
        except TimeoutError:
            log.warning("initial sync incomplete; continuing", missing={
                k: len(v) for k, v in self.expected.items() if v})
            return False
