"""A recording stand-in for the API client, as far as the allocator controller calls it.

Claims with resourceVersions (409 on a stale PUT; a PUT of the claim keeps the stored
status, a PUT of /status keeps the stored spec and metadata, as the real server does),
pods with a status subresource (conditions merged by type, the UID a precondition),
Events, and the node list.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from operators.kube.client import Response

CLAIMS = "/apis/resource.k8s.io/v1/namespaces/"


class FakeAPI:
    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}  # path -> object
        self.nodes: list[dict[str, Any]] = []
        self.calls: list[tuple[str, str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self.rv = 100
        # called before a write (PUT or PATCH of a claim) is applied, e.g. to write
        # concurrently and cause a 409
        self.before_put: Callable[[str], None] | None = None
        self.fail_puts = 0  # answer the next N claim writes with 500

    @staticmethod
    def path_of(obj: dict[str, Any]) -> str:
        meta = obj["metadata"]
        if obj["kind"] == "Pod":
            return f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
        return f"{CLAIMS}{meta['namespace']}/resourceclaims/{meta['name']}"

    def add(self, obj: dict[str, Any]) -> None:
        self.rv += 1
        stored = copy.deepcopy(obj)
        stored["metadata"]["resourceVersion"] = str(self.rv)
        self.objects[self.path_of(obj)] = stored

    def touch(self, path: str, change: Callable[[dict[str, Any]], None]) -> None:
        """Someone else's write: bumps the resourceVersion."""
        change(self.objects[path])
        self.rv += 1
        self.objects[path]["metadata"]["resourceVersion"] = str(self.rv)

    def claim(self, ns: str, name: str) -> dict[str, Any]:
        return self.objects[f"{CLAIMS}{ns}/resourceclaims/{name}"]

    def puts(self) -> list[tuple[str, Any]]:
        return [(p, b) for m, p, b in self.calls if m == "PUT"]

    def claim_writes(self) -> list[tuple[str, str]]:
        """(method, path) of every request about a claim, reads included."""
        return [(m, p) for m, p, _ in self.calls if "/resourceclaims/" in p]

    def _claim_patch(self, path: str, body: Any, content_type: str) -> Response:
        if self.before_put is not None:
            hook, self.before_put = self.before_put, None
            hook(path)
        if self.fail_puts > 0:
            self.fail_puts -= 1
            return Response(500, {"message": "injected failure"})
        status_only = path.endswith("/status")
        target = path[: -len("/status")] if status_only else path
        obj = self.objects.get(target)
        if obj is None:
            return Response(404, {"reason": "NotFound"})
        meta = body.get("metadata") or {}
        if meta.get("uid") not in (None, obj["metadata"]["uid"]):
            return Response(409, {"reason": "Conflict"})
        if meta.get("resourceVersion") not in (None, obj["metadata"]["resourceVersion"]):
            return Response(409, {"reason": "Conflict"})
        new = copy.deepcopy(obj)
        if status_only:
            assert content_type == "merge"
            new.setdefault("status", {}).update(copy.deepcopy(body.get("status") or {}))
        else:
            assert content_type == "strategic"  # finalizers merge as a set
            have = new["metadata"].setdefault("finalizers", [])
            have.extend(f for f in meta.get("finalizers") or [] if f not in have)
        self.rv += 1
        new["metadata"]["resourceVersion"] = str(self.rv)
        self.objects[target] = new
        return Response(200, copy.deepcopy(new))

    async def request(self, method: str, path: str, body: Any = None, content_type: str = "") -> Response:
        self.calls.append((method, path, copy.deepcopy(body)))
        if method == "GET" and path == "/api/v1/nodes":
            return Response(200, {"items": copy.deepcopy(self.nodes)})
        if method == "GET":
            obj = self.objects.get(path)
            return Response(200, copy.deepcopy(obj)) if obj else Response(404, {"reason": "NotFound"})
        if method == "PUT":
            if self.before_put is not None:
                hook, self.before_put = self.before_put, None
                hook(path)
            if self.fail_puts > 0:
                self.fail_puts -= 1
                return Response(500, {"message": "injected failure"})
            status_only = path.endswith("/status")
            target = path[: -len("/status")] if status_only else path
            obj = self.objects.get(target)
            if obj is None:
                return Response(404, {"reason": "NotFound"})
            if body["metadata"].get("resourceVersion") != obj["metadata"]["resourceVersion"]:
                return Response(409, {"reason": "Conflict"})
            self.rv += 1
            if status_only:
                new = copy.deepcopy(obj)
                new["status"] = copy.deepcopy(body.get("status") or {})
            else:
                new = copy.deepcopy(body)
                new["status"] = copy.deepcopy(obj.get("status") or {})
            new["metadata"]["resourceVersion"] = str(self.rv)
            self.objects[target] = new
            return Response(200, copy.deepcopy(new))
        if method == "PATCH" and "/resourceclaims/" in path:
            return self._claim_patch(path, body, content_type)
        if method == "PATCH" and path.endswith("/status"):
            obj = self.objects.get(path[: -len("/status")])
            if obj is None:
                return Response(404, {"reason": "NotFound"})
            if body["metadata"]["uid"] != obj["metadata"]["uid"]:
                return Response(409, {"reason": "Conflict"})
            conds = obj.setdefault("status", {}).setdefault("conditions", [])
            for cond in body["status"]["conditions"]:
                conds[:] = [c for c in conds if c["type"] != cond["type"]] + [cond]
            return Response(200, copy.deepcopy(obj))
        if method == "POST" and path.endswith("/events"):
            self.events.append(body)
            return Response(201, body)
        return Response(405, {"message": f"{method} {path} not faked"})

    async def get(self, path: str) -> Response:
        return await self.request("GET", path)

    async def post(self, path: str, body: Any) -> Response:
        return await self.request("POST", path, body)

    async def strategic_patch(self, path: str, body: Any) -> Response:
        return await self.request("PATCH", path, body, "strategic")

    async def merge_patch(self, path: str, body: Any) -> Response:
        return await self.request("PATCH", path, body, "merge")

    async def delete(self, path: str, body: Any = None) -> Response:
        return await self.request("DELETE", path, body)

    async def close(self) -> None:
        return None
