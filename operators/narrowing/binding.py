"""Releasing a claim whose devices failed to bind (KEP-5007), as kube-scheduler does.

When a device allocated with binding conditions reports a failure condition, or its
conditions are still not all True `bindingTimeout` after the allocation, kube-scheduler
takes the pod off the claim's `reservedFor` and, when no other consumer is left, clears
`status.allocation`, `status.reservedFor` and `status.devices`, so that the pod is
scheduled afresh. draco does the same for its gated pods, each claim in one status
update guarded by the resourceVersion it read (a conflict reads again); the allocator
then decides the pod again from the tracker. A claim another pod also uses keeps its
allocation (only this pod's reservation goes), as upstream.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from operators.kube.client import KubeClient
from operators.kube.conflicts import read_modify_write
from operators.model import NamespacedName


def release(claim: dict[str, Any], pod_uid: str) -> Mapping[str, Any] | None:
    """The claim with the pod's reservation, and when it was the last consumer the
    allocation, removed; None when there is nothing to do."""
    status = claim.get("status") or {}
    if not status.get("allocation"):
        return None
    reserved = [r for r in status.get("reservedFor") or [] if isinstance(r, Mapping)]
    others = [r for r in reserved if r.get("uid") != pod_uid]
    if others:
        if len(others) == len(reserved):
            return None  # not reserved for the pod: someone else's business
        claim["status"] = {**status, "reservedFor": others}
        return claim
    claim["status"] = {k: v for k, v in status.items()
                       if k not in ("allocation", "reservedFor", "devices")}
    return claim


async def release_claim(client: KubeClient, key: NamespacedName, pod_uid: str) -> int:
    """Release KEY for the pod; the HTTP status of the last answer (200: done or
    nothing to do, 404: the claim is gone)."""
    path = f"/apis/resource.k8s.io/v1/namespaces/{key.namespace}/resourceclaims/{key.name}"
    resp = await read_modify_write(client, path, lambda c: release(c, pod_uid),
                                   write_path=f"{path}/status")
    return resp.status


__all__ = ["release", "release_claim"]
