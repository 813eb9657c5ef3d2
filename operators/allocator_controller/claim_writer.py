"""Writing one claim's allocation and reservation the way kube-scheduler's PreBind does.

For a claim to allocate: read it; give up when it was replaced (another UID), is being
deleted, was allocated by someone else meanwhile, or (a claim generated from a
template) is not owned by the pod; add the `resource.kubernetes.io/delete-protection`
finalizer with a plain update when missing (the resource-claim controller removes it
again when it deallocates); then one status update that sets `status.allocation` and
appends the pod to `status.reservedFor`. For a claim allocated already, only the
reservation is appended. Every write carries the resourceVersion just read; a 409
re-reads the claim and decides again from what it holds now (upstream retries the
same way), at most `attempts` times.

The first attempt skips the read when the caller knows the claim's resourceVersion
(the tracker's copy) and the claim needs no owner check: a strategic-merge patch adds
the finalizer (finalizers merge as a set) with that resourceVersion as precondition,
then a merge patch of /status with the version it answered: two requests instead of
three. Any refusal (409 for a stale copy) falls back to the read-modify-write above.

Outcomes are values: `written`, `stale` (the claim no longer fits the decision:
decide again from the tracker), `gone` (404) or `failed` (any other answer).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from operators.kube.client import KubeClient, Response
from operators.kube.conflicts import read_modify_write
from operators.model import NamespacedName

FINALIZER = "resource.kubernetes.io/delete-protection"
RESERVED_FOR_MAX = 256
ATTEMPTS = 5

Outcome = Literal["written", "stale", "gone", "failed"]


@dataclass(frozen=True, slots=True)
class WriteResult:
    outcome: Outcome
    message: str = ""
    status: int = 200
    claim: Mapping[str, Any] | None = None  # the claim as last written or read

    @property
    def ok(self) -> bool:
        return self.outcome == "written"


def claim_path(key: NamespacedName) -> str:
    return f"/apis/resource.k8s.io/v1/namespaces/{key.namespace}/resourceclaims/{key.name}"


def pod_reference(name: str, uid: str) -> dict[str, str]:
    return {"resource": "pods", "name": name, "uid": uid}


def _failed(resp: Response, what: str) -> WriteResult:
    if resp.status == 404:
        return WriteResult("gone", "the claim no longer exists", 404)
    message = resp.body.get("message") if isinstance(resp.body, Mapping) else resp.body
    return WriteResult("failed", f"{what} answered {resp.status}: {message}", resp.status)


def _owned_by(claim: Mapping[str, Any], uid: str) -> bool:
    refs = (claim.get("metadata") or {}).get("ownerReferences") or []
    return any(isinstance(r, Mapping) and r.get("uid") == uid and r.get("controller") for r in refs)


def _check(claim: Mapping[str, Any], uid: str, owner: str | None) -> str | None:
    meta = claim.get("metadata") or {}
    if meta.get("uid") != uid:
        return "the claim was replaced"
    if meta.get("deletionTimestamp"):
        return "the claim is being deleted"
    if owner is not None and not _owned_by(claim, owner):
        return "the claim was not created for this pod"
    return None


async def _from_cache(client: KubeClient, path: str, uid: str, rv: str, pod: Mapping[str, str],
                      allocation: Mapping[str, Any]) -> WriteResult | None:
    """The two-request path; None: use the careful one."""
    resp = await client.strategic_patch(path, {"metadata": {
        "uid": uid, "resourceVersion": rv, "finalizers": [FINALIZER]}})
    if not resp.ok or not isinstance(resp.body, Mapping):
        return None
    status = resp.body.get("status") or {}
    if status.get("allocation") or (resp.body.get("metadata") or {}).get("deletionTimestamp"):
        return None
    reserved = [r for r in status.get("reservedFor") or [] if isinstance(r, Mapping)]
    if len(reserved) >= RESERVED_FOR_MAX:
        return None
    written = await client.merge_patch(f"{path}/status", {
        "metadata": {"uid": uid, "resourceVersion": (resp.body.get("metadata") or {}).get("resourceVersion")},
        "status": {"allocation": dict(allocation), "reservedFor": [*reserved, dict(pod)]}})
    if not written.ok:
        return None
    return WriteResult("written", claim=written.body if isinstance(written.body, Mapping) else None)


async def write_claim(
    client: KubeClient,
    key: NamespacedName,
    uid: str,
    pod: Mapping[str, str],
    allocation: Mapping[str, Any] | None,
    *,
    owner: str | None = None,
    still_free: Callable[[], bool] | None = None,
    attempts: int = ATTEMPTS,
    resource_version: str = "",
) -> WriteResult:
    """Allocate (when `allocation` is given) and reserve the claim for `pod`
    (`pod_reference`); `owner`: the pod UID a template-generated claim must be owned by;
    `still_free`: asked before each allocation attempt whether the devices are still free;
    `resource_version`: the caller's copy's, for the two-request path."""
    path = claim_path(key)
    if allocation is not None and resource_version and owner is None:
        fast = await _from_cache(client, path, uid, resource_version, pod, allocation)
        if fast is not None:
            return fast
    last = WriteResult("failed", "no attempt made", 0)
    for _ in range(max(attempts, 1)):
        read = await client.get(path)
        if not read.ok or not isinstance(read.body, Mapping):
            return _failed(read, "reading the claim")
        claim: dict[str, Any] = dict(read.body)
        problem = _check(claim, uid, owner)
        if problem is not None:
            return WriteResult("stale", problem, claim=claim)
        status = dict(claim.get("status") or {})
        reserved = list(status.get("reservedFor") or [])
        if allocation is not None:
            if status.get("allocation"):
                return WriteResult("stale", "the claim was allocated by someone else meanwhile",
                                   claim=claim)
            if still_free is not None and not still_free():
                return WriteResult("stale", "a device was allocated to another claim meanwhile",
                                   claim=claim)
            meta = dict(claim.get("metadata") or {})
            finalizers = list(meta.get("finalizers") or [])
            if FINALIZER not in finalizers:
                meta["finalizers"] = [*finalizers, FINALIZER]
                claim["metadata"] = meta
                resp = await client.request("PUT", path, claim)
                if resp.status == 409:
                    last = WriteResult("failed", "conflict adding the finalizer", 409)
                    continue
                if not resp.ok or not isinstance(resp.body, Mapping):
                    return _failed(resp, "adding the finalizer")
                claim = dict(resp.body)
                status = dict(claim.get("status") or {})
                reserved = list(status.get("reservedFor") or [])
            status["allocation"] = dict(allocation)
        elif not status.get("allocation"):
            return WriteResult("stale", "the claim was deallocated meanwhile", claim=claim)
        if any(isinstance(r, Mapping) and r.get("uid") == pod.get("uid") for r in reserved):
            if allocation is None:
                return WriteResult("written", "already reserved", claim=claim)
        else:
            if len(reserved) >= RESERVED_FOR_MAX:
                return WriteResult("stale", f"the claim is reserved for {RESERVED_FOR_MAX} "
                                            "consumers already", claim=claim)
            reserved.append(dict(pod))
        status["reservedFor"] = reserved
        claim["status"] = status
        resp = await client.request("PUT", f"{path}/status", claim)
        if resp.status == 409:
            last = WriteResult("failed", "conflict writing the claim status", 409)
            continue
        if not resp.ok:
            return _failed(resp, "writing the claim status")
        return WriteResult("written", claim=resp.body if isinstance(resp.body, Mapping) else None)
    return last


__all__ = ["ATTEMPTS", "FINALIZER", "WriteResult", "claim_path", "pod_reference", "write_claim"]


def released(claim: dict[str, Any], pod_uid: str) -> Mapping[str, Any] | None:
    """KEP-5007, as kube-scheduler releases a claim whose devices failed to bind: the
    pod's reservation removed and, when it was the last consumer, the allocation, the
    reservations and the device status cleared; None when there is nothing to do."""
    status = claim.get("status") or {}
    if not status.get("allocation"):
        return None
    reserved = [r for r in status.get("reservedFor") or [] if isinstance(r, Mapping)]
    others = [r for r in reserved if r.get("uid") != pod_uid]
    if len(others) == len(reserved):
        return None  # not reserved for the pod: someone else's business
    if others:
        claim["status"] = {**status, "reservedFor": others}
    else:
        claim["status"] = {k: v for k, v in status.items()
                           if k not in ("allocation", "reservedFor", "devices")}
    return claim


async def release_claim(client: KubeClient, key: NamespacedName, pod_uid: str) -> int:
    """Release KEY for the pod (`released`), one status update guarded by the version
    read; the status of the last answer (200: done or nothing to do; 404: gone)."""
    path = claim_path(key)
    resp = await read_modify_write(client, path, lambda c: released(c, pod_uid),
                                   write_path=f"{path}/status")
    return resp.status
