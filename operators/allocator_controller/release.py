"""Which Kubernetes release `draco run`'s allocating controllers answer as.

A claim draco allocates must get the devices the cluster's own kube-scheduler would
give it, and releases differ (1.38 compares version attributes as semantic versions,
aborts on constraint errors, turns DRAFractionalCapacityRange on, ...). So the claim
allocator and the devices check read the server's `/version` once, before their first
decision, and allocate with that release (`operators.allocator.releases`) from then on;
`draco allocate` answers as the same release for the same server.

Which gates follow the release: the behaviour switches (`Semantics`) and
DRAFractionalCapacityRange, which change the answer for objects every release stores.
The gates that only decide whether a field the API server kept is read stay on
(DRADeviceTaints, DRAConsumableCapacity, DRADeviceBindingConditions,
DRAPartitionableDevices, and admin access and prioritized lists, on everywhere anyway):
a server whose gate is off drops those fields on write, so there is nothing to ignore,
and draco's own DeviceTaintRules and ResourceSlicePatches must count on 1.34 and 1.35,
where DRADeviceTaints is alpha and off — bringing them there is what draco is for.

The choice is logged once per controller when it is made (`draco.release`: release,
server_version, controller) and published as
`draco_allocation_release_info{release, server_version}`. A server outside the releases draco knows (1.39; 1.33,
which `draco run`'s preflight does not refuse) is answered as the nearest one, and a version draco cannot read as 1.37, each with a warning; draco's
embedded server and a server that does not say (404) as 1.37, silently.
"""

from __future__ import annotations

from dataclasses import replace

import structlog
from prometheus_client import Gauge

from operators.allocator.features import DEFAULT_GATES, FeatureGates
from operators.allocator.releases import DEFAULT_RELEASE, Release, release_for_server
from operators.kube.client import KubeClient

log = structlog.get_logger("draco.release")

RELEASE_INFO = Gauge(
    "draco_allocation_release_info",
    "The Kubernetes release whose kube-scheduler draco's allocating controllers answer as "
    "(1 for the current one), and the API server's gitVersion it was chosen from.",
    ["release", "server_version"],
)


def controller_gates(release: Release) -> FeatureGates:
    """RELEASE's allocator behaviour with the field gates on (see the module's docstring)."""
    return replace(DEFAULT_GATES, fractional_capacity_range=release.gates.fractional_capacity_range,
                   semantics=release.gates.semantics)


class ServerRelease:
    """The release one controller allocates as: 1.37 until `learn` has asked the server."""

    def __init__(self, controller: str) -> None:
        self.controller = controller
        self.release: Release = DEFAULT_RELEASE
        self.gates: FeatureGates = controller_gates(DEFAULT_RELEASE)
        self.server_version = ""
        self.known = False

    def choose(self, git_version: str) -> Release:
        """Settle on the release for a server reporting GIT_VERSION; logs the choice."""
        release, why = release_for_server(git_version)
        self.release, self.gates = release, controller_gates(release)
        self.server_version, self.known = git_version, True
        if why:
            log.warning(why, controller=self.controller, server_version=git_version,
                        release=release.name)
        log.info(f"allocating as Kubernetes {release.name}'s kube-scheduler",
                 controller=self.controller, release=release.name,
                 server_version=git_version or None)
        RELEASE_INFO.clear()
        RELEASE_INFO.labels(release=release.name, server_version=git_version or "unknown").set(1)
        return release

    async def learn(self, client: KubeClient) -> Release:
        """Ask the server once (later calls return the first answer). A server that
        cannot be asked is answered as 1.37, with a warning: preflight reached it a
        moment ago, so this is rare, and allocating beats waiting."""
        if self.known:
            return self.release
        try:
            resp = await client.get("/version")
        except Exception as exc:  # noqa: BLE001 - any failure: the default release, said so
            log.warning("cannot read the API server's version; allocating as Kubernetes "
                        f"{DEFAULT_RELEASE.name}", controller=self.controller, error=str(exc))
            return self.choose("")
        body = resp.body if resp.ok and isinstance(resp.body, dict) else {}
        if not resp.ok and resp.status != 404:
            log.warning("cannot read the API server's version; allocating as Kubernetes "
                        f"{DEFAULT_RELEASE.name}", controller=self.controller, status=resp.status)
        return self.choose(str(body.get("gitVersion") or ""))


__all__ = ["RELEASE_INFO", "ServerRelease", "controller_gates"]
