"""kopf shell of the ResourceSlicePatch reporter (`draco run --controllers patches`).

I/O only: ResourceSlicePatch watch events go into the shared tracker (where the
`SlicePatchOverlay` merges them) and into the reporter, which writes status and Events
through `operators.kube`. Slices and DeviceClasses reach the tracker through the shared
feed; their changes wake the reporter through the tracker's notifications, so the
status follows slice, class and patch changes alike.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import kopf

from operators.kube.supervision import LoopState, Supervisor, default_supervisor
from operators.patches.reporter import PatchReporter, PatchWriter
from operators.tracker import Tracker
from operators.tracker.slice_patches import KIND, SlicePatchOverlay

log = logging.getLogger(__name__)

GROUP = "resource.draco.dev"
VERSION = "v1alpha1"
PLURAL = "resourceslicepatches"


def overlay_of(tracker: Tracker) -> SlicePatchOverlay:
    """The tracker's patch overlay, registered here if the caller did not."""
    for overlay in tracker.overlays:
        if isinstance(overlay, SlicePatchOverlay):
            return overlay
    overlay = SlicePatchOverlay()
    tracker.register_overlay(overlay)
    return overlay


def default_writer(settings: Any) -> PatchWriter:
    from operators.kube.client import DEFAULT_BURST, DEFAULT_QPS
    from operators.kube.shared import shared_client
    from operators.patches.kube_writer import KubePatchWriter

    # The process's rate limit, shared with every other controller `draco run` starts.
    return KubePatchWriter(shared_client(qps=float(getattr(settings, "qps", DEFAULT_QPS)),
                                         burst=int(getattr(settings, "burst", DEFAULT_BURST))))


def register(
    registry: kopf.OperatorRegistry,
    tracker: Tracker,
    settings: Any,
    *,
    writer: PatchWriter | None = None,
    supervisor: Supervisor | None = None,
) -> PatchReporter:
    """Wire the reporter into `registry`; returns it (tests read its counters)."""
    overlay = overlay_of(tracker)
    out = writer or default_writer(settings)
    reporter = PatchReporter(tracker, overlay, out,
                             debounce=float(getattr(settings, "patches_debounce", 0.2)))
    loops: list[LoopState] = []
    boss = supervisor or default_supervisor()

    @kopf.on.event(GROUP, VERSION, PLURAL, registry=registry)
    async def resourceslicepatch_event(event: Mapping[str, Any], **_: Any) -> None:
        etype = event.get("type")
        body = event.get("object")
        if not isinstance(body, Mapping):
            return
        # Bad specs are reported by the tracker/overlay and become a Faulty condition.
        tracker.apply({"type": etype, "object": {"kind": KIND, **dict(body)}})
        reporter.observe(etype, body)

    @kopf.on.startup(registry=registry)
    async def start_patch_reporter(**_: Any) -> None:
        loops.append(boss.start("draco-patch-reporter", reporter.run, controller="patches"))

    @kopf.on.cleanup(registry=registry)
    async def stop_patch_reporter(**_: Any) -> None:
        for loop in loops:
            await boss.stop(loop)
        loops.clear()
        close = getattr(out, "close", None)
        if close is not None:
            await close()

    return reporter
