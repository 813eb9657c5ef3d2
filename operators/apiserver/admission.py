"""What happens to an object between the request body and the store.

CRD objects are pruned, defaulted and validated against their structural schema;
built-in objects go through draco's port of the upstream validation it relies on
(pod updates under KEP-3838, resource.k8s.io limits); patches are applied by type;
evictions are decided against PodDisruptionBudgets.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from operators.apiserver.errors import APIError, invalid
from operators.apiserver.patching import (
    PatchError,
    apply_json_patch,
    apply_merge_patch,
    apply_strategic_merge_patch,
)
from operators.apiserver.registry import Registry, ResourceType
from operators.apiserver.schema import StructuralSchema
from operators.apiserver.store import Store
from operators.apiserver.validation import (
    eviction_allowed,
    validate_create,
    validate_metadata,
    validate_status_update,
    validate_update,
)
from operators.apiserver.validation.decoding import decode
from operators.apiserver.validation.resource import default_claim_spec


class Admission:
    def __init__(self, store: Store, registry: Registry) -> None:
        self.store = store
        self.registry = registry

    @staticmethod
    def schema_factory(schema: dict[str, Any]) -> StructuralSchema:
        return StructuralSchema(schema)

    def _check_kind(self, rt: ResourceType, body: dict[str, Any]) -> None:
        kind, api_version = body.get("kind"), body.get("apiVersion")
        if kind and kind != rt.kind:
            raise APIError(400, f"the API version in the data ({api_version}) does not match the "
                                f"expected API version ({rt.api_version})"
                           if api_version != rt.api_version else
                           f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})")
        if api_version and api_version != rt.api_version:
            raise APIError(400, f"the API version in the data ({api_version}) does not match the "
                                f"expected API version ({rt.api_version})")

    def _custom(self, rt: ResourceType, obj: dict[str, Any], field_validation: str,
                subresource: str = "", old: dict[str, Any] | None = None) -> dict[str, Any]:
        schema = rt.schema
        if schema is None:
            return obj
        unknown = schema.unknown_fields(obj)
        if unknown and field_validation == "Strict":
            raise APIError(400, "; ".join(f'strict decoding error: unknown field "{u}"' for u in unknown))
        obj = schema.default(schema.prune(obj))
        causes = validate_metadata(rt.plural, obj) if old is None else []
        causes += schema.validate(obj, old)
        if causes:
            name = (obj.get("metadata") or {}).get("name", "")
            raise invalid(rt.group, rt.kind, name, causes)
        return obj

    def prepare_create(self, rt: ResourceType, namespace: str, body: dict[str, Any],
                       field_validation: str = "") -> dict[str, Any]:
        self._check_kind(rt, body)
        meta = body.get("metadata") or {}
        if rt.namespaced and meta.get("namespace") and meta["namespace"] != namespace:
            raise APIError(400, "the namespace of the provided object does not match the "
                                "namespace sent on the request")
        obj = copy.deepcopy(body)
        if rt.has_status and rt.crd:
            obj.pop("status", None)  # status is written through the subresource only
        if rt.crd:
            return self._custom(rt, obj, field_validation)
        decode(rt.group, rt.plural, rt.kind, rt.version, obj, field_validation)
        _default(rt, obj)
        causes = validate_create(rt.plural, rt.group, obj)
        if causes:
            raise invalid(rt.group, rt.kind, meta.get("name", ""), causes)
        if (rt.group, rt.plural) == ("", "pods"):
            status: dict[str, Any] = obj["status"] if isinstance(obj.get("status"), dict) else {}
            obj["status"] = {**status, "phase": status.get("phase") or "Pending"}  # as upstream's strategy
        return obj

    def prepare_update(self, rt: ResourceType, old: dict[str, Any], body: dict[str, Any],
                       subresource: str, field_validation: str = "") -> dict[str, Any]:
        self._check_kind(rt, body)
        obj = copy.deepcopy(body)
        if rt.crd:
            return self._custom(rt, obj, field_validation, subresource, old)
        decode(rt.group, rt.plural, rt.kind, rt.version, obj, field_validation)
        if subresource == "status":
            merged = {**old, "status": obj.get("status")} if "status" in obj else old
            causes = validate_status_update(rt.plural, rt.group, old, merged)
            if causes:
                raise invalid(rt.group, rt.kind, old["metadata"]["name"], causes)
            return obj
        _default(rt, obj)
        merged = obj
        if rt.has_status:
            merged = {**obj}
            if "status" in old:
                merged["status"] = old["status"]
        causes = validate_update(rt.plural, rt.group, old, merged)
        if causes:
            raise invalid(rt.group, rt.kind, old["metadata"]["name"], causes)
        return obj

    def apply_patch(self, current: dict[str, Any], patch: Any, content_type: str,
                    rt: ResourceType) -> dict[str, Any]:
        if content_type == "application/merge-patch+json":
            return apply_merge_patch(current, patch)
        if content_type == "application/json-patch+json":
            return apply_json_patch(current, patch)
        if content_type == "application/strategic-merge-patch+json":
            if rt.crd:
                raise APIError(415, "strategic merge patch is not supported for custom resources; "
                                    "use a merge patch or JSON patch")
            return apply_strategic_merge_patch(current, patch, rt.kind, rt.api_version)
        raise APIError(415, "the body of the request was in an unknown format - accepted media "
                            "types include: application/json-patch+json, application/merge-patch+json, "
                            "application/strategic-merge-patch+json")

    def evict(self, rt: ResourceType, namespace: str, name: str, body: dict[str, Any],
              dry_run: bool) -> dict[str, Any]:
        pod = self.store.get(rt, namespace, name)
        pdb_rt = self.registry.get("policy", "v1", "poddisruptionbudgets")
        assert pdb_rt is not None
        pdbs = [o for _, o in self.store.iter(pdb_rt, namespace)]
        pods = [o for _, o in self.store.iter(rt, namespace)]
        allowed, message = eviction_allowed(pod, pdbs, pods)
        if not allowed:
            raise APIError(429, message, reason="TooManyRequests", details={"causes": [
                {"reason": "DisruptionBudget", "message": message}]})
        pre = ((body or {}).get("deleteOptions") or {}).get("preconditions") or {}
        self.store.delete(rt, namespace, name, pre, dry_run=dry_run)
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "code": 201}


def _default(rt: ResourceType, obj: dict[str, Any]) -> None:
    """The v1 defaults upstream stores for the resource kinds draco reads."""
    if rt.group != "resource.k8s.io":
        return
    if rt.plural == "resourceslices":
        for device in (obj.get("spec") or {}).get("devices") or []:
            for taint in (device or {}).get("taints") or []:
                if isinstance(taint, dict) and not taint.get("timeAdded"):
                    taint["timeAdded"] = now()  # whole seconds, as upstream's default
    elif rt.plural == "resourceclaims":
        default_claim_spec(obj.get("spec"))
    elif rt.plural == "resourceclaimtemplates":
        default_claim_spec((obj.get("spec") or {}).get("spec"))


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


__all__ = ["Admission", "PatchError"]
