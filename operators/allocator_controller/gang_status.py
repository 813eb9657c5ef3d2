"""The status draco writes on its own Gang objects: members, placed, domain, nodes and the
`Allocated` condition, from each gang decision.

Kept apart from the placement (`gang_loop`) because its concerns are the API's, not the
search's: decisions write from concurrent tasks, so one write per gang is in flight and
the newest lands last (`NewestLast`; the writes are merge patches, so a superseded one is
folded into the newer and a field only it set stays); a status equal to the last one
written is not written again; and a process that just started or took over reads the
stored status first, so a failover is no condition transition and a current status is
not rewritten. A PodGroup's status is upstream's and is never written here.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from datetime import datetime
from typing import Any

import structlog

from operators.gangs.gang import GangOutcome
from operators.gangs.gang_members import GangView
from operators.kube.client import KubeClient
from operators.kube.conditions import rfc3339
from operators.kube.newest_last import NewestLast, compose_merge_patches
from operators.kube.supervision import guarded
from operators.tracker.gangs import GangKey

log = structlog.get_logger("draco.allocator")


def gang_path(group: str, version: str, key: GangKey) -> str:
    return f"/apis/{group}/{version}/namespaces/{key[1]}/gangs/{key[2]}/status"


class GangStatusWriter:
    """The gang placer's status writes. `background` runs a write beside the decision
    loop (the controller's supervised tasks); `clock` stamps a condition's transition."""

    def __init__(self, client: KubeClient, clock: Callable[[], datetime],
                 background: Callable[[Coroutine[Any, Any, None]], None]) -> None:
        self.client = client
        self.clock = clock
        self.background = background
        self.written: dict[GangKey, dict[str, Any]] = {}  # the last status written, per gang
        self.statuses: NewestLast[GangKey, tuple[dict[str, Any], bool]] = NewestLast(
            lambda gkey, item: self._write(gkey, *item),
            lambda queued, newer: (compose_merge_patches(queued[0], newer[0]), newer[1] or queued[1]))
        self.latest = self.statuses.latest
        self.writing = self.statuses.writing

    def forget(self, gkey: GangKey) -> None:
        self.written.pop(gkey, None)

    def update(self, view: GangView, outcome: GangOutcome | None, reason: str | None = None) -> None:
        """Write what this decision (OUTCOME, or None when the gang was not searched) says
        of the gang, unless the last status written already says it. REASON is the
        condition's reason while the gang is not complete (default GangUnschedulable)."""
        if view.key[0] != "Gang" or view.gang is None:
            return  # a PodGroup's status is upstream's
        placed = view.placed + (len(outcome.placed) if outcome is not None and outcome.allocated else 0)
        complete = placed >= view.gang.min_count
        nodes = sorted({p.node for p in outcome.placed} if outcome is not None else set())
        if complete:
            cond = ("True", "Allocated", f"{placed} members have their devices"
                    + (f" in {outcome.domain}" if outcome is not None and outcome.domain else ""))
        else:
            text = (outcome.reason if outcome is not None else None) or "waiting"
            cond = ("False", reason or "GangUnschedulable", text)
        body: dict[str, Any] = {
            "observedGeneration": view.gang.meta.generation,
            "members": len(view.members) + len(view.not_ready),
            "placed": placed,
        }
        if outcome is not None and outcome.allocated and outcome.domain:
            body["domain"] = outcome.domain
        if nodes:
            body["nodes"] = nodes
        last = self.written.get(view.key)
        if last is not None and last["body"] == body and last["cond"] == cond:
            return
        since = last["since"] if last is not None and last["cond"][0] == cond[0] else None
        since = since or rfc3339(self.clock())
        self.written[view.key] = {"body": body, "cond": cond, "since": since}
        status = {**body, "conditions": [{
            "type": "Allocated", "status": cond[0], "reason": cond[1], "message": cond[2][:32768],
            "lastTransitionTime": since, "observedGeneration": view.gang.meta.generation}]}
        self.background(self.patch(view.key, status, first=last is None))

    async def patch(self, gkey: GangKey, status: dict[str, Any], first: bool = False) -> None:
        """Write the gang's status, one write per gang at a time and the newest last:
        decisions write from concurrent tasks, and an older status landing after a newer
        one would leave the Gang a decision behind (found by the hostile-object run)."""
        await self.statuses.submit(gkey, (status, first))

    async def _write(self, gkey: GangKey, status: dict[str, Any], first: bool) -> None:
        """FIRST: this process has not written the gang's status yet (it just started or
        took over): the status the API holds, not this process's empty memory, says
        whether the condition flips, and a status already current is not written again."""
        with guarded("allocator", "gang-status", kind=gkey[0], namespace=gkey[1], name=gkey[2]):
            path = gang_path("resource.draco.dev", "v1alpha1", gkey)
            if first:
                current = await self._against_stored(gkey, path, status)
                if current is None:
                    return
                status = current
            resp = await self.client.merge_patch(path, {"status": status})
            if not resp.ok and resp.status != 404:
                self.written.pop(gkey, None)  # written again on the next decision
                log.warning("cannot write the gang's status", gang=f"{gkey[1]}/{gkey[2]}",
                            status=resp.status)

    async def _against_stored(self, gkey: GangKey, path: str,
                              status: dict[str, Any]) -> dict[str, Any] | None:
        """STATUS with the stored condition's lastTransitionTime when its status is the
        same (a failover is no transition), or None when the stored status already says
        all of it. Unreadable: STATUS as it is."""
        resp = await self.client.get(path[: -len("/status")])
        if not resp.ok or not isinstance(resp.body, dict):
            return status
        stored = resp.body.get("status") or {}
        old = next((c for c in stored.get("conditions") or []
                    if isinstance(c, dict) and c.get("type") == "Allocated"), None)
        new = status["conditions"][0]
        if old is None or old.get("status") != new["status"] or not old.get("lastTransitionTime"):
            return status
        new = {**new, "lastTransitionTime": old["lastTransitionTime"]}
        entry = self.written.get(gkey)
        if entry is not None and entry["cond"][0] == new["status"]:
            entry["since"] = old["lastTransitionTime"]
        current = {**status, "conditions": [new]}
        if old == new and all(stored.get(k) == v for k, v in current.items() if k != "conditions"):
            return None
        return current


__all__ = ["GangStatusWriter", "gang_path"]
