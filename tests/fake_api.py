"""A recording stand-in for the API client, as far as the allocator and narrowing
controllers call it: one fake, so both controllers are tested against the same server
semantics.

Pods and claims are stored by path with resourceVersions and written as the real server
writes them: a PUT or PATCH whose resourceVersion or UID precondition is stale gets 409;
a write of the object keeps the stored status and a write of /status keeps the stored
spec and metadata; PATCH bodies are applied by the embedded API server's patch code
(merge: RFC 7386; strategic merge: finalizers as a set, conditions merged by type).
Events are recorded; nodes are served by name and as a list.

ControllerScenario drives either controller against it, one pass at a time.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from typing import Any

from operators.apiserver.patching import apply_merge_patch, apply_strategic_merge_patch
from operators.kube.client import Response
from operators.kube.shell import PassLoop
from operators.tracker import Tracker

PODS = "/api/v1/namespaces/"
CLAIMS = "/apis/resource.k8s.io/v1/namespaces/"
GANGS = "/apis/resource.draco.dev/v1alpha1/namespaces/"
NOT_FOUND = Response(404, {"reason": "NotFound"})
CONFLICT = Response(409, {"reason": "Conflict"})


class FakeAPI:
    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}  # path -> pod or claim
        self.nodes: dict[str, dict[str, Any]] = {}  # name -> node
        self.calls: list[tuple[str, str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self.rv = 100
        # called before the next write (PUT or PATCH) is applied, e.g. to write
        # concurrently and cause a 409
        self.before_write: Callable[[str], None] | None = None
        self.fail_writes = 0  # answer the next N writes with 500

    @staticmethod
    def path_of(obj: dict[str, Any]) -> str:
        meta = obj["metadata"]
        if obj["kind"] == "Pod":
            return f"{PODS}{meta['namespace']}/pods/{meta['name']}"
        if obj["kind"] == "Gang":
            return f"{GANGS}{meta['namespace']}/gangs/{meta['name']}"
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

    def pod(self, ns: str, name: str) -> dict[str, Any]:
        return self.objects[f"{PODS}{ns}/pods/{name}"]

    def claim(self, ns: str, name: str) -> dict[str, Any]:
        return self.objects[f"{CLAIMS}{ns}/resourceclaims/{name}"]

    def puts(self) -> list[tuple[str, Any]]:
        return [(p, b) for m, p, b in self.calls if m == "PUT"]

    def claim_writes(self) -> list[tuple[str, str]]:
        """(method, path) of every request about a claim, reads included."""
        return [(m, p) for m, p, _ in self.calls if "/resourceclaims/" in p]

    async def request(self, method: str, path: str, body: Any = None, content_type: str = "") -> Response:
        self.calls.append((method, path, copy.deepcopy(body)))
        if method == "GET":
            return self._get(path)
        if method in ("PUT", "PATCH"):
            return self._write(method, path, body, content_type)
        if method == "POST" and path.endswith("/events"):
            self.events.append(body)
            return Response(201, body)
        return Response(405, {"message": f"{method} {path} not faked"})

    def _get(self, path: str) -> Response:
        if path == "/api/v1/nodes":
            return Response(200, {"items": copy.deepcopy(list(self.nodes.values()))})
        if path.startswith("/api/v1/nodes/"):
            found = self.nodes.get(path.rsplit("/", 1)[1])
        else:
            found = self.objects.get(path)
        return Response(200, copy.deepcopy(found)) if found else NOT_FOUND

    def _write(self, method: str, path: str, body: Any, content_type: str) -> Response:
        if self.before_write is not None:
            hook, self.before_write = self.before_write, None
            hook(path)
        if self.fail_writes > 0:
            self.fail_writes -= 1
            return Response(500, {"message": "injected failure"})
        status_only = path.endswith("/status")
        target = path[: -len("/status")] if status_only else path
        obj = self.objects.get(target)
        if obj is None:
            return NOT_FOUND
        meta = body.get("metadata") or {}
        if method == "PUT":  # an update always carries the resourceVersion it read
            stale = meta.get("resourceVersion") != obj["metadata"]["resourceVersion"]
        else:  # a patch has preconditions only where it names them
            stale = (meta.get("uid") not in (None, obj["metadata"]["uid"])
                     or meta.get("resourceVersion") not in (None, obj["metadata"]["resourceVersion"]))
        if stale:
            return CONFLICT
        if method == "PUT":
            written = copy.deepcopy(body)
        elif content_type == "merge":
            written = apply_merge_patch(copy.deepcopy(obj), body)
        else:
            written = apply_strategic_merge_patch(copy.deepcopy(obj), body, obj["kind"],
                                                  obj["apiVersion"])
        if status_only:  # the status subresource changes the status and nothing else
            new = copy.deepcopy(obj)
            new["status"] = written.get("status") or {}
        else:  # the object's own endpoint leaves the status alone
            new = written
            new["status"] = copy.deepcopy(obj.get("status") or {})
        self.rv += 1
        new["metadata"]["resourceVersion"] = str(self.rv)
        self.objects[target] = new
        return Response(200, copy.deepcopy(new))

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


class ControllerScenario:
    """A controller, the fake API it writes to and the tracker it reads, fed by hand the way
    the watch would feed it; subclasses build the three."""

    api: FakeAPI
    tracker: Tracker
    controller: PassLoop

    async def step(self) -> float:
        """One pass, and every write it started: what a test asserts on is then settled."""
        delay = await self.controller.step()
        while self.controller.tasks:
            await asyncio.gather(*list(self.controller.tasks))
        return delay

    def feed(self, obj: dict[str, Any], etype: str = "MODIFIED") -> None:
        self.tracker.apply({"type": etype, "object": obj})


def run(coro: Any) -> Any:
    return asyncio.run(coro)
