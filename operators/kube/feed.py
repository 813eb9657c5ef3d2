"""Feeding the shared tracker from kopf watch streams.

Only kopf's low-level event handlers are used: they cost no PATCH calls on the watched
objects (state-changing handlers would annotate every ResourceSlice and Pod).
"""

from __future__ import annotations

import asyncio
import contextlib
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
    "Gang": ("resource.draco.dev", "v1alpha1", "gangs"),
    # upstream's group API (v1beta1 in 1.37 behind GenericWorkload): watched where served.
    # Named by version: scheduling.k8s.io's preferred version (v1) has no podgroups.
    "PodGroup": ("scheduling.k8s.io", "v1beta1", "podgroups"),
}
# the versions tried, newest first, for kinds a server may not serve at all
OPTIONAL_VERSIONS = {"devicetaintrules": ("v1", "v1beta2", "v1alpha3")}
# kinds of a fixed version that a server may not serve: a 404 is "none", not a failure
MAYBE_SERVED = frozenset({"PodGroup"})
# the many-object kinds: fed by draco's own list+watch (kube/list_watch.py), not kopf
OWN_FEEDS = ("Pod", "ResourceClaim", "ResourceSlice")


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
        if gate is None or not gate.done.is_set():
            keys = seen.setdefault(kind, set())  # only the initial sync needs these keys
            if event.get("type") == "DELETED":
                keys.discard(ident)
            else:
                keys.add(ident)
        elif seen:
            seen.clear()
        if gate is not None:
            gate.observe(kind, body)

    group, _, plural = WATCHED[kind]
    feed.__name__ = f"feed_{plural}" + ("_k8s" if kind.endswith(".resource.k8s.io") else "")
    return feed


def register_feed(registry: kopf.OperatorRegistry, tracker: Tracker, kinds: Iterable[str],
                  gate: SyncGate | None = None) -> dict[str, set[tuple[str, str]]]:
    """Feed `kinds` into the tracker through kopf (those in OWN_FEEDS excepted: draco's own
    list+watch feeds them); returns the keys seen per kind until the initial sync is done
    (for the gate)."""
    seen: dict[str, set[tuple[str, str]]] = {}
    for kind in kinds:
        if kind in OWN_FEEDS:
            continue
        group, version, plural = WATCHED[kind]
        kopf.on.event(group=group, version=version or None, plural=plural, registry=registry)(
            feed_handler(tracker, kind, seen, gate))
    return seen


def retry_delay(attempt: int) -> float:
    """Seconds before listing a kind again after `attempt` failed lists (0-based)."""
    return float(min(30, 2 ** attempt))


class SyncGate:
    """Holds controllers back until kopf's initial listing reached the tracker.

    kopf's watch streams deliver the initial state object by object with no
    end-of-list marker; a controller that decided before all kinds arrived could see a
    rule but not yet its pods, or (the allocator) a device free whose claim it has not
    seen yet. Upstream waits for informer sync with no time limit; so does draco: each
    kind is listed once at startup (a failed list is retried with backoff) and the gate
    opens when the feed has delivered every object of those lists (objects deleted
    meanwhile are released when their DELETED event arrives). While it waits, /readyz
    and a warning every `warn_every` seconds say what is missing.
    """

    warn_every = 30.0
    recheck_after = 5.0  # seconds before listing again the kinds whose objects are still awaited

    def __init__(self) -> None:
        self.expected: dict[str, set[tuple[str, str]]] = {}
        self.failing: dict[str, str] = {}  # kind -> why its list failed, while it is retried
        self.held: set[str] = set()  # kinds whose own feed reports its first full list (Pods)
        self.primed = asyncio.Event()
        self.done = asyncio.Event()

    def hold(self, kind: str) -> None:
        """`kind` is listed by a feed of its own; the gate waits for its `release`."""
        self.held.add(kind)
        self.done.clear()

    def release(self, kind: str) -> None:
        self.held.discard(kind)
        self._check()

    def failing_list(self, kind: str, why: str | None) -> None:
        """Why `kind`'s own feed cannot list it (None: it can again), for readiness."""
        if why is None:
            self.failing.pop(kind, None)
        else:
            self.failing[kind] = why

    def observe(self, kind: str, body: Mapping[str, Any]) -> None:
        waiting = self.expected.get(kind)
        if waiting:
            meta = body.get("metadata")
            meta = meta if isinstance(meta, Mapping) else {}
            waiting.discard((str(meta.get("namespace") or ""), str(meta.get("name") or "")))
            self._check()

    def _check(self) -> None:
        if self.primed.is_set() and not self.held and not any(self.expected.values()):
            self.done.set()

    def missing(self) -> str:
        """What the gate still waits for, in words (readiness and the warning)."""
        parts = [f"cannot list {kind} ({why}; retrying)" for kind, why in sorted(self.failing.items())]
        waiting = {k: len(v) for k, v in sorted(self.expected.items()) if v}
        if waiting:
            parts.append(f"waiting for {waiting}")
        parts += [f"waiting for the first list of {kind}" for kind in sorted(self.held - self.failing.keys())]
        return "; ".join(parts) or "initial lists not done"

    async def prime(self, kinds: Iterable[str], client: Any, seen: Mapping[str, set[tuple[str, str]]],
                    delay: Callable[[int], float] = retry_delay) -> None:
        pending = [k for k in kinds if k not in self.held]
        attempt = 0
        while pending:
            failed = []
            for kind in pending:
                keys = await self._list(kind, client)
                if isinstance(keys, str):
                    failed.append(kind)
                    if self.failing.get(kind) != keys:
                        log.warning("cannot list for the initial sync; retrying", kind=kind, error=keys)
                    self.failing[kind] = keys
                    continue
                self.failing.pop(kind, None)
                if keys is not None:
                    self.expected[kind] = keys - seen.get(kind, set())
            pending = failed
            if pending:
                await asyncio.sleep(delay(attempt))
                attempt += 1
        self.primed.set()
        self._check()
        await self._forget_the_deleted(client, delay)

    async def _forget_the_deleted(self, client: Any, delay: Callable[[int], float]) -> None:
        """An object deleted after draco's list but before kopf's watch listed is never
        delivered, neither added nor deleted; so while objects are still awaited, list
        their kinds again and stop awaiting what the server no longer has."""
        attempt = 0
        awaited = self._awaited()
        while not self.done.is_set():
            # woken at once when the feed completes the sync, so this task never lingers
            with contextlib.suppress(TimeoutError):  # (asyncio.timeout: see kube/shell.py)
                async with asyncio.timeout(max(delay(attempt), self.recheck_after)):
                    await self.done.wait()
            if self.done.is_set():
                return
            attempt += 1
            if self._awaited() < awaited:  # the feed is still delivering: no relist yet
                awaited = self._awaited()  # (a list of 10,000 claims costs a second)
                continue
            for kind in [k for k, v in self.expected.items() if v]:
                keys = await self._list(kind, client)
                if isinstance(keys, set):
                    self.expected[kind] &= keys
            awaited = self._awaited()
            self._check()

    def _awaited(self) -> int:
        return sum(len(v) for v in self.expected.values())

    async def _list(self, kind: str, client: Any) -> set[tuple[str, str]] | str | None:
        """The keys of `kind`'s list; None when the server does not serve that kind; the
        reason as a string when the list failed."""
        group, version, plural = WATCHED[kind]
        try:
            if version:
                prefix = f"/apis/{group}/{version}" if group else f"/api/{version}"
                resp = await client.get(f"{prefix}/{plural}")
            else:  # a kind the server may not serve at all (upstream's rule before 1.37):
                # listed, not looked up, so missing RBAC shows as a 403 where it matters
                for candidate in OPTIONAL_VERSIONS[plural]:
                    resp = await client.get(f"/apis/{group}/{candidate}/{plural}")
                    if resp.status != 404:
                        break
                if resp.status == 404:
                    return None
        except Exception as exc:  # no credentials, a connection refused: retried like a 5xx
            return f"{type(exc).__name__}: {exc}"
        if resp.status == 404 and kind in MAYBE_SERVED:
            return None
        if resp.status == 404 and group == "resource.draco.dev":
            return "HTTP 404: draco's CRDs are not installed; kubectl apply -f crds/"
        if not resp.ok:
            return f"HTTP {resp.status}"
        items = (resp.body or {}).get("items") if isinstance(resp.body, Mapping) else None
        if not isinstance(items, list):
            return "the answer has no items list"
        return {((i.get("metadata") or {}).get("namespace") or "", (i.get("metadata") or {}).get("name") or "")
                for i in items if isinstance(i, Mapping)}

    async def wait(self, timeout: float | None = None) -> bool:
        """Until the initial sync is done (True), or `timeout` seconds (False); warns
        every `warn_every` seconds meanwhile."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while not self.done.is_set():
            left = self.warn_every if deadline is None else min(self.warn_every, deadline - loop.time())
            try:
                async with asyncio.timeout(max(left, 0)):  # not wait_for: see kube/shell.py
                    await self.done.wait()
            except TimeoutError:
                if deadline is not None and loop.time() >= deadline:
                    log.warning("initial sync incomplete", missing=self.missing())
                    return False
                log.warning("initial sync incomplete; the controllers wait for it", missing=self.missing())
        return True
