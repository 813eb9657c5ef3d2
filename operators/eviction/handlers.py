"""kopf shell of the device-taint eviction controller (`draco run --controllers eviction`).

I/O only: the shared tracker is fed by the watch streams (see `operators.kube.feed`);
this module starts the controller loop on startup, supervised (a crash is logged,
counted and the loop restarted; readiness reads the supervisor), and stops it on cleanup.
Cluster discovery (`operators.kube.discovery`) decides, with `--slice-taints`, which
taint sources draco leaves to upstream's controller; the first pass waits for it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import kopf
import structlog

from operators.eviction import metrics
from operators.eviction.controller import EvictionController, EvictionSettings
from operators.eviction.decisions import ownership_for
from operators.kube.client import KubeClient
from operators.kube.discovery import Capabilities, DiscoveryLoop
from operators.kube.shared import shared_client
from operators.kube.shell import register_loop
from operators.kube.supervision import Supervisor
from operators.tracker import Tracker
from operators.tracker.taint_rules import TaintRuleOverlay, ensure_upstream_overlay

FEEDS = ("ResourceSlice", "ResourceClaim", "Pod", "DeviceTaintRule", "DeviceTaintRule.resource.k8s.io")
log = structlog.get_logger("draco.eviction")


def settings_from(settings: Any) -> EvictionSettings:
    return EvictionSettings(
        workers=max(int(getattr(settings, "eviction_workers", 32)), 1),
        grace_period=float(getattr(settings, "grace_period", 5.0)),
        use_eviction_api=bool(getattr(settings, "use_eviction_api", False)),
        status_interval=float(getattr(settings, "status_interval", 1.0)),
        retry_after=float(getattr(settings, "eviction_retry_after", 5.0)),
        slice_taints=str(getattr(settings, "slice_taints", "auto") or "auto"),
        full_replan=bool(getattr(settings, "eviction_full_replan", False)),
    )


def register(registry: kopf.OperatorRegistry, tracker: Tracker, settings: Any, *,
             client: KubeClient | None = None,
             ready: Callable[[], Awaitable[Any]] | None = None,
             supervisor: Supervisor | None = None,
             discovery: DiscoveryLoop | None = None) -> EvictionController:
    """Wire the controller; `ready` is awaited before its first decision (initial sync),
    and so is the first discovery."""
    if not any(isinstance(o, TaintRuleOverlay) for o in tracker.overlays):
        tracker.register_overlay(TaintRuleOverlay())
    ensure_upstream_overlay(tracker)
    api = client or shared_client(qps=float(getattr(settings, "qps", 200.0)),
                                  burst=int(getattr(settings, "burst", 400)))
    eviction_settings = settings_from(settings)
    controller = EvictionController(tracker, api, eviction_settings)
    mode = eviction_settings.slice_taints
    ownership_for(mode, False)  # a bad mode fails here, at wiring time

    def decide(caps: Capabilities) -> None:
        ownership = ownership_for(mode, caps.upstream_evicts, caps.server_version)
        log.info("slice taints", mode=mode, evicted_by="upstream" if ownership.slice_taints else "draco",
                 upstream_rules_evicted_by="upstream" if ownership.upstream_rules else "draco",
                 extended_resource_pods_evicted_by="upstream" if ownership.extended_claims else "draco",
                 server=caps.server_version)
        metrics.publish_ownership(ownership.slice_taints, ownership.upstream_rules)
        controller.set_ownership(ownership)

    if discovery is None:
        discovery = DiscoveryLoop(KubeClient(), float(getattr(settings, "discovery_interval", 60.0)))
        discovery.register(registry)
    discovery.subscribe(decide)
    found = discovery

    async def ready_all() -> None:
        await found.wait()
        if ready is not None:
            await ready()

    register_loop(registry, "eviction", controller, api, ready=ready_all, supervisor=supervisor)
    return controller
