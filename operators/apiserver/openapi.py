"""Just enough OpenAPI for kubectl.

kubectl (1.27+) asks the server's OpenAPI v3 document whether each kind's PATCH
operation takes the `fieldValidation` query parameter; when it does, kubectl leaves
validation to the server (which draco's server does for CRDs) instead of validating
client-side. A kind missing from the document makes `kubectl apply` fail, so every
served kind — CRD kinds included — gets a PATCH path here.
"""

from __future__ import annotations

from typing import Any

from operators.apiserver.registry import Registry, ResourceType


def gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def root(registry: Registry, generation: int) -> dict[str, Any]:
    gvs = {(rt.group, rt.version) for rt in registry.types.values()}
    return {"paths": {
        gv_path(g, v): {"serverRelativeURL": f"/openapi/v3/{gv_path(g, v)}?hash={generation:016X}"}
        for g, v in sorted(gvs)
    }}


def _operation(rt: ResourceType, verb: str) -> dict[str, Any]:
    params = [{"name": "dryRun", "in": "query", "schema": {"type": "string"}}]
    if verb in ("patch", "post", "put"):
        params += [{"name": "fieldManager", "in": "query", "schema": {"type": "string"}},
                   {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}}]
    op: dict[str, Any] = {
        "operationId": f"{verb}{rt.kind}",
        "parameters": params,
        "responses": {"200": {"description": "OK"}},
        "x-kubernetes-action": verb,
        "x-kubernetes-group-version-kind": {"group": rt.group, "version": rt.version,
                                            "kind": rt.kind},
    }
    if verb == "patch":
        types = ["application/json-patch+json", "application/merge-patch+json"]
        op["requestBody"] = {"content": {t: {"schema": {"type": "object"}} for t in types}}
    return op


def group_version(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    rts = registry.in_group_version(group, version)
    if not rts:
        return None
    base = "/" + gv_path(group, version)
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    for rt in rts:
        ns = "/namespaces/{namespace}" if rt.namespaced else ""
        paths[f"{base}{ns}/{rt.plural}/{{name}}"] = {
            verb: _operation(rt, verb) for verb in ("get", "put", "patch", "delete")
        }
        paths[f"{base}{ns}/{rt.plural}"] = {verb: _operation(rt, verb) for verb in ("get", "post")}
        name = f"{'.'.join(reversed(rt.group.split('.'))) or 'io.k8s.api.core'}.{rt.version}.{rt.kind}"
        schemas[name] = {"type": "object", "x-kubernetes-group-version-kind": [
            {"group": rt.group, "version": rt.version, "kind": rt.kind}]}
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes (draco embedded)", "version": "v1.34.0"},
            "paths": paths, "components": {"schemas": schemas}}
