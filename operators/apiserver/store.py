"""The embedded API server's object store: versions, concurrency, watches.

One global resourceVersion counter orders every write, as etcd's revision does, so
watches deliver changes in resourceVersion order and can resume from any version
still in the history window. Stored objects are never mutated in place: a write
stores a new dict, so readers and watch queues can hold references without copying.
"""

from __future__ import annotations

import asyncio
import copy
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from operators.apiserver.errors import APIError, already_exists, conflict, not_found
from operators.apiserver.registry import ResourceType

Predicate = Callable[[Mapping[str, Any]], bool]
HISTORY = 100_000  # events kept for watch resumption; older versions get 410 Gone
WATCH_QUEUE = 50_000  # a watcher this far behind is closed, never blocking writers


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Watcher:
    key: tuple[str, str]
    namespace: str | None
    predicate: Predicate
    queue: asyncio.Queue[tuple[str, dict[str, Any]] | None] = field(
        default_factory=lambda: asyncio.Queue(maxsize=WATCH_QUEUE)
    )
    closed: bool = False

    def offer(self, etype: str, obj: dict[str, Any]) -> None:
        if self.closed:
            return
        try:
            self.queue.put_nowait((etype, obj))
        except asyncio.QueueFull:
            self.closed = True  # the client re-lists, exactly as with kube-apiserver


def _spec_part(obj: Mapping[str, Any], has_status: bool) -> dict[str, Any]:
    skip = {"metadata", "status"} if has_status else {"metadata"}
    return {k: v for k, v in obj.items() if k not in skip}


class Store:
    def __init__(self) -> None:
        self.rv = 1
        self.objects: dict[tuple[str, str], dict[tuple[str, str], dict[str, Any]]] = {}
        self.history: deque[tuple[int, tuple[str, str], str, dict[str, Any]]] = deque(
            maxlen=HISTORY
        )
        self.watchers: list[Watcher] = []
        self.listeners: list[Callable[[str, ResourceType, dict[str, Any], dict[str, Any] | None], None]] = []

    # -- reads

    def bucket(self, rt: ResourceType) -> dict[tuple[str, str], dict[str, Any]]:
        return self.objects.setdefault(rt.key, {})

    def get(self, rt: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        obj = self.bucket(rt).get((namespace if rt.namespaced else "", name))
        if obj is None:
            raise not_found(rt.group, rt.plural, name)
        return obj

    def find(self, rt: ResourceType, namespace: str, name: str) -> dict[str, Any] | None:
        return self.bucket(rt).get((namespace if rt.namespaced else "", name))

    def iter(self, rt: ResourceType, namespace: str | None) -> Iterator[tuple[tuple[str, str], dict[str, Any]]]:
        bucket = self.bucket(rt)
        for k in sorted(bucket):
            if namespace and rt.namespaced and k[0] != namespace:
                continue
            yield k, bucket[k]

    @property
    def oldest_rv(self) -> int:
        return self.history[0][0] if self.history else self.rv

    # -- writes

    def _next_rv(self) -> str:
        self.rv += 1
        return str(self.rv)

    def _publish(self, rt: ResourceType, etype: str, obj: dict[str, Any],
                 old: dict[str, Any] | None) -> None:
        rv = int(obj["metadata"]["resourceVersion"])
        self.history.append((rv, rt.key, etype, obj))
        ns = obj["metadata"].get("namespace")
        for w in self.watchers:
            if w.key != rt.key or (w.namespace and w.namespace != ns):
                continue
            if etype == "MODIFIED":
                now_ok, was_ok = w.predicate(obj), old is not None and w.predicate(old)
                if now_ok and was_ok:
                    w.offer("MODIFIED", obj)
                elif now_ok:
                    w.offer("ADDED", obj)
                elif was_ok:
                    w.offer("DELETED", obj)
            elif w.predicate(obj):
                w.offer(etype, obj)
        for listener in self.listeners:
            listener(etype, rt, obj, old)

    def create(self, rt: ResourceType, namespace: str, obj: dict[str, Any], *,
               dry_run: bool = False) -> dict[str, Any]:
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        if not meta.get("name"):
            if meta.get("generateName"):
                meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
            else:
                raise APIError(422, "name or generateName is required", reason="Invalid",
                               details={"kind": rt.kind, "causes": [{
                                   "reason": "FieldValueRequired", "message": "Required value",
                                   "field": "metadata.name"}]})
        key = (namespace if rt.namespaced else "", meta["name"])
        if rt.namespaced:
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        if key in self.bucket(rt):
            raise already_exists(rt.group, rt.plural, meta["name"])
        obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        meta["generation"] = 1
        for stale in ("deletionTimestamp", "deletionGracePeriodSeconds", "resourceVersion"):
            meta.pop(stale, None)
        if dry_run:
            meta["resourceVersion"] = str(self.rv)
            return obj
        meta["resourceVersion"] = self._next_rv()
        self.bucket(rt)[key] = obj
        self._publish(rt, "ADDED", obj, None)
        return obj

    def update(self, rt: ResourceType, namespace: str, name: str, new: dict[str, Any], *,
               subresource: str = "", dry_run: bool = False,
               check_rv: bool = True) -> dict[str, Any]:
        old = self.get(rt, namespace, name)
        new = copy.deepcopy(new)
        meta = new.setdefault("metadata", {})
        if meta.get("name", name) != name:
            raise APIError(400, f'the name of the object ({meta.get("name")}) does not match '
                                f'the name on the URL ({name})')
        want = meta.get("resourceVersion")
        if check_rv and want and want != old["metadata"]["resourceVersion"]:
            raise conflict(rt.group, rt.plural, name,
                           "the object has been modified; please apply your changes to the "
                           "latest version and try again")
        old_meta = old["metadata"]
        if meta.get("uid") and meta["uid"] != old_meta.get("uid"):
            raise conflict(rt.group, rt.plural, name,
                           f"Precondition failed: UID in precondition: {meta['uid']}, "
                           f"UID in object meta: {old_meta.get('uid')}")
        if rt.has_status and subresource == "status":
            merged = {k: v for k, v in old.items() if k != "status"}
            if "status" in new:
                merged["status"] = new["status"]
            merged["metadata"] = dict(old_meta)
            new = merged
        elif rt.has_status:
            if "status" in old:
                new["status"] = old["status"]
            else:
                new.pop("status", None)
        meta = new["metadata"]
        for fixed in ("uid", "creationTimestamp", "namespace", "deletionTimestamp",
                      "deletionGracePeriodSeconds", "generation"):
            if fixed in old_meta:
                meta[fixed] = old_meta[fixed]
            else:
                meta.pop(fixed, None)
        meta["name"] = name
        new["apiVersion"], new["kind"] = rt.api_version, rt.kind
        if _spec_part(new, rt.has_status) != _spec_part(old, rt.has_status):
            meta["generation"] = int(old_meta.get("generation", 1)) + 1
        if old_meta.get("deletionTimestamp") and not meta.get("finalizers"):
            if dry_run:
                return new
            return self._remove(rt, namespace, name, new)
        if dry_run:
            return new
        if {**new, "metadata": {**meta, "resourceVersion": old_meta["resourceVersion"]}} == old:
            return old  # a no-op write keeps the resourceVersion, as upstream does
        meta["resourceVersion"] = self._next_rv()
        self.bucket(rt)[(namespace if rt.namespaced else "", name)] = new
        self._publish(rt, "MODIFIED", new, old)
        return new

    def delete(self, rt: ResourceType, namespace: str, name: str,
               preconditions: Mapping[str, Any] | None = None, *,
               dry_run: bool = False) -> dict[str, Any]:
        old = self.get(rt, namespace, name)
        meta = old["metadata"]
        pre = preconditions or {}
        if pre.get("uid") and pre["uid"] != meta.get("uid"):
            raise conflict(rt.group, rt.plural, name,
                           f"Precondition failed: UID in precondition: {pre['uid']}, "
                           f"UID in object meta: {meta.get('uid')}")
        if pre.get("resourceVersion") and pre["resourceVersion"] != meta.get("resourceVersion"):
            raise conflict(rt.group, rt.plural, name,
                           f"Precondition failed: ResourceVersion in precondition: "
                           f"{pre['resourceVersion']}, ResourceVersion in object meta: "
                           f"{meta.get('resourceVersion')}")
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp"):
                return old
            new = copy.deepcopy(old)
            new["metadata"]["deletionTimestamp"] = now_rfc3339()
            new["metadata"]["deletionGracePeriodSeconds"] = 0
            if dry_run:
                return new
            new["metadata"]["resourceVersion"] = self._next_rv()
            self.bucket(rt)[(namespace if rt.namespaced else "", name)] = new
            self._publish(rt, "MODIFIED", new, old)
            return new
        if dry_run:
            return old
        return self._remove(rt, namespace, name, old)

    def _remove(self, rt: ResourceType, namespace: str, name: str,
                last: dict[str, Any]) -> dict[str, Any]:
        key = (namespace if rt.namespaced else "", name)
        old = self.bucket(rt).pop(key)
        gone = copy.copy(last)
        gone["metadata"] = {**last["metadata"], "resourceVersion": self._next_rv()}
        self._publish(rt, "DELETED", gone, old)
        return gone

    def drop_all(self, rt: ResourceType, namespace: str | None = None) -> None:
        for key, obj in list(self.iter(rt, namespace)):
            self._remove(rt, key[0], key[1], obj)

    # -- watches

    def watch(self, rt: ResourceType, namespace: str | None, predicate: Predicate,
              since: int | None) -> Watcher:
        """A watcher primed with history after `since` (or the current state if None)."""
        if since is not None and since < self.oldest_rv - 1 and since < self.rv:
            raise APIError(410, f"too old resource version: {since} ({self.oldest_rv - 1})",
                           reason="Expired")
        w = Watcher(rt.key, namespace if rt.namespaced else None, predicate)
        if since is None:
            for _, obj in self.iter(rt, namespace):
                if predicate(obj):
                    w.offer("ADDED", obj)
        else:
            for rv, key, etype, obj in self.history:
                if rv <= since or key != rt.key:
                    continue
                if w.namespace and obj["metadata"].get("namespace") != w.namespace:
                    continue
                if predicate(obj):
                    w.offer(etype, obj)
        self.watchers.append(w)
        return w

    def unwatch(self, w: Watcher) -> None:
        if w in self.watchers:
            self.watchers.remove(w)
