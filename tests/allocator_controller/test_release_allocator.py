"""`draco run`'s claim allocator answers as the kube-scheduler of the cluster it runs in.

What a user would notice: against a 1.38 server a gated pod whose claim matches version
attributes differing only in build metadata gets its devices (1.38 compares semantic
versions), against 1.37 it is reported Unschedulable (1.37 compares the text), exactly as
each release's kube-scheduler does and as `draco allocate` answers for that server. A
server newer than draco knows is answered as the newest release it knows, with a warning;
draco's embedded server and a server that does not say as 1.37. On 1.34, where the
DRADeviceTaints gate is off, draco's own DeviceTaintRules still keep devices away.
The choice is logged once and published as a metric.
"""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import REGISTRY
from structlog.testing import capture_logs

from operators.allocator.pod_claims import GATE
from operators.allocator_controller.controller import (
    CONDITION,
    AllocatorController,
    AllocatorSettings,
)
from operators.cli.state import build_tracker
from operators.kube.client import Response
from tests.fake_api import ControllerScenario, FakeAPI, run

NS = "ns"
DRIVER = "driver-a"


class VersionedAPI(FakeAPI):
    """The fake API server, reporting GIT_VERSION at /version (None: it has no /version)."""

    def __init__(self, git_version: str | None) -> None:
        super().__init__()
        self.git_version = git_version

    async def request(self, method: str, path: str, body: Any = None, content_type: str = "") -> Response:
        if method == "GET" and path == "/version" and self.git_version is not None:
            self.calls.append((method, path, None))
            return Response(200, {"major": "1", "gitVersion": self.git_version})
        return await super().request(method, path, body, content_type)


def device_class() -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "dev"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}


def versioned_slice(*versions: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": "node-0-devices"},
            "spec": {"driver": DRIVER, "nodeName": "node-0",
                     "pool": {"name": "pool-1", "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": f"dev-{i}", "attributes": {"v": {"version": v}}}
                                 for i, v in enumerate(versions)]}}


def gated_pod(claim: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": NS, "uid": "u-p",
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"schedulingGates": [{"name": GATE}], "containers": [{"name": "c", "image": "i"}],
                     "resourceClaims": [{"name": "r", "resourceClaimName": claim}]},
            "status": {"phase": "Pending"}}


def matching_claim(count: int = 2) -> dict[str, Any]:
    """COUNT devices whose version attribute `v` matches (matchAttribute)."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "c", "namespace": NS, "uid": "uc-c"},
            "spec": {"devices": {
                "requests": [{"name": "req-0", "exactly": {"deviceClassName": "dev", "count": count}}],
                "constraints": [{"matchAttribute": f"{DRIVER}/v"}]}},
            "status": {}}


def taint_rule(device: str) -> dict[str, Any]:
    return {"apiVersion": "resource.draco.dev/v1alpha1", "kind": "DeviceTaintRule",
            "metadata": {"name": "maint"},
            "spec": {"deviceSelector": {"driver": DRIVER, "pool": "pool-1", "device": device},
                     "taint": {"key": "maint", "effect": "NoSchedule"}}}


def node() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-0", "labels": {}},
            "spec": {}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}


class Cluster(ControllerScenario):
    def __init__(self, git_version: str | None, objects: list[dict[str, Any]]) -> None:
        self.api = VersionedAPI(git_version)
        self.api.nodes = {"node-0": node()}
        for obj in objects:
            if obj["kind"] in ("Pod", "ResourceClaim"):
                self.api.add(obj)
        self.tracker = build_tracker(
            [self.api.objects[FakeAPI.path_of(o)] if o["kind"] in ("Pod", "ResourceClaim") else o
             for o in objects])
        self.controller = AllocatorController(self.tracker, self.api, AllocatorSettings())  # type: ignore[arg-type]

    def devices(self) -> list[str]:
        alloc = (self.api.claim(NS, "c").get("status") or {}).get("allocation")
        return sorted(r["device"] for r in alloc["devices"]["results"]) if alloc else []

    def condition(self) -> dict[str, Any] | None:
        return next((c for c in (self.api.pod(NS, "p").get("status") or {}).get("conditions") or []
                     if c["type"] == CONDITION), None)


def build_metadata_world() -> list[dict[str, Any]]:
    """upstream's "versions that differ only in build metadata" (tests/allocator's table)."""
    return [device_class(), versioned_slice("1.0.0+build.1", "1.0.0+build.2"), gated_pod("c"),
            matching_claim()]


# server gitVersion -> the release answered as, whether the two devices match, the warning
CASES = [
    ("v1.38.0-beta.0", "1.38", True, None),
    ("v1.38.2", "1.38", True, None),
    ("v1.37.2", "1.37", False, None),
    ("v1.36.3", "1.36", False, None),
    ("v1.35.8", "1.35", False, None),
    ("v1.34.4", "1.34", False, None),
    # newer than draco knows: the newest it knows; older: the oldest (preflight refuses none)
    ("v1.39.0", "1.38", True, "outside the releases draco knows"),
    ("v1.33.5", "1.34", False, "outside the releases draco knows"),
    ("v1.37.0-draco", "1.37", False, None),  # draco's embedded server
    ("devel", "1.37", False, "is not one draco can read"),
    (None, "1.37", False, None),  # no /version at all: the default release
]


@pytest.mark.parametrize(("server", "release", "match", "warned"), CASES)
def test_the_allocator_answers_as_the_servers_release(server: str | None, release: str, match: bool,
                                                       warned: str | None) -> None:
    c = Cluster(server, build_metadata_world())
    with capture_logs() as logs:
        run(c.step())
    assert c.controller.k8s_release.release.name == release
    chosen = [e for e in logs if e.get("release") == release and e["log_level"] == "info"]
    assert len(chosen) == 1 and chosen[0]["controller"] == "allocator"
    assert f"Kubernetes {release}" in chosen[0]["event"]
    warnings = [e for e in logs if e["log_level"] == "warning" and e.get("controller") == "allocator"]
    assert [warned in e["event"] for e in warnings] == ([True] if warned else [])
    cond = c.condition()
    if match:
        assert c.devices() == ["dev-0", "dev-1"]
        assert cond is None
    else:
        assert c.devices() == []
        assert cond is not None and (cond["status"], cond["reason"]) == ("False", "Unschedulable")
    info = REGISTRY.get_sample_value("draco_allocation_release_info",
                                     {"release": release, "server_version": server or "unknown"})
    assert info == 1.0


def test_the_server_is_asked_once() -> None:
    c = Cluster("v1.38.0-beta.0", build_metadata_world())
    run(c.step())
    run(c.step())
    c.feed(versioned_slice("1.0.0+build.1", "1.0.0+build.2", "2.0.0"), "MODIFIED")
    run(c.step())
    assert [p for m, p, _ in c.api.calls if p == "/version"] == ["/version"]
    assert c.controller.k8s_release.release.name == "1.38"


def test_a_version_equal_in_text_matches_on_every_release() -> None:
    """The part every release agrees on: the same text matches, so only the 1.38 switch
    above makes the difference."""
    for server in ("v1.34.4", "v1.37.2", "v1.38.0-beta.0"):
        c = Cluster(server, [device_class(), versioned_slice("1.0.0+a", "1.0.0+a"), gated_pod("c"),
                             matching_claim()])
        run(c.step())
        assert c.devices() == ["dev-0", "dev-1"], server


@pytest.mark.parametrize("server", ["v1.34.4", "v1.35.8", "v1.38.0-beta.0"])
def test_dracos_own_taints_count_whatever_the_release(server: str) -> None:
    """On 1.34 and 1.35 DRADeviceTaints is alpha and off, yet a draco DeviceTaintRule keeps
    its device away: that is what draco brings to those clusters."""
    c = Cluster(server, [device_class(), versioned_slice("1.0.0", "1.0.0"), taint_rule("dev-0"),
                         gated_pod("c"), matching_claim(count=1)])
    run(c.step())
    assert c.devices() == ["dev-1"]
