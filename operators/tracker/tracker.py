"""The shared, incrementally maintained state all of draco's controllers read.

Every index is keyed so that one event touches only what it names: a slice update
re-examines the devices of that slice (a pool generation change, the whole pool), a
claim update the devices of its allocation, a pod update its own claim references.
Counters in `stats` let tests assert the work done instead of timing it.

Not thread-safe: feed it from one thread (kopf's event loop) and read it there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, cast

from operators.model import (
    APIObject,
    Device,
    DeviceClass,
    DeviceID,
    ModelError,
    NamespacedName,
    ObjectRef,
    Pod,
    PoolID,
    ResourceClaim,
    ResourceSlice,
    parse_object,
    ref_of,
)
from operators.tracker.change import Change, ChangeBuilder
from operators.tracker.overlay import EventType, Overlay
from operators.tracker.pools import SliceIndex
from operators.tracker.stats import TrackerStats
from operators.tracker.usage import Moved, UsageIndex
from operators.tracker.views import Allocation, DeviceView, PoolStatus, compose

log = logging.getLogger(__name__)

BUILTIN_KINDS = frozenset({"ResourceSlice", "DeviceClass", "ResourceClaim", "Pod"})
Subscriber = Callable[[Change], None]


def _utcnow() -> datetime:
    return datetime.now(UTC)


class Tracker:
    def __init__(self, clock: Callable[[], datetime] = _utcnow) -> None:
        self.clock = clock
        self.stats = TrackerStats()
        self.errors: dict[ObjectRef, ModelError] = {}
        # devices
        self._slice_index = SliceIndex()
        self._slices = self._slice_index.slices
        self._pools = self._slice_index.pools
        self._driver_pools = self._slice_index.driver_pools
        self._published: dict[DeviceID, Device] = {}
        self._views: dict[DeviceID, DeviceView] = {}
        self._classes: dict[str, DeviceClass] = {}
        # usage: claims, pods, allocations (`_allocs` aliases the index's dict, which the
        # device side reads on every republish)
        self._usage = UsageIndex()
        self._allocs = self._usage.allocs
        # plumbing
        self._overlays: list[Overlay] = []
        self._overlay_kinds: dict[str, list[Overlay]] = {}
        self._subscribers: list[Subscriber] = []
        self._batch: ChangeBuilder | None = None

    # ------------------------------------------------------------------ feeding

    def now(self) -> datetime:
        return self.clock()

    def register_overlay(self, overlay: Overlay) -> None:
        """Add an overlay; its contributions apply after those registered earlier."""
        self._overlays.append(overlay)
        for kind in overlay.kinds:
            self._overlay_kinds.setdefault(kind, []).append(overlay)
        overlay.bind(self)
        if self._views:
            self.refresh(list(self._views))

    @property
    def overlays(self) -> tuple[Overlay, ...]:
        """The registered overlays, in composition order (views read their reports)."""
        return tuple(self._overlays)

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call `callback(change)` after every non-empty update; returns an unsubscriber."""
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)

        return unsubscribe

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Coalesce the notifications of many applies (an initial listing) into one."""
        if self._batch is not None:
            yield
            return
        self._batch = ChangeBuilder()
        try:
            yield
        finally:
            merged, self._batch = self._batch.build(), None
            self._notify(merged)

    def apply(self, event: Mapping[str, Any]) -> Change:
        """Feed one watch event `{"type": ADDED|MODIFIED|DELETED|None, "object": ...}`.

        `object` is a plain dict or an already parsed object. A `None` type (kopf's
        initial listing) counts as ADDED. Bad objects never raise: they are dropped from
        the state and reported in `Change.errors` and `self.errors`.
        """
        if not isinstance(event, Mapping) or "object" not in event:
            raise ValueError("an event needs an 'object'")
        etype = event.get("type") or "ADDED"
        if etype not in ("ADDED", "MODIFIED", "DELETED"):
            raise ValueError(f"unknown event type {etype!r}")
        self.stats.events += 1
        ch = ChangeBuilder()
        self._apply(cast(EventType, etype), event["object"], ch)
        change = ch.build()
        self._notify(change)
        return change

    def apply_all(self, events: Iterable[Mapping[str, Any]]) -> Change:
        """Apply many events with one notification; returns the merged change."""
        acc = ChangeBuilder()
        with self.batch():
            for ev in events:
                acc.merge(self.apply(ev))
        return acc.build()

    def refresh(self, ids: Iterable[DeviceID]) -> Change:
        """Recompose the given views (an overlay's state changed on its own)."""
        ch = ChangeBuilder()
        self._recompose(set(ids), ch)
        change = ch.build()
        self._notify(change)
        return change

    # ------------------------------------------------------------------ queries: devices

    def device(self, device_id: DeviceID) -> DeviceView | None:
        """The view of a published device, or of an allocated one whose slice is gone."""
        return self._views.get(device_id)

    def devices(self, *, include_unpublished: bool = False) -> Iterator[DeviceView]:
        for v in self._views.values():
            if include_unpublished or v.device is not None:
                yield v

    def device_ids(self) -> Iterable[DeviceID]:
        """Every device in the view: published plus allocated-but-unpublished."""
        return self._views.keys()

    def published_device(self, device_id: DeviceID) -> Device | None:
        """The device exactly as its driver published it (what patch filters see)."""
        return self._published.get(device_id)

    def published_devices(self) -> Iterable[Device]:
        return self._published.values()

    def pool_devices(self, pool_id: PoolID) -> list[DeviceView]:
        """Devices of the pool's newest generation, in slice-name then publish order."""
        st = self._pools.get(pool_id)
        if st is None:
            return []
        out = []
        for name in st.device_names_in_order():
            v = self._views.get(DeviceID(pool_id.driver, pool_id.pool, name))
            if v is not None:
                out.append(v)
        return out

    def pool_device_ids(self, pool_id: PoolID) -> list[DeviceID]:
        st = self._pools.get(pool_id)
        if st is None:
            return []
        return [DeviceID(pool_id.driver, pool_id.pool, n) for n in st.names]

    def pool(self, pool_id: PoolID) -> PoolStatus | None:
        st = self._pools.get(pool_id)
        return st.status() if st is not None else None

    def pools(self) -> list[PoolStatus]:
        return [self._pools[p].status() for p in sorted(self._pools)]

    def driver_pools(self, driver: str) -> list[PoolID]:
        return sorted(self._driver_pools.get(driver, ()))

    def resource_slice(self, name: str) -> ResourceSlice | None:
        return self._slices.get(name)

    def resource_slices(self) -> Iterable[ResourceSlice]:
        return self._slices.values()

    def device_class(self, name: str) -> DeviceClass | None:
        return self._classes.get(name)

    def device_classes(self) -> Iterable[DeviceClass]:
        return self._classes.values()

    # ------------------------------------------------------------------ queries: usage

    def claim(self, key: NamespacedName) -> ResourceClaim | None:
        return self._usage.claims.get(key)

    def claims(self) -> Iterable[ResourceClaim]:
        return self._usage.claims.values()

    def pod(self, key: NamespacedName) -> Pod | None:
        return self._usage.pods.get(key)

    def pods(self) -> Iterable[Pod]:
        return self._usage.pods.values()

    def allocations(self, device_id: DeviceID) -> tuple[Allocation, ...]:
        return self._usage.allocations(device_id)

    def allocated_device_ids(self) -> Iterable[DeviceID]:
        return self._usage.allocated_device_ids()

    def is_allocated(self, device_id: DeviceID, *, include_admin_access: bool = False) -> bool:
        """Whether a claim holds the device; admin-access allocations do not count unless
        asked, because they do not make a device unavailable to others."""
        return self._usage.is_allocated(device_id, include_admin_access)

    def claim_devices(self, key: NamespacedName) -> frozenset[DeviceID]:
        return self._usage.claim_devices.get(key, frozenset())

    def claims_of_pod(self, key: NamespacedName) -> tuple[NamespacedName, ...]:
        """Claims the pod uses: direct names, template-generated ones (from its status)
        and its extended-resource claim."""
        return self._usage.pod_claims.get(key, ())

    def pods_of_claim(self, key: NamespacedName) -> tuple[NamespacedName, ...]:
        """Pods reserved for the claim plus pods that reference it, sorted."""
        return self._usage.pods_of_claim(key)

    # ------------------------------------------------------------------ internals

    def _notify(self, change: Change) -> None:
        if change.empty:
            return
        if self._batch is not None:
            self._batch.merge(change)
            return
        self.stats.notifications += 1
        for cb in list(self._subscribers):
            try:
                cb(change)
            except Exception:  # a subscriber bug must not corrupt the tracker's caller
                self.stats.subscriber_errors += 1
                log.exception("tracker subscriber failed")

    def _apply(self, etype: EventType, obj: Any, ch: ChangeBuilder) -> None:
        kind = self._kind_of(obj)
        if kind in BUILTIN_KINDS:
            parsed = self._parse_builtin(etype, obj, kind, ch)
            if parsed is None:
                return
        elif kind in self._overlay_kinds:
            parsed = obj
        else:
            ref = ref_of(obj) if isinstance(obj, Mapping) else ObjectRef(kind, "", "")
            err = ModelError(ref, "kind", f"the tracker does not track kind {kind!r}")
            self._record_error(err, ch)
            return
        if kind == "ResourceSlice":
            self._on_slice(etype, parsed, ch)
        elif kind == "DeviceClass":
            self._on_class(etype, parsed, ch)
        elif kind == "ResourceClaim":
            self._on_claim(etype, parsed, ch)
        elif kind == "Pod":
            self._on_pod(etype, parsed, ch)
        for overlay in self._overlay_kinds.get(kind, ()):
            self._route_to_overlay(overlay, etype, parsed, ch)

    @staticmethod
    def _kind_of(obj: Any) -> str:
        kind = (
            obj.get("kind")
            if isinstance(obj, Mapping)
            else getattr(obj, "kind", type(obj).__name__)
        )
        return kind if isinstance(kind, str) else ""

    def _parse_builtin(self, etype: EventType, obj: Any, kind: str, ch: ChangeBuilder) -> Any:
        if not isinstance(obj, Mapping):
            return obj
        try:
            parsed = parse_object(obj, kind)
        except ModelError as err:
            ref = err.ref
            if etype == "DELETED":
                self.errors.pop(ref, None)  # gone anyway: nothing to report
            else:
                self._record_error(err, ch)
            # Drop what we knew: the object as it is now cannot be trusted.
            previous = self._known(kind, ref)
            if previous is None:
                return None
            if kind == "ResourceSlice":
                self._remove_slice(ref.name, ch)
            elif kind == "DeviceClass":
                self._remove_class(ref.name, ch)
            elif kind == "ResourceClaim":
                self._remove_claim(NamespacedName(ref.namespace, ref.name), ch)
            elif kind == "Pod":
                self._usage.remove_pod(NamespacedName(ref.namespace, ref.name), ch)
            for overlay in self._overlay_kinds.get(kind, ()):
                self._route_to_overlay(overlay, "DELETED", previous, ch)
            return None
        self.errors.pop(ObjectRef(kind, parsed.meta.namespace, parsed.meta.name), None)
        return parsed

    def _known(self, kind: str, ref: ObjectRef) -> APIObject | None:
        if kind == "ResourceSlice":
            return self._slices.get(ref.name)
        if kind == "DeviceClass":
            return self._classes.get(ref.name)
        if kind == "ResourceClaim":
            return self._usage.claims.get(NamespacedName(ref.namespace, ref.name))
        if kind == "Pod":
            return self._usage.pods.get(NamespacedName(ref.namespace, ref.name))
        return None

    def _record_error(self, err: ModelError, ch: ChangeBuilder) -> None:
        self.stats.parse_errors += 1
        self.errors[err.ref] = err
        ch.errors.append(err)

    def _route_to_overlay(
        self, overlay: Overlay, etype: EventType, obj: Any, ch: ChangeBuilder
    ) -> None:
        self.stats.overlay_calls += 1
        try:
            ids = set(overlay.apply(etype, obj))
        except ModelError as err:
            self._record_error(err, ch)
            return
        if isinstance(obj, Mapping):
            ref: ObjectRef | None = ref_of(obj)
        else:
            meta = getattr(obj, "meta", None)
            ref = (
                ObjectRef(self._kind_of(obj), meta.namespace, meta.name)
                if meta is not None
                else None
            )
        if ref is not None:
            ch.objects.add(ref)
            self.errors.pop(ref, None)
        if ids:
            self._recompose(ids, ch)

    # -- device classes

    def _on_class(self, etype: EventType, dc: DeviceClass, ch: ChangeBuilder) -> None:
        self.stats.class_updates += 1
        if etype == "DELETED":
            self._remove_class(dc.meta.name, ch)
            return
        if self._classes.get(dc.meta.name) != dc:
            self._classes[dc.meta.name] = dc
            ch.device_classes.add(dc.meta.name)

    def _remove_class(self, name: str, ch: ChangeBuilder) -> None:
        if self._classes.pop(name, None) is not None:
            ch.device_classes.add(name)

    # -- slices and devices

    def _on_slice(self, etype: EventType, s: ResourceSlice, ch: ChangeBuilder) -> None:
        self.stats.slice_updates += 1
        if etype == "DELETED":
            self._remove_slice(s.meta.name, ch)
            return
        candidates = self._slice_index.put(s, ch)
        if candidates:
            self._republish(candidates, ch)

    def _remove_slice(self, name: str, ch: ChangeBuilder) -> None:
        candidates = self._slice_index.remove(name, ch)
        if candidates:
            self._republish(candidates, ch)

    def _republish(self, candidates: set[DeviceID], ch: ChangeBuilder) -> None:
        """Settle the published device of each candidate and tell overlays what moved."""
        published = self._published
        pools = self._pools
        added: set[DeviceID] = set()
        modified: set[DeviceID] = set()
        removed: set[DeviceID] = set()
        self.stats.device_updates += len(candidates)
        for did in candidates:
            st = pools.get(PoolID(did.driver, did.pool))
            new = st.winner(did.device) if st is not None else None
            old = published.get(did)
            if new is None:
                if old is None:
                    continue
                del published[did]
                # An allocated device stays in the universe (as unpublished).
                (modified if did in self._allocs else removed).add(did)
            elif old is None:
                published[did] = new
                (modified if did in self._views else added).add(did)
            elif old is not new and old != new:
                published[did] = new
                modified.add(did)
            else:
                published[did] = new
        if added or modified or removed:
            self._universe_changed(added, modified, removed, ch)

    def _universe_changed(
        self,
        added: set[DeviceID],
        modified: set[DeviceID],
        removed: set[DeviceID],
        ch: ChangeBuilder,
    ) -> None:
        todo = added | modified | removed
        if self._overlays:
            fa, fm, fr = frozenset(added), frozenset(modified), frozenset(removed)
            for overlay in self._overlays:
                self.stats.overlay_calls += 1
                todo.update(overlay.devices_changed(fa, fm, fr))
        self._recompose(todo, ch)

    def _recompose(self, ids: set[DeviceID], ch: ChangeBuilder) -> None:
        views = self._views
        overlays = self._overlays
        for did in ids:
            device = self._published.get(did)
            if device is None and did not in self._allocs:
                if views.pop(did, None) is not None:
                    ch.devices.add(did)
                continue
            self.stats.view_updates += 1
            contributions = []
            for o in overlays:
                c = o.contribution(did)
                if c is not None and not c.empty:
                    contributions.append(c)
            view = compose(did, device, contributions)
            old = views.get(did)
            if old is None or old != view:
                views[did] = view
                ch.devices.add(did)

    # -- claims and pods (the index lives in `usage`; only the universe is settled here)

    def _on_claim(self, etype: EventType, claim: ResourceClaim, ch: ChangeBuilder) -> None:
        self.stats.claim_updates += 1
        if etype == "DELETED":
            self._remove_claim(claim.meta.key, ch)
            return
        self._allocations_moved(self._usage.put_claim(claim, ch), ch)

    def _remove_claim(self, key: NamespacedName, ch: ChangeBuilder) -> None:
        self._allocations_moved(self._usage.remove_claim(key, ch), ch)

    def _allocations_moved(self, moved: Moved, ch: ChangeBuilder) -> None:
        """Unpublished devices enter or leave the universe with their first/last allocation."""
        entered, left = moved
        if not entered and not left:
            return
        published = self._published
        added = {d for d in entered if d not in published}
        removed = {d for d in left if d not in published}
        if added or removed:
            self._universe_changed(added, set(), removed, ch)

    def _on_pod(self, etype: EventType, pod: Pod, ch: ChangeBuilder) -> None:
        self.stats.pod_updates += 1
        if etype == "DELETED":
            self._usage.remove_pod(pod.meta.key, ch)
        else:
            self._usage.put_pod(pod, ch)

__all__ = ["APIObject", "BUILTIN_KINDS", "Subscriber", "Tracker", "TrackerStats"]
