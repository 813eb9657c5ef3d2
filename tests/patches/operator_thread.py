"""The patches controller under kopf, in a thread, against the embedded API server.

Slices and DeviceClasses are fed to the tracker by two plain event handlers here, the
way `draco run` feeds the shared tracker.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import kopf
from kubernetes import client

from operators.patches.handlers import register
from operators.patches.kube_writer import KubePatchWriter
from operators.patches.reporter import PatchReporter
from operators.tracker import Tracker
from operators.tracker.slice_patches import SlicePatchOverlay


class OperatorThread:
    def __init__(self, url: str) -> None:
        self.url = url
        self.registry = kopf.OperatorRegistry()
        self.tracker = Tracker()
        self.tracker.register_overlay(SlicePatchOverlay())
        self.stop_flag = threading.Event()
        self.ready_flag = threading.Event()
        self.error: BaseException | None = None
        tracker = self.tracker

        @kopf.on.login(registry=self.registry)
        def login(**_: Any) -> kopf.ConnectionInfo:
            return kopf.ConnectionInfo(server=url, token="draco-embedded", insecure=True)

        @kopf.on.startup(registry=self.registry)
        def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
            settings.posting.enabled = False
            settings.watching.reconnect_backoff = 0.2

        for plural in ("resourceslices", "deviceclasses"):
            @kopf.on.event("resource.k8s.io", "v1", plural, registry=self.registry)
            def feed(event: Mapping[str, Any], **_: Any) -> None:
                tracker.apply({"type": event.get("type"), "object": dict(event["object"])})

        writer = KubePatchWriter(client.ApiClient(client.Configuration(host=url)))
        self.reporter: PatchReporter = register(
            self.registry, self.tracker, SimpleNamespace(patches_debounce=0.05), writer=writer)
        self.thread = threading.Thread(target=self._run, name="draco-patches", daemon=True)

    def _run(self) -> None:
        try:
            asyncio.run(kopf.operator(
                registry=self.registry, clusterwide=True, standalone=True,
                stop_flag=self.stop_flag, ready_flag=self.ready_flag,
            ))
        except BaseException as exc:  # surfaced by the test through `error`
            self.error = exc

    def start(self) -> OperatorThread:
        self.thread.start()
        if not self.ready_flag.wait(20):
            raise RuntimeError(f"kopf did not get ready: {self.error!r}")
        return self

    def stop(self) -> None:
        self.stop_flag.set()
        self.thread.join(10)
