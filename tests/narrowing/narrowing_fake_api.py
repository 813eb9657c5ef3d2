"""A recording stand-in for the API client: pods with resourceVersions, 409 on stale PUTs.

Only what the narrowing controller calls: GET, PUT and merge PATCH (resourceVersion and
UID as preconditions) of a pod, strategic-merge PATCH of its status (conditions merged by type), POST of Events, GET of a node and of all nodes.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from operators.kube.client import Response

PODS = "/api/v1/namespaces/"


class FakeAPI:
    def __init__(self) -> None:
        self.pods: dict[str, dict[str, Any]] = {}  # path -> pod
        self.nodes: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self.rv = 100
        # called before a PUT is applied (e.g. to write concurrently and cause a 409)
        self.before_put: Callable[[str], None] | None = None

    def add_pod(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        self.rv += 1
        stored = copy.deepcopy(pod)
        stored["metadata"]["resourceVersion"] = str(self.rv)
        self.pods[f"{PODS}{meta['namespace']}/pods/{meta['name']}"] = stored

    def touch(self, path: str, change: Callable[[dict[str, Any]], None]) -> None:
        """Someone else's write: bumps the resourceVersion."""
        change(self.pods[path])
        self.rv += 1
        self.pods[path]["metadata"]["resourceVersion"] = str(self.rv)

    def puts(self) -> list[tuple[str, Any]]:
        return [(p, b) for m, p, b in self.calls if m == "PUT"]

    async def request(self, method: str, path: str, body: Any = None, content_type: str = "") -> Response:
        self.calls.append((method, path, copy.deepcopy(body)))
        if method == "GET" and path == "/api/v1/nodes":
            return Response(200, {"items": copy.deepcopy(list(self.nodes.values()))})
        if method == "GET" and path.startswith("/api/v1/nodes/"):
            node = self.nodes.get(path.rsplit("/", 1)[1])
            return Response(200, copy.deepcopy(node)) if node else Response(404, {"reason": "NotFound"})
        if method == "GET":
            pod = self.pods.get(path)
            return Response(200, copy.deepcopy(pod)) if pod else Response(404, {"reason": "NotFound"})
        if method == "PUT":
            if self.before_put is not None:
                hook, self.before_put = self.before_put, None
                hook(path)
            pod = self.pods.get(path)
            if pod is None:
                return Response(404, {"reason": "NotFound"})
            if body["metadata"].get("resourceVersion") != pod["metadata"]["resourceVersion"]:
                return Response(409, {"reason": "Conflict"})
            self.rv += 1
            new = copy.deepcopy(body)
            new["metadata"]["resourceVersion"] = str(self.rv)
            new["status"] = pod.get("status", {})
            self.pods[path] = new
            return Response(200, copy.deepcopy(new))
        if method == "PATCH" and path.endswith("/status"):
            pod = self.pods.get(path[: -len("/status")])
            if pod is None:
                return Response(404, {"reason": "NotFound"})
            if body["metadata"]["uid"] != pod["metadata"]["uid"]:
                return Response(409, {"reason": "Conflict"})
            conds = pod.setdefault("status", {}).setdefault("conditions", [])
            for cond in body["status"]["conditions"]:
                conds[:] = [c for c in conds if c["type"] != cond["type"]] + [cond]
            return Response(200, copy.deepcopy(pod))
        if method == "PATCH" and content_type == "merge" and path in self.pods:
            pod = self.pods[path]
            meta = body.get("metadata") or {}
            if (meta.get("uid") not in (None, pod["metadata"].get("uid"))
                    or meta.get("resourceVersion") not in (None, pod["metadata"]["resourceVersion"])):
                return Response(409, {"reason": "Conflict"})
            self.rv += 1
            new = merge_patch(pod, body)
            new["metadata"]["resourceVersion"] = str(self.rv)
            self.pods[path] = new
            return Response(200, copy.deepcopy(new))
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


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge key by key, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out
