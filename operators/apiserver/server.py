"""The embedded Kubernetes API server: HTTP routing over the store and registry.

It behaves like kube-apiserver wherever draco, kopf and kubectl depend on it:
discovery, OpenAPI v3 for kubectl's validation handshake, list/watch with selectors,
paging and resumption, optimistic concurrency, status subresources, finalizers, CRDs
with schema validation, defaulting and printer columns, the pod eviction subresource,
and pod-update validation.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import Callable
from typing import Any

from aiohttp import web

from operators.apiserver import listoptions, openapi, openapi_v2, tables
from operators.apiserver.admission import Admission
from operators.apiserver.errors import APIError, not_found
from operators.apiserver.patching import PatchError
from operators.apiserver.registry import Registry, ResourceType, crd_types
from operators.apiserver.selectors import field_selector, label_selector
from operators.apiserver.store import Store

VERSION = {
    "major": "1", "minor": "34", "gitVersion": "v1.34.0-draco", "gitCommit": "",
    "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "python",
    "compiler": "cpython", "platform": "linux/amd64",
}
BOOKMARK_EVERY = 5.0
NAMESPACE_SUBRESOURCES = {"status", "finalize"}


def _json(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=json.dumps(body, separators=(",", ":")).encode(), status=status,
                        content_type="application/json")


def _error(err: APIError) -> web.Response:
    return _json(err.status(), err.code)


class APIServer:
    """One in-memory cluster; `app` is the aiohttp application serving it."""

    def __init__(self, crds: list[dict[str, Any]] | None = None) -> None:
        self.registry = Registry.with_builtins()
        self.store = Store()
        self.admission = Admission(self.store, self.registry)
        self.openapi_generation = 1
        for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
            self.store.create(self.registry.get("", "v1", "namespaces"),  # type: ignore[arg-type]
                              "", {"metadata": {"name": ns}, "status": {"phase": "Active"}})
        for crd in crds or []:
            self.apply_crd(crd)
        self.app = web.Application(client_max_size=64 * 1024 * 1024)
        self.app.router.add_route("*", "/{tail:.*}", self.dispatch)

    # -- CRDs

    def apply_crd(self, crd: dict[str, Any]) -> dict[str, Any]:
        """Create or replace a CRD from a manifest (used for draco's built-in CRDs)."""
        rt = self.registry.get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        assert rt is not None
        name = crd.get("metadata", {}).get("name", "")
        existing = self.store.find(rt, "", name)
        if existing is None:
            obj = self.store.create(rt, "", crd)
        else:
            obj = self.store.update(rt, "", name, {**crd, "metadata": {
                **crd.get("metadata", {}), "resourceVersion": existing["metadata"]["resourceVersion"]}})
        return self._install_crd(obj)

    def _install_crd(self, crd: dict[str, Any]) -> dict[str, Any]:
        spec = crd.get("spec") or {}
        group, plural = spec.get("group", ""), (spec.get("names") or {}).get("plural", "")
        self.registry.remove_group_plural(group, plural)
        for rt in crd_types(crd, self.admission.schema_factory):
            self.registry.add(rt)
        self.openapi_generation += 1
        names = spec.get("names") or {}
        status = {
            "acceptedNames": names,
            "storedVersions": [v["name"] for v in spec.get("versions") or [] if v.get("storage")],
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                 "message": "no conflicts found", "lastTransitionTime": crd["metadata"]["creationTimestamp"]},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                 "message": "the initial names have been accepted",
                 "lastTransitionTime": crd["metadata"]["creationTimestamp"]},
            ],
        }
        if crd.get("status") == status:
            return crd
        rt_crd = self.registry.get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        assert rt_crd is not None
        return self.store.update(rt_crd, "", crd["metadata"]["name"], {**crd, "status": status},
                                 subresource="status", check_rv=False)

    def _uninstall_crd(self, crd: dict[str, Any]) -> None:
        spec = crd.get("spec") or {}
        group, plural = spec.get("group", ""), (spec.get("names") or {}).get("plural", "")
        for rt in [rt for rt in self.registry.types.values() if rt.group == group and rt.plural == plural]:
            self.store.drop_all(rt)
            break
        self.registry.remove_group_plural(group, plural)
        self.openapi_generation += 1

    # -- routing

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        try:
            return await self._dispatch(request)
        except APIError as err:
            return _error(err)
        except (ConnectionResetError, asyncio.CancelledError):
            raise
        except Exception as exc:  # noqa: BLE001 - a server bug answers 500, never a hang
            return _error(APIError(500, f"internal error: {type(exc).__name__}: {exc}"))

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/")
        segs = [s for s in path.split("/") if s]
        if path in ("/healthz", "/readyz", "/livez"):
            return web.Response(text="ok")
        if path == "/version":
            return _json(VERSION)
        if segs[:1] == ["openapi"]:
            return self._openapi(request, segs)
        if path == "/api":
            host = request.host
            return _json({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": host}]})
        if path == "/apis":
            return _json(self._group_list())
        if segs[:1] == ["api"] and len(segs) >= 2:
            group, version, rest = "", segs[1], segs[2:]
        elif segs[:1] == ["apis"] and len(segs) >= 2:
            if len(segs) == 2:
                g = self._group_list()["groups"]
                found = [x for x in g if x["name"] == segs[1]]
                if not found:
                    raise APIError(404, "the server could not find the requested resource")
                return _json({"kind": "APIGroup", "apiVersion": "v1", **found[0]})
            group, version, rest = segs[1], segs[2], segs[3:]
        else:
            raise APIError(404, "the server could not find the requested resource")
        if not rest:
            return self._resource_list(group, version)
        namespace = ""
        if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in NAMESPACE_SUBRESOURCES:
            namespace, rest = rest[1], rest[2:]
        plural = rest[0]
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        rt = self.registry.get(group, version, plural)
        if rt is None or len(rest) > 3 or (sub and sub not in rt.subresources):
            raise APIError(404, "the server could not find the requested resource")
        if rt.namespaced and name and not namespace:
            raise APIError(404, "the server could not find the requested resource")
        return await self._resource(request, rt, namespace, name, sub)

    def _group_list(self) -> dict[str, Any]:
        groups = []
        for g, versions in sorted(self.registry.groups().items()):
            vs = [{"groupVersion": f"{g}/{v}", "version": v} for v in versions]
            groups.append({"name": g, "versions": vs, "preferredVersion": vs[0]})
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    def _resource_list(self, group: str, version: str) -> web.Response:
        rts = self.registry.in_group_version(group, version)
        if not rts:
            raise APIError(404, "the server could not find the requested resource")
        resources = [r for rt in sorted(rts, key=lambda r: r.plural) for r in rt.discovery()]
        return _json({"kind": "APIResourceList", "apiVersion": "v1",
                      "groupVersion": f"{group}/{version}" if group else version,
                      "resources": resources})

    def _openapi(self, request: web.Request, segs: list[str]) -> web.Response:
        if segs == ["openapi", "v2"]:
            doc = openapi.swagger_v2(self.registry)
            if openapi_v2.wants_protobuf(request.headers.get("Accept", "")):
                return web.Response(body=openapi_v2.document(doc), content_type=openapi_v2.PROTOBUF)
            return _json(doc)
        if segs == ["openapi", "v3"]:
            return _json(openapi.root(self.registry, self.openapi_generation))
        if len(segs) >= 4 and segs[1] == "v3":
            rest = segs[2:]
            group, version = ("", rest[1]) if rest[0] == "api" else (rest[1], rest[2] if len(rest) > 2 else "")
            gv_doc = openapi.group_version(self.registry, group, version)
            if gv_doc is not None:
                return _json(gv_doc)
        raise APIError(404, "the server could not find the requested resource")

    # -- resources

    async def _resource(self, request: web.Request, rt: ResourceType, namespace: str,
                        name: str, sub: str) -> web.StreamResponse:
        q = request.query
        method = request.method
        dry_run = q.get("dryRun") == "All"
        if method == "GET":
            if not name:
                if q.get("watch") in ("1", "true"):
                    return await self._watch(request, rt, namespace)
                return self._list(request, rt, namespace)
            obj = self.store.get(rt, namespace, name)
            if self._wants_table(request):
                return _json(tables.table(rt, [obj], {"resourceVersion": obj["metadata"]["resourceVersion"]}))
            return _json(obj)
        if method == "POST":
            body = await self._body(request)
            if sub == "eviction":
                return _json(self.admission.evict(rt, namespace, name, body, dry_run), 201)
            if name:
                raise APIError(405, "the server does not allow this method on the requested resource")
            if rt.namespaced:
                self._require_namespace(namespace)
            obj = self.admission.prepare_create(rt, namespace, body, q.get("fieldValidation", ""))
            created = self.store.create(rt, namespace, obj, dry_run=dry_run)
            if rt.plural == "customresourcedefinitions" and not dry_run:
                created = self._install_crd(created)
            return _json(created, 201)
        if method == "PUT":
            if not name:
                raise APIError(405, "the server does not allow this method on the requested resource")
            body = await self._body(request)
            return _json(self._update(rt, namespace, name, body, sub, dry_run, q.get("fieldValidation", "")))
        if method == "PATCH":
            if not name:
                raise APIError(405, "the server does not allow this method on the requested resource")
            ctype = request.content_type
            raw = await request.read()
            try:
                patch = json.loads(raw or b"null")
            except json.JSONDecodeError as exc:
                raise APIError(400, f"error decoding patch: {exc}") from None
            current = self.store.get(rt, namespace, name)
            try:
                new = self.admission.apply_patch(current, patch, ctype, rt)
            except PatchError as exc:
                raise APIError(422 if ctype == "application/json-patch+json" else 400,
                               str(exc)) from None
            check_rv = bool((patch or {}).get("metadata", {}).get("resourceVersion")) if isinstance(patch, dict) else False
            if not check_rv:
                new.setdefault("metadata", {})["resourceVersion"] = current["metadata"]["resourceVersion"]
            return _json(self._update(rt, namespace, name, new, sub, dry_run, q.get("fieldValidation", "")))
        if method == "DELETE":
            body = await self._body(request, optional=True)
            if not name:
                return _json(self._delete_collection(request, rt, namespace, dry_run))
            pre = (body or {}).get("preconditions") or {}
            deleted = self._delete(rt, namespace, name, pre, dry_run)
            return _json(deleted)
        raise APIError(405, "the server does not allow this method on the requested resource")

    def _update(self, rt: ResourceType, namespace: str, name: str, body: dict[str, Any],
                sub: str, dry_run: bool, field_validation: str) -> dict[str, Any]:
        old = self.store.get(rt, namespace, name)
        if not isinstance(body, dict):
            raise APIError(400, "the request body must be a JSON object")
        body_meta = body.get("metadata") or {}
        if body_meta.get("namespace") and rt.namespaced and body_meta["namespace"] != namespace:
            raise APIError(400, "the namespace of the provided object does not match the namespace sent on the request")
        new = self.admission.prepare_update(rt, old, body, sub, field_validation)
        updated = self.store.update(rt, namespace, name, new, subresource=sub, dry_run=dry_run)
        if rt.plural == "customresourcedefinitions" and not dry_run and updated.get("metadata", {}).get("uid") and self.store.find(rt, "", name) is not None and not sub:
            updated = self._install_crd(updated)
        return updated

    def _delete(self, rt: ResourceType, namespace: str, name: str, pre: dict[str, Any],
                dry_run: bool) -> dict[str, Any]:
        obj = self.store.get(rt, namespace, name)
        result = self.store.delete(rt, namespace, name, pre, dry_run=dry_run)
        if dry_run:
            return result
        if rt.plural == "customresourcedefinitions" and self.store.find(rt, "", name) is None:
            self._uninstall_crd(obj)
        if rt.plural == "namespaces" and self.store.find(rt, "", name) is None:
            for other in list(self.registry.types.values()):
                if other.namespaced:
                    self.store.drop_all(other, name)
        return result

    def _delete_collection(self, request: web.Request, rt: ResourceType, namespace: str,
                           dry_run: bool) -> dict[str, Any]:
        lp = label_selector(request.query.get("labelSelector"))
        fp = field_selector(request.query.get("fieldSelector"), rt.plural, rt.crd)
        items = [obj for _, obj in self.store.iter(rt, namespace or None) if lp(obj) and fp(obj)]
        for obj in items:
            m = obj["metadata"]
            with contextlib.suppress(APIError):
                self._delete(rt, m.get("namespace", ""), m["name"], {}, dry_run)
        return {"kind": rt.list_kind, "apiVersion": rt.api_version,
                "metadata": {"resourceVersion": str(self.store.rv)}, "items": items}

    def _require_namespace(self, namespace: str) -> None:
        ns_rt = self.registry.get("", "v1", "namespaces")
        assert ns_rt is not None
        ns = self.store.find(ns_rt, "", namespace)
        if ns is None:
            raise not_found("", "namespaces", namespace)
        if ns["metadata"].get("deletionTimestamp"):
            raise APIError(403, f'unable to create new content in namespace {namespace} because it is being terminated',
                           reason="Forbidden")

    @staticmethod
    async def _body(request: web.Request, optional: bool = False) -> Any:
        raw = await request.read()
        if not raw.strip():
            if optional:
                return None
            raise APIError(400, "the request body is empty")
        ctype = request.content_type
        try:
            if ctype in ("application/yaml", "application/apply-patch+yaml"):
                import yaml

                return yaml.safe_load(raw)
            body = json.loads(raw)
        except (json.JSONDecodeError, ValueError) as exc:
            raise APIError(400, f"the object provided is unrecognized (must be JSON): {exc}") from None
        if not isinstance(body, dict):
            raise APIError(400, "the object provided is unrecognized: expected a JSON object")
        return body

    @staticmethod
    def _wants_table(request: web.Request) -> bool:
        accept = request.headers.get("Accept", "")
        first = accept.split(",")[0]
        return "as=Table" in first

    def _list(self, request: web.Request, rt: ResourceType, namespace: str) -> web.Response:
        q = request.query
        listoptions.check_list(q)
        lp = label_selector(q.get("labelSelector"))
        fp = field_selector(q.get("fieldSelector"), rt.plural, rt.crd)
        limit = int(q.get("limit", "0") or 0)
        start: tuple[str, str] | None = None
        list_rv = str(self.store.rv)
        if q.get("continue"):
            try:
                token = json.loads(base64.urlsafe_b64decode(q["continue"].encode()))
                start = (token["ns"], token["name"])
                list_rv = token["rv"]
            except (ValueError, KeyError, TypeError):
                raise APIError(400, "continue key is not valid: incorrect encoded start resourceVersion") from None
        items: list[dict[str, Any]] = []
        cont = ""
        remaining = 0
        for key, obj in self.store.iter(rt, namespace or None):
            if start is not None and key <= start:
                continue
            if not (lp(obj) and fp(obj)):
                continue
            if limit and len(items) >= limit:
                remaining += 1
                continue
            items.append(obj)
        if remaining:
            last = items[-1]["metadata"]
            cont = base64.urlsafe_b64encode(json.dumps({
                "ns": last.get("namespace", "") if rt.namespaced else "", "name": last["name"], "rv": list_rv,
            }).encode()).decode()
        meta: dict[str, Any] = {"resourceVersion": list_rv}
        if cont:
            meta["continue"] = cont
            meta["remainingItemCount"] = remaining
        if self._wants_table(request):
            return _json(tables.table(rt, items, meta))
        body = {"kind": rt.list_kind, "apiVersion": rt.api_version, "metadata": meta, "items": items}
        return web.Response(body=json.dumps(body, separators=(",", ":")).encode(),
                            content_type="application/json")

    async def _watch(self, request: web.Request, rt: ResourceType, namespace: str) -> web.StreamResponse:
        q = request.query
        lp = label_selector(q.get("labelSelector"))
        fp = field_selector(q.get("fieldSelector"), rt.plural, rt.crd)
        opts = listoptions.watch_options(q)
        rv_text = opts.resource_version
        since: int | None
        try:
            since = int(rv_text) if rv_text else 0
        except ValueError:
            raise APIError(400, f"invalid resource version: {rv_text}") from None
        too_new: APIError | None = None
        if since > self.store.rv and opts.send_initial_events:
            # upstream waits (3 s) for its cache to catch up, then ends the stream with this
            too_new = APIError(504, f"Timeout: Too large resource version: {since}, current: {self.store.rv}",
                               reason="Timeout", details={"causes": [
                                   {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                                   "retryAfterSeconds": 1})
        if opts.send_initial_events:
            since = None  # the current state, as ADDED events
        elif since == 0:
            since = self.store.rv  # from now on
        timeout = float(q.get("timeoutSeconds", "0") or 0) or 1800.0
        bookmarks = opts.allow_bookmarks
        resp = web.StreamResponse(headers={"Content-Type": "application/json",
                                           "Transfer-Encoding": "chunked"})
        table = self._wants_table(request)
        try:
            if too_new is not None:
                raise too_new
            watcher = self.store.watch(rt, namespace or None, lambda o: lp(o) and fp(o), since)
        except APIError as err:
            await resp.prepare(request)
            await resp.write(json.dumps({"type": "ERROR", "object": err.status()}).encode() + b"\n")
            return resp
        if opts.watch_list:
            watcher.offer("BOOKMARK", {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": {
                "resourceVersion": str(self.store.rv),
                "annotations": {listoptions.INITIAL_EVENTS_END: "true"}}})
        await resp.prepare(request)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            while True:
                left = deadline - loop.time()
                if left <= 0 or watcher.closed and watcher.queue.empty():
                    break
                try:
                    # asyncio.timeout: Python 3.11's wait_for can swallow a cancellation
                    # (a client gone) that arrives with an item, and the watch lives on
                    async with asyncio.timeout(min(left, BOOKMARK_EVERY)):
                        item = await watcher.queue.get()
                except TimeoutError:
                    if bookmarks:
                        mark = {"type": "BOOKMARK", "object": {
                            "kind": rt.kind, "apiVersion": rt.api_version,
                            "metadata": {"resourceVersion": str(self.store.rv)}}}
                        await resp.write(json.dumps(mark).encode() + b"\n")
                    continue
                if item is None:
                    break
                etype, obj = item
                payload = tables.table(rt, [obj], {}) if table and etype != "BOOKMARK" else obj
                chunk = [json.dumps({"type": etype, "object": payload}, separators=(",", ":")).encode()]
                while not watcher.queue.empty() and len(chunk) < 500:
                    nxt = watcher.queue.get_nowait()
                    if nxt is None:
                        break
                    e2, o2 = nxt
                    p2 = tables.table(rt, [o2], {}) if table and e2 != "BOOKMARK" else o2
                    chunk.append(json.dumps({"type": e2, "object": p2}, separators=(",", ":")).encode())
                await resp.write(b"\n".join(chunk) + b"\n")
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.store.unwatch(watcher)
        return resp

    # -- lifecycle helpers for embedding

    def close_watchers(self) -> None:
        for w in list(self.store.watchers):
            w.closed = True
            with contextlib.suppress(asyncio.QueueFull):
                w.queue.put_nowait(None)


def make_app(crds: list[dict[str, Any]] | None = None) -> tuple[APIServer, web.Application]:
    server = APIServer(crds)

    async def on_shutdown(_app: web.Application) -> None:
        server.close_watchers()

    server.app.on_shutdown.append(on_shutdown)
    return server, server.app


Handler = Callable[[web.Request], Any]
