"""kopf shell of the devices check (`draco run --admission-check`).

I/O only: Workloads, AdmissionChecks and ResourceFlavors (`kueue.x-k8s.io/v1beta2`),
ResourceClaimTemplates and Nodes go straight to the controller through low-level event
handlers (no state-changing handlers: they would cost extra PATCH calls per object);
devices, claims, pods and Gangs come from the shared tracker. Where Kueue's CRDs are
not installed, kopf leaves its watches unserved and the controller stays idle (it says
so once). The loop starts supervised after the initial sync and stops on cleanup.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import kopf

from operators.admission.workload import CONTROLLER_NAME, KUEUE_GROUP, KUEUE_VERSION
from operators.admission_controller.controller import AdmissionController, AdmissionSettings
from operators.kube.client import KubeClient
from operators.kube.shared import shared_client
from operators.kube.shell import register_loop
from operators.kube.supervision import Supervisor, guarded
from operators.tracker import Tracker

FEEDS = ("ResourceSlice", "DeviceClass", "ResourceClaim", "Pod", "DeviceTaintRule",
         "DeviceTaintRule.resource.k8s.io", "ResourceSlicePatch", "Gang")


def settings_from(settings: Any) -> AdmissionSettings:
    return AdmissionSettings(
        budget=float(getattr(settings, "allocation_timeout", 10.0)),
        requeue_after=int(getattr(settings, "admission_requeue_after", 30)),
        pod_timeout=float(getattr(settings, "admission_pod_timeout", 600.0)),
        controller_name=str(getattr(settings, "admission_controller_name", CONTROLLER_NAME)),
    )


def register(registry: kopf.OperatorRegistry, tracker: Tracker, settings: Any, *,
             client: KubeClient | None = None,
             ready: Callable[[], Awaitable[Any]] | None = None,
             supervisor: Supervisor | None = None) -> AdmissionController:
    """Wire the controller; `ready` is awaited before its first decision (initial sync)."""
    api = client or shared_client(qps=float(getattr(settings, "qps", 200.0)),
                                  burst=int(getattr(settings, "burst", 400)))
    controller = AdmissionController(tracker, api, settings_from(settings))

    def feed(kind: str, into: Callable[[str, Mapping[str, Any]], None]) -> Callable[..., Any]:
        async def handler(event: Mapping[str, Any], **_: Any) -> None:
            body = event.get("object")
            if not isinstance(body, Mapping):
                return
            md = body.get("metadata") or {}
            with guarded("admission", kind.lower(), kind=kind, namespace=str(md.get("namespace") or ""),
                         name=str(md.get("name") or "")):
                into(str(event.get("type") or "ADDED"), body)
        handler.__name__ = f"admission_{kind.lower()}s"
        return handler

    kopf.on.event(KUEUE_GROUP, KUEUE_VERSION, "workloads", registry=registry)(
        feed("Workload", controller.workload_event))
    kopf.on.event(KUEUE_GROUP, KUEUE_VERSION, "admissionchecks", registry=registry)(
        feed("AdmissionCheck", controller.check_event))
    kopf.on.event(KUEUE_GROUP, KUEUE_VERSION, "resourceflavors", registry=registry)(
        feed("ResourceFlavor", controller.flavor_event))
    kopf.on.event("resource.k8s.io", "v1", "resourceclaimtemplates", registry=registry)(
        feed("ResourceClaimTemplate", controller.template_event))
    kopf.on.event("", "v1", "nodes", registry=registry)(feed("Node", controller.node_event))
    register_loop(registry, "admission", controller, api, ready=ready, supervisor=supervisor)
    return controller


__all__ = ["FEEDS", "register", "settings_from"]
