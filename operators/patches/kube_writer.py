"""The reporter's API writes, through draco's one write path (`operators.kube`): a merge
patch on the status subresource, and core/v1 Events, with the process's shared rate
limit and the client's retries.

No resourceVersion precondition (so no 409 handling): the reporter alone owns these
status fields, and a blind merge patch cannot undo anyone else's change."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from operators.kube.client import KubeClient
from operators.kube.events import EventRecorder
from operators.kube.shared import shared_client
from operators.patches.report import EventSpec

log = structlog.get_logger("draco.patches")

COMPONENT = "draco-patches"
STATUS_PATH = "/apis/resource.draco.dev/v1alpha1/resourceslicepatches/{name}/status"


class StatusWriteError(RuntimeError):
    """A status write failed; the reporter retries on its next pass."""


class KubePatchWriter:
    def __init__(self, client: KubeClient | None = None) -> None:
        self.client = client or shared_client()
        # The reporter's ledger already decides when to speak (once per problem and
        # generation); the recorder's time-based dedup would swallow a new generation's
        # Event that happens to read the same.
        self.events = EventRecorder(self.client, COMPONENT, dedup_seconds=0)

    async def patch_status(self, name: str, status: Mapping[str, Any]) -> None:
        """A merge patch without resourceVersion: the reporter owns these fields. A patch
        deleted meanwhile (404) needs no status."""
        resp = await self.client.merge_patch(STATUS_PATH.format(name=name),
                                             {"status": dict(status)})
        if resp.ok or resp.status == 404:
            return
        message = resp.body.get("message") if isinstance(resp.body, Mapping) else resp.body
        raise StatusWriteError(
            f"ResourceSlicePatch {name}: status write failed: HTTP {resp.status}: {message}")

    async def post_event(self, involved: Mapping[str, Any], event: EventSpec) -> None:
        posted = await self.events.emit(involved, event.reason, event.message, event.type)
        if not posted:
            log.warning("event not posted", kind=involved.get("kind"), name=involved.get("name"),
                        reason=event.reason)

    async def close(self) -> None:
        await self.client.close()
