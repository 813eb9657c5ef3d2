"""The OpenAPI documents kubectl reads: v3 per group-version, and the schemas inside.

kubectl (1.27+) asks the v3 document whether each kind's PATCH operation takes the
`fieldValidation` query parameter; when it does, kubectl leaves validation to the
server instead of validating client-side. A kind missing from the document makes
`kubectl apply` fail, so every served kind gets a PATCH path here. `kubectl explain`
reads the component schemas: for CRD kinds they are built from the CRD's structural
schema the way kube-apiserver does (apiVersion/kind/metadata replaced by references to
the shared meta types, the kind marked with x-kubernetes-group-version-kind), so
explaining a CRD field shows its type, description and children.
"""

from __future__ import annotations

import copy
from typing import Any

from operators.apiserver.registry import Registry, ResourceType

META = "io.k8s.apimachinery.pkg.apis.meta.v1"
OBJECT_META = f"{META}.ObjectMeta"
LIST_META = f"{META}.ListMeta"
API_VERSION_DOC = ("The versioned schema of this representation of an object; servers convert "
                   "recognized schemas to their latest internal value.")
KIND_DOC = "The REST resource this object represents, in CamelCase."
METADATA_DOC = "Standard object metadata."
LIST_METADATA_DOC = "Standard list metadata."


def gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def schema_name(rt: ResourceType, kind: str = "") -> str:
    """Definition name as upstream spells it: reversed group domain, version, kind."""
    prefix = ".".join(reversed(rt.group.split("."))) if rt.group else "io.k8s.api.core"
    return f"{prefix}.{rt.version}.{kind or rt.kind}"


def root(registry: Registry, generation: int) -> dict[str, Any]:
    gvs = {(rt.group, rt.version) for rt in registry.types.values()}
    return {"paths": {
        gv_path(g, v): {"serverRelativeURL": f"/openapi/v3/{gv_path(g, v)}?hash={generation:016X}"}
        for g, v in sorted(gvs)
    }}


def _gvk(rt: ResourceType, kind: str = "") -> dict[str, str]:
    return {"group": rt.group, "version": rt.version, "kind": kind or rt.kind}


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
        "x-kubernetes-group-version-kind": _gvk(rt),
    }
    if verb == "patch":
        # No strategic-merge-patch here: kubectl would then compute such patches from
        # these (property-less) built-in schemas instead of its compiled-in types.
        types = ["application/json-patch+json", "application/merge-patch+json"]
        op["requestBody"] = {"content": {t: {"schema": {"type": "object"}} for t in types}}
    return op


def _ref(name: str, v2: bool) -> str:
    return f"#/definitions/{name}" if v2 else f"#/components/schemas/{name}"


def _meta_ref(name: str, doc: str, v2: bool) -> dict[str, Any]:
    if v2:
        return {"$ref": _ref(name, v2), "description": doc}
    return {"allOf": [{"$ref": _ref(name, v2)}], "description": doc, "default": {}}


def meta_schemas(v2: bool) -> dict[str, dict[str, Any]]:
    """ObjectMeta and ListMeta: the shared types CRD kinds point to."""
    s: dict[str, Any] = {"type": "string"}
    i64: dict[str, Any] = {"type": "integer", "format": "int64"}
    time: dict[str, Any] = {"type": "string", "format": "date-time"}
    smap: dict[str, Any] = {"type": "object", "additionalProperties": {"type": "string"}}
    anything: dict[str, Any] = {} if v2 else {"type": "object"}
    return {
        OBJECT_META: {
            "type": "object",
            "description": "Metadata every persisted resource carries.",
            "properties": {
                "name": {**s, "description": "Unique within a namespace; cannot be changed."},
                "generateName": {**s, "description": "Prefix for a server-generated name."},
                "namespace": {**s, "description": "The namespace the object lives in."},
                "selfLink": {**s, "description": "Deprecated, never set."},
                "uid": {**s, "description": "Unique in time and space; set by the server."},
                "resourceVersion": {**s, "description": "Opaque version for concurrency and watches."},
                "generation": {**i64, "description": "Sequence number of the desired state."},
                "creationTimestamp": {**time, "description": "When the object was created."},
                "deletionTimestamp": {**time, "description": "When the object will be deleted."},
                "deletionGracePeriodSeconds": {**i64, "description": "Grace period of a pending deletion."},
                "labels": {**smap, "description": "Keys and values to select objects by."},
                "annotations": {**smap, "description": "Arbitrary unstructured metadata."},
                "ownerReferences": {"type": "array", "items": anything,
                                    "description": "Objects this one depends on."},
                "finalizers": {"type": "array", "items": {"type": "string"},
                               "description": "Must be empty before the object is removed."},
                "managedFields": {"type": "array", "items": anything,
                                  "description": "Which field manager owns which fields."},
            },
        },
        LIST_META: {
            "type": "object",
            "description": "Metadata of a list.",
            "properties": {
                "resourceVersion": {**s, "description": "Version the list was read at."},
                "continue": {**s, "description": "Token for the next page."},
                "remainingItemCount": {**i64, "description": "Items left after this page."},
                "selfLink": {**s, "description": "Deprecated, never set."},
            },
        },
    }


def _to_v2(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop what OpenAPI v2 and kubectl's v2 reader cannot carry, as upstream does."""
    out = {k: v for k, v in schema.items() if k not in ("allOf", "anyOf", "oneOf", "not", "nullable")}
    if schema.get("nullable") or schema.get("x-kubernetes-preserve-unknown-fields"):
        out.pop("items", None)
        out.pop("properties", None)
        if schema.get("nullable") or out.get("type") == "object":
            out.pop("type", None)
    if schema.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
    if out.get("type") == "array" and "items" not in out:
        out.pop("type", None)
    if isinstance(out.get("properties"), dict):
        props = schema.get("properties") or {}
        out["properties"] = {k: _to_v2(v) for k, v in out["properties"].items()}
        nullable = {k for k, v in props.items() if isinstance(v, dict) and v.get("nullable")}
        if nullable and out.get("required"):
            out["required"] = [r for r in out["required"] if r not in nullable]
    if isinstance(out.get("items"), dict):
        out["items"] = _to_v2(out["items"])
    if isinstance(out.get("additionalProperties"), dict):
        out["additionalProperties"] = _to_v2(out["additionalProperties"])
    return out


def crd_kind_schema(rt: ResourceType, v2: bool) -> dict[str, Any]:
    """The published schema of a CRD kind, built from its structural schema."""
    raw = copy.deepcopy(getattr(rt.schema, "root", None) or {})
    if not raw or (v2 and raw.get("x-kubernetes-preserve-unknown-fields")):
        out: dict[str, Any] = {"type": "object"}
    else:
        out = _to_v2(raw) if v2 else raw
        props = out.setdefault("properties", {})
        props["apiVersion"] = {"type": "string", "description": API_VERSION_DOC}
        props["kind"] = {"type": "string", "description": KIND_DOC}
        props["metadata"] = _meta_ref(OBJECT_META, METADATA_DOC, v2)
    out["x-kubernetes-group-version-kind"] = [_gvk(rt)]
    return out


def crd_list_schema(rt: ResourceType, v2: bool) -> dict[str, Any]:
    return {
        "type": "object",
        "description": f"{rt.list_kind} is a list of {rt.kind}",
        "required": ["items"],
        "properties": {
            "apiVersion": {"type": "string", "description": API_VERSION_DOC},
            "kind": {"type": "string", "description": KIND_DOC},
            "items": {"type": "array", "description": f"List of {rt.plural}.",
                      "items": {"$ref": _ref(schema_name(rt), v2)} if v2
                      else {"allOf": [{"$ref": _ref(schema_name(rt), v2)}], "default": {}}},
            "metadata": _meta_ref(LIST_META, LIST_METADATA_DOC, v2),
        },
        "x-kubernetes-group-version-kind": [_gvk(rt, rt.list_kind)],
    }


def kind_schemas(rt: ResourceType, v2: bool) -> dict[str, dict[str, Any]]:
    """Definitions for one served kind: full ones for CRDs, a GVK marker for built-ins.

    Built-in kinds are published without properties: kubectl then skips client-side
    checks for them (the server validates) and patches them from its compiled-in types.
    """
    if rt.crd:
        return {schema_name(rt): crd_kind_schema(rt, v2),
                schema_name(rt, rt.list_kind): crd_list_schema(rt, v2)}
    if v2:
        return {}
    return {schema_name(rt): {"type": "object", "x-kubernetes-group-version-kind": [_gvk(rt)]}}


def group_version(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    rts = registry.in_group_version(group, version)
    if not rts:
        return None
    base = "/" + gv_path(group, version)
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = dict(meta_schemas(v2=False))
    for rt in sorted(rts, key=lambda r: r.plural):
        ns = "/namespaces/{namespace}" if rt.namespaced else ""
        paths[f"{base}{ns}/{rt.plural}/{{name}}"] = {
            verb: _operation(rt, verb) for verb in ("get", "put", "patch", "delete")
        }
        paths[f"{base}{ns}/{rt.plural}"] = {verb: _operation(rt, verb) for verb in ("get", "post")}
        schemas.update(kind_schemas(rt, v2=False))
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes (draco embedded)", "version": "v1.34.0"},
            "paths": paths, "components": {"schemas": schemas}}


def swagger_v2(registry: Registry) -> dict[str, Any]:
    """The v2 document: what kubectl validates `kind: List` items against client-side."""
    definitions: dict[str, Any] = dict(meta_schemas(v2=True))
    for rt in sorted(registry.types.values(), key=lambda r: (r.group, r.version, r.plural)):
        definitions.update(kind_schemas(rt, v2=True))
    return {"swagger": "2.0", "info": {"title": "Kubernetes (draco embedded)", "version": "v1.34.0"},
            "paths": {}, "definitions": definitions}
