"""What the cluster does about device taints itself, found out by asking it.

Two facts decide whether draco or upstream evicts for a taint:

* whether the API server keeps device taints and request tolerations on write. With
  the DRADeviceTaints gate off (1.34's default, alpha) the server silently drops
  `spec.devices[].taints` from a ResourceSlice; with it on (beta and on by default from
  1.36, GA in 1.37) it keeps them and kube-controller-manager's device-taint-eviction
  controller runs by default. draco probes it with a server-side dry-run create of a
  ResourceSlice carrying one taint and looks whether the taint comes back: nothing is
  stored, and the answer holds whatever gates or version the server has. When the
  probe cannot be made (no permission to create ResourceSlices), the server's version
  decides (1.36 and later keep them by default) and the record says so.
* which versions of upstream's DeviceTaintRule (`resource.k8s.io` `v1`, `v1beta2`,
  `v1alpha3`) the server serves, from API discovery.

draco's embedded server (`draco apiserver`, version `…-draco`) runs no
kube-controller-manager, so it never counts as evicting by itself.

`DiscoveryLoop` asks again every `interval` seconds and tells its subscribers when the
answer changed (an upgrade, a gate switched, the beta API enabled).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import kopf
import structlog
from prometheus_client import Gauge

from operators.kube.client import KubeClient, Response
from operators.kube.supervision import guarded

log = structlog.get_logger("draco.discovery")

GROUP = "resource.k8s.io"
RULE_VERSIONS = ("v1", "v1beta2", "v1alpha3")  # upstream's DeviceTaintRule, newest first
PROBE_PATH = f"/apis/{GROUP}/v1/resourceslices?dryRun=All"
PROBE_SLICE: dict[str, Any] = {
    "apiVersion": f"{GROUP}/v1", "kind": "ResourceSlice",
    "metadata": {"name": "draco-device-taint-probe"},
    "spec": {"driver": "probe.draco.dev", "allNodes": True,
             "pool": {"name": "draco-device-taint-probe", "generation": 1, "resourceSliceCount": 1},
             "devices": [{"name": "probe", "taints": [
                 {"key": "probe.draco.dev/kept", "effect": "NoSchedule"}]}]},
}
FIRST_KEEPING_MINOR = 36  # DRADeviceTaints beta and on by default

INFO = Gauge(
    "draco_cluster_device_taints_info",
    "What the cluster does about device taints itself (1 for the current answer): whether the "
    "API server keeps device taints, which DeviceTaintRule version upstream serves, and "
    "whether it is draco's embedded server.",
    ["keeps_device_taints", "devicetaintrule_version", "embedded"],
)


@dataclass(frozen=True, slots=True)
class Capabilities:
    server_version: str  # the server's gitVersion, "" when unknown
    embedded: bool  # draco's own server: no kube-controller-manager behind it
    keeps_device_taints: bool
    detected_by: str  # "probe" (dry-run create) or "version" (the probe was refused)
    rule_versions: tuple[str, ...]  # upstream DeviceTaintRule versions served, preferred first

    @property
    def rule_version(self) -> str | None:
        return self.rule_versions[0] if self.rule_versions else None

    @property
    def upstream_evicts(self) -> bool:
        """Whether kube-controller-manager's device-taint-eviction controller runs by
        default: the gate that keeps the fields also enables it, and only a real
        control plane has one."""
        return self.keeps_device_taints and not self.embedded

    def to_record(self) -> dict[str, Any]:
        return {"serverVersion": self.server_version, "embedded": self.embedded,
                "keepsDeviceTaints": self.keeps_device_taints, "detectedBy": self.detected_by,
                "deviceTaintRuleVersions": list(self.rule_versions),
                "upstreamEvicts": self.upstream_evicts}


def minor_of(git_version: str) -> int | None:
    match = re.match(r"v?1\.(\d+)", git_version)
    return int(match.group(1)) if match else None


def kept_taints(resp: Response) -> bool | None:
    """From the dry-run answer: True if the taint came back, None if there is no answer."""
    if not resp.ok or not isinstance(resp.body, dict):
        return None
    devices = ((resp.body.get("spec") or {}).get("devices")) or []
    return bool(devices and isinstance(devices[0], dict) and devices[0].get("taints"))


def served_rule_versions(group: Any, resources: dict[str, Any]) -> tuple[str, ...]:
    """Versions serving `devicetaintrules`, the group's preferred version first.

    `group` is the APIGroup document of /apis/resource.k8s.io, `resources` the
    APIResourceList per version (missing when the version is not served)."""
    preferred = ((group or {}).get("preferredVersion") or {}).get("version") if isinstance(group, dict) else None
    out = [v for v in RULE_VERSIONS
           if any(isinstance(r, dict) and r.get("name") == "devicetaintrules"
                  for r in (resources.get(v) or {}).get("resources") or [])]
    out.sort(key=lambda v: (v != preferred, RULE_VERSIONS.index(v)))
    return tuple(out)


async def discover(client: KubeClient, *, probe: bool = True) -> Capabilities:
    """`probe=False` asks only what reading can tell (the version decides whether the
    fields are kept): for a replica that must not write before it leads."""
    version = await client.get("/version")
    git_version = str(version.body.get("gitVersion") or "") if version.ok and isinstance(version.body, dict) else ""
    embedded = git_version.endswith("-draco")
    kept = kept_taints(await client.post(PROBE_PATH, PROBE_SLICE)) if probe else None
    detected_by = "probe"
    if kept is None:
        minor = minor_of(git_version)
        kept = minor is not None and minor >= FIRST_KEEPING_MINOR
        detected_by = "version"
    group = await client.get(f"/apis/{GROUP}")
    served = [v.get("version") for v in (group.body.get("versions") or [])] \
        if group.ok and isinstance(group.body, dict) else []
    resources: dict[str, Any] = {}
    for v in RULE_VERSIONS:
        if v in served:
            resp = await client.get(f"/apis/{GROUP}/{v}")
            if resp.ok and isinstance(resp.body, dict):
                resources[v] = resp.body
    return Capabilities(git_version, embedded, kept, detected_by,
                        served_rule_versions(group.body if group.ok else None, resources))


def publish(caps: Capabilities) -> None:
    INFO.clear()
    INFO.labels(keeps_device_taints=str(caps.keeps_device_taints).lower(),
                devicetaintrule_version=caps.rule_version or "none",
                embedded=str(caps.embedded).lower()).set(1)


Subscriber = Callable[[Capabilities], None]


class DiscoveryLoop:
    """Discovery at start and every `interval` seconds; subscribers hear of changes."""

    def __init__(self, client: KubeClient, interval: float = 60.0) -> None:
        self.client = client
        self.interval = interval
        self.current: Capabilities | None = None
        self.subscribers: list[Subscriber] = []
        self.ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def subscribe(self, callback: Subscriber) -> None:
        self.subscribers.append(callback)
        if self.current is not None:
            callback(self.current)

    async def once(self) -> Capabilities | None:
        caps: Capabilities | None = None
        with guarded("discovery", "discover"):
            caps = await discover(self.client)
        if caps is not None and caps != self.current:
            log.info("cluster device taints" if self.current is None else "cluster device taints changed",
                     **caps.to_record())
            self.current = caps
            publish(caps)
            for callback in list(self.subscribers):
                with guarded("discovery", "notify"):
                    callback(caps)
        return caps

    async def run(self) -> None:
        while True:
            await self.once()
            self.ready.set()  # a failed first discovery must not hold controllers forever
            await asyncio.sleep(self.interval)

    async def wait(self) -> None:
        await self.ready.wait()

    def register(self, registry: kopf.OperatorRegistry) -> None:
        async def start_discovery(**_: Any) -> None:
            self.ready = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self.run())

        async def stop_discovery(**_: Any) -> None:
            if self._task is not None:
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._task
                self._task = None
            await self.client.close()

        kopf.on.startup(registry=registry)(start_discovery)
        kopf.on.cleanup(registry=registry)(stop_discovery)
