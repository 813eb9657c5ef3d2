"""The allocator controller with a fake API (claims with resourceVersions, 409s) and the
real tracker, fed by hand the way the watch would feed it.

What a user would notice: a gated pod's claims allocated and reserved the way
kube-scheduler writes them (finalizer first, then allocation + reservedFor), never one
device for two claims, the Event and condition when it cannot be done, a retry when
the device view changes (and only then), recovery from 409s and from claims changed
under a write, and claims already allocated only reserved.
"""

from __future__ import annotations

from typing import Any

import pytest

from operators.allocator.pod_claims import GATE
from operators.allocator_controller.claim_writer import FINALIZER
from operators.allocator_controller.controller import (
    CONDITION,
    AllocatorController,
    AllocatorSettings,
)
from operators.cli.state import build_tracker
from operators.tracker import Tracker
from tests.fake_api import CLAIMS, ControllerScenario, FakeAPI, run

NS = "ns"
DRIVER = "gpu.example.com"
PIN = {"nodeSelectorTerms": [{"matchFields": [
    {"key": "metadata.name", "operator": "In", "values": ["node-0"]}]}]}


def gpu_class() -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}


def slice_(node: str, *devices: str, generation: int = 1) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-gpus"},
            "spec": {"driver": DRIVER, "nodeName": node,
                     "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
                     "devices": [{"name": d} for d in devices]}}


def pod(name: str, *claims: str, gates: tuple[str, ...] = (GATE,), template: bool = False,
        node_selector: dict[str, str] | None = None,
        tolerations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulingGates": [{"name": g} for g in gates],
        "containers": [{"name": "c", "image": "i"}],
        "resourceClaims": [{"name": f"r{i}", "resourceClaimTemplateName": "t"} if template else
                           {"name": f"r{i}", "resourceClaimName": c} for i, c in enumerate(claims)]}
    if node_selector:
        spec["nodeSelector"] = node_selector
    if tolerations:
        spec["tolerations"] = tolerations
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "uid": f"u-{name}",
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": spec, "status": {"phase": "Pending"}}


def claim(name: str, *, allocated_device: str | None = None, reserved_for: str | None = None,
          owner: str | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if allocated_device:
        status["allocation"] = {"devices": {"results": [
            {"request": "gpu", "driver": DRIVER, "pool": "node-0", "device": allocated_device}]},
            "nodeSelector": PIN}
    if reserved_for:
        status["reservedFor"] = [{"resource": "pods", "name": reserved_for, "uid": f"u-{reserved_for}"}]
    meta: dict[str, Any] = {"name": name, "namespace": NS, "uid": f"uc-{name}"}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": owner,
                                    "uid": f"u-{owner}", "controller": True}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": meta,
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
            "status": status}


def node(name: str, *, taints: list[dict[str, str]] | None = None, cordoned: bool = False,
         heartbeat: str = "", **labels: str) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if cordoned:
        spec["unschedulable"] = True
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "spec": spec, "status": {"conditions": [
                {"type": "Ready", "status": "True", "lastHeartbeatTime": heartbeat}]}}


MAINT = {"key": "node.example.com/maint", "value": "x", "effect": "NoSchedule"}


class Scenario(ControllerScenario):
    def __init__(self, objects: list[dict[str, Any]], nodes: tuple[str, ...] = ("node-0",)) -> None:
        self.now = 1000.0
        self.api = FakeAPI()
        self.api.nodes = {n: node(n) for n in nodes}
        for obj in objects:
            if obj["kind"] in ("Pod", "ResourceClaim"):
                self.api.add(obj)
        # the tracker's copies are the stored ones, resourceVersions included
        self.tracker: Tracker = build_tracker(
            [self.api.objects[FakeAPI.path_of(o)] if o["kind"] in ("Pod", "ResourceClaim") else o
             for o in objects])
        self.controller = AllocatorController(
            self.tracker, self.api, AllocatorSettings(report_interval=60.0),  # type: ignore[arg-type]
            monotonic=lambda: self.now)

    def echo(self, name: str) -> None:
        """The watch event of the claim as the fake API stores it now."""
        self.feed(self.api.claim(NS, name))

    def claim(self, name: str) -> dict[str, Any]:
        return self.api.claim(NS, name)

    def device_of(self, name: str) -> str | None:
        alloc = self.claim(name).get("status", {}).get("allocation")
        return alloc["devices"]["results"][0]["device"] if alloc else None

    def condition(self, name: str) -> dict[str, Any] | None:
        stored = self.api.pod(NS, name)
        return next((c for c in stored.get("status", {}).get("conditions", [])
                     if c["type"] == CONDITION), None)

    def warnings(self) -> list[str]:
        return [e["reason"] for e in self.api.events if e["type"] == "Warning"]


def test_a_gated_pods_claim_is_allocated_and_reserved_as_kube_scheduler_writes_it() -> None:
    s = Scenario([gpu_class(), slice_("node-0", "d0"), pod("a", "c"), claim("c")])
    run(s.step())
    path = f"{CLAIMS}{NS}/resourceclaims/c"
    # From the tracker's fresh copy: finalizer, then allocation + reservation, no read.
    assert s.api.claim_writes() == [("PATCH", path), ("PATCH", f"{path}/status")]
    (_, _, first), (_, _, second) = [c for c in s.api.calls if "/resourceclaims/" in c[1]]
    assert first["metadata"] == {"uid": "uc-c", "resourceVersion": "102", "finalizers": [FINALIZER]}
    assert second["metadata"] == {"uid": "uc-c", "resourceVersion": "103"}  # preconditions
    stored = s.claim("c")
    assert stored["metadata"]["finalizers"] == [FINALIZER]
    assert stored["status"]["allocation"] == {
        "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "node-0", "device": "d0"}]},
        "nodeSelector": PIN}
    assert stored["status"]["reservedFor"] == [{"resource": "pods", "name": "a", "uid": "u-a"}]
    assert [e["reason"] for e in s.api.events] == ["Allocated"]
    assert "node-0" in s.api.events[0]["message"]
    assert s.condition("a") is None


def test_two_pods_never_get_the_same_device_even_before_the_watch_confirms() -> None:
    s = Scenario([gpu_class(), slice_("node-0", "d0"), pod("a", "ca"), claim("ca"),
                  pod("b", "cb"), claim("cb")])
    run(s.step())  # no watch event in between: the hold alone keeps d0 from pod b
    assert s.device_of("ca") == "d0"
    assert s.device_of("cb") is None
    assert s.warnings() == ["Unschedulable"]
    cond = s.condition("b")
    assert cond is not None and (cond["status"], cond["reason"]) == ("False", "Unschedulable")
    assert "request gpu: 0 available, 1 needed" in cond["message"]
    assert "1 in use" in cond["message"]
    s.echo("ca")  # the watch confirms: the hold gives way to the tracker's own record
    assert len(s.controller.holds) == 0
    run(s.step())
    assert s.device_of("cb") is None
    assert s.warnings() == ["Unschedulable"]  # reported once


def test_an_unsatisfiable_pod_is_retried_when_a_device_appears_and_only_then() -> None:
    s = Scenario([gpu_class(), pod("a", "c"), claim("c")])
    run(s.step())
    assert s.warnings() == ["Unschedulable"]
    decided = s.controller.decisions
    s.feed(pod("other", gates=()))  # unrelated changes: no new search
    s.feed(claim("unrelated"))
    run(s.step())
    assert s.controller.decisions == decided
    s.feed(slice_("node-0", "d0"), "ADDED")
    run(s.step())
    assert s.device_of("c") == "d0"
    cond = s.condition("a")
    assert cond is not None and (cond["status"], cond["reason"]) == ("True", "Allocated")


def test_a_node_appearing_is_a_device_view_change() -> None:
    s = Scenario([gpu_class(), slice_("node-1", "d0"), pod("a", "c"), claim("c")], nodes=("node-0",))
    run(s.step())
    assert s.device_of("c") is None  # node-1 does not exist (yet)
    s.controller.node_event("ADDED", node("node-1"))
    run(s.step())
    assert s.device_of("c") == "d0"


def test_the_pods_node_selector_limits_the_nodes() -> None:
    s = Scenario([gpu_class(), slice_("node-0", "d0"), slice_("node-1", "d1"),
                  pod("a", "c", node_selector={"pool": "blue"}), claim("c")], nodes=())
    s.api.nodes = {"node-0": node("node-0", pool="red"), "node-1": node("node-1", pool="blue")}
    run(s.step())
    assert s.device_of("c") == "d1"


def test_a_node_label_change_wakes_the_pod_without_rebuilding_the_device_index(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A node's labels or taints changing leaves the devices as they were: the index of
    every device is kept (kwok and kube-controller-manager rewrite a label on each
    heartbeat of 2,000 nodes; rebuilding it per change cost 100 ms per allocation), and
    the pod waiting for such a node is placed with the node's new labels."""
    from operators.allocator_controller import controller as module

    builds: list[int] = []
    real = module.inventory_from_tracker
    monkeypatch.setattr(module, "inventory_from_tracker", lambda t: builds.append(1) or real(t))
    s = Scenario([gpu_class(), slice_("node-0", "d0"), slice_("node-1", "d1"),
                  pod("a", "c", node_selector={"pool": "blue"}), claim("c")], nodes=())
    s.api.nodes = {"node-0": node("node-0", pool="red"), "node-1": node("node-1", pool="red")}
    run(s.step())
    assert s.device_of("c") is None and len(builds) == 1
    for beat in range(3):
        s.controller.node_event("MODIFIED", node("node-0", pool="red", extra=str(beat)))
        run(s.step())
    s.controller.node_event("MODIFIED", node("node-1", pool="blue"))
    run(s.step())
    assert s.device_of("c") == "d1" and len(builds) == 1


def test_when_the_pods_node_selector_leaves_no_node_the_condition_counts_the_excluded_ones() -> None:
    s = Scenario([gpu_class(), slice_("node-0", "d0"), slice_("node-1", "d1"),
                  pod("a", "c", node_selector={"pool": "green"}), claim("c")], nodes=())
    s.api.nodes = {"node-0": node("node-0", pool="red"), "node-1": node("node-1", pool="blue")}
    run(s.step())
    assert s.device_of("c") is None
    cond = s.condition("a")
    assert cond is not None and (cond["status"], cond["reason"]) == ("False", "Unschedulable")
    assert ("no node fits (2 nodes: 2 excluded by the pod's node selector or affinity)"
            in cond["message"])


def test_an_allocated_claim_is_only_reserved_and_pins_the_others_node() -> None:
    shared = claim("shared", allocated_device="d0", reserved_for="x")
    s = Scenario([gpu_class(), slice_("node-0", "d0", "d1"), slice_("node-1", "e0"),
                  pod("a", "shared", "own"), shared, claim("own")], nodes=("node-0", "node-1"))
    run(s.step())
    assert s.device_of("own") == "d1"  # node-0, where the shared claim's device is
    reserved = s.claim("shared")["status"]["reservedFor"]
    assert [r["name"] for r in reserved] == ["x", "a"]
    assert s.claim("shared")["status"]["allocation"]["devices"]["results"][0]["device"] == "d0"
    assert "finalizers" not in s.claim("shared")["metadata"]  # reserving adds no finalizer


def test_a_stale_copy_or_a_conflict_is_recovered_from_by_reading_again() -> None:
    s = Scenario([gpu_class(), slice_("node-0", "d0"), pod("a", "c"), claim("c")])
    path = f"{CLAIMS}{NS}/resourceclaims/c"
    teams = ["x", "y"]

    def concurrent(_: str) -> None:  # another writer, just before each of our next two writes
        s.api.touch(path, lambda c: c["metadata"].setdefault("labels", {}).update(team=teams.pop(0)))
        if teams:
            s.api.before_write = concurrent

    s.api.before_write = concurrent
    run(s.step())
    stored = s.claim("c")
    assert stored["metadata"]["labels"] == {"team": "y"}  # the other writers' changes kept
    assert stored["metadata"]["finalizers"] == [FINALIZER]
    assert stored["status"]["allocation"]["devices"]["results"][0]["device"] == "d0"
    assert s.api.claim_writes() == [
        ("PATCH", path),  # 409: the tracker's copy is stale now
        ("GET", path), ("PUT", path),  # 409 again: read once more
        ("GET", path), ("PUT", path), ("PUT", f"{path}/status")]


def test_a_claim_allocated_elsewhere_meanwhile_is_left_and_the_pod_decided_again() -> None:
    s = Scenario([gpu_class(), slice_("node-0", "d0", "d1"), pod("a", "c"), claim("c")])
    path = f"{CLAIMS}{NS}/resourceclaims/c"

    def someone_else(_: str) -> None:
        s.api.touch(path, lambda c: c.update(status={"allocation": {"devices": {"results": [
            {"request": "gpu", "driver": DRIVER, "pool": "node-0", "device": "d1"}]}}}))

    s.api.before_write = someone_else
    run(s.step())
    assert s.device_of("c") == "d1"  # theirs, untouched
    assert len(s.controller.holds) == 0  # d0 is free again
    s.echo("c")
    run(s.step())  # decided again: allocated, not reserved for a -> reserved
    assert [r["name"] for r in s.claim("c")["status"]["reservedFor"]] == ["a"]
    assert s.device_of("c") == "d1"


def test_a_failed_write_releases_its_hold_and_is_retried_later() -> None:
    s = Scenario([gpu_class(), slice_("node-0", "d0"), pod("a", "c"), claim("c")])
    s.api.fail_writes = 2  # the fast path's patch, then the careful path's update
    run(s.step())
    assert s.device_of("c") is None
    assert len(s.controller.holds) == 0
    assert run(s.step()) == pytest.approx(5.0)  # not before retry_after
    assert s.device_of("c") is None
    s.now += 5.0
    run(s.step())
    assert s.device_of("c") == "d0"


def test_a_generated_claim_is_waited_for_and_must_belong_to_the_pod() -> None:
    gated = pod("a", "t", template=True)
    s = Scenario([gpu_class(), slice_("node-0", "d0"), gated])
    run(s.step())
    assert s.api.puts() == [] and s.api.events == []  # waits silently
    gated["status"]["resourceClaimStatuses"] = [{"name": "r0", "resourceClaimName": "a-r0-xyz"}]
    generated = claim("a-r0-xyz", owner="a")
    s.api.add(generated)
    s.feed(generated, "ADDED")
    s.api.add(gated)
    s.feed(gated)
    run(s.step())
    assert s.device_of("a-r0-xyz") == "d0"


def test_a_generated_claim_of_another_pod_is_not_allocated() -> None:
    gated = pod("a", "t", template=True)
    gated["status"]["resourceClaimStatuses"] = [{"name": "r0", "resourceClaimName": "stolen"}]
    s = Scenario([gpu_class(), slice_("node-0", "d0"), gated, claim("stolen", owner="b")])
    run(s.step())
    run(s.step())  # decided again once, then no more until retry_after
    reads = len(s.api.calls)
    run(s.step())
    assert len(s.api.calls) == reads
    assert s.device_of("stolen") is None
    assert s.warnings() == ["Unschedulable"]
    assert "not created for this pod" in s.api.events[0]["message"]


@pytest.mark.parametrize("objects", [
    pytest.param([pod("a", "c", gates=("example.com/other",)), claim("c")], id="not-gated-by-draco"),
    pytest.param([pod("a", "c"), claim("c", allocated_device="d0", reserved_for="a")],
                 id="already-allocated-and-reserved"),
    pytest.param([pod("a", "missing")], id="claim-does-not-exist"),
])
def test_pods_that_need_nothing_are_left_alone(objects: list[dict[str, Any]]) -> None:
    s = Scenario([gpu_class(), slice_("node-0", "d0"), *objects])
    run(s.step())
    assert s.api.puts() == []
    assert s.api.events == []


def test_a_missing_device_class_is_an_allocation_error() -> None:
    s = Scenario([slice_("node-0", "d0"), pod("a", "c"), claim("c")])
    run(s.step())
    cond = s.condition("a")
    assert cond is not None and cond["reason"] == "AllocationError"
    assert "gpu" in cond["message"]


def test_the_older_pod_gets_the_last_device() -> None:
    older, newer = pod("z-older", "cz"), pod("a-newer", "ca")
    older["metadata"]["creationTimestamp"] = "2025-12-31T00:00:00Z"
    s = Scenario([gpu_class(), slice_("node-0", "d0"), newer, claim("ca"), older, claim("cz")])
    run(s.step())
    assert (s.device_of("cz"), s.device_of("ca")) == ("d0", None)


def test_taking_a_device_does_not_wake_waiting_pods_but_freeing_one_does() -> None:
    s = Scenario([gpu_class(), slice_("node-0", "d0"), pod("a", "ca"), claim("ca"),
                  pod("b", "cb"), claim("cb")])
    run(s.step())
    s.echo("ca")  # a's allocation seen: b stays waiting, no new search
    decided = s.controller.decisions
    run(s.step())
    assert s.controller.decisions == decided
    s.feed(pod("a", "ca"), "DELETED")  # a went away, and its claim was deallocated
    s.api.touch(f"{CLAIMS}{NS}/resourceclaims/ca", lambda c: c.update(status={}))
    s.echo("ca")
    run(s.step())
    assert s.device_of("cb") == "d0"


def test_a_tainted_node_gets_no_devices_until_the_taint_goes_and_only_that_wakes_the_pod() -> None:
    s = Scenario([gpu_class(), slice_("node-0", "d0"), pod("a", "c"), claim("c")], nodes=())
    s.api.nodes = {"node-0": node("node-0", taints=[MAINT])}
    run(s.step())
    assert s.device_of("c") is None
    cond = s.condition("a")
    assert cond is not None and (cond["status"], cond["reason"]) == ("False", "Unschedulable")
    assert ("no node fits (1 node: 1 has a taint the pod does not tolerate "
            "(node.example.com/maint=x:NoSchedule on node-0))") in cond["message"]
    assert s.warnings() == ["Unschedulable"]
    decided = s.controller.decisions
    s.controller.node_event("MODIFIED", node("node-0", taints=[MAINT], heartbeat="later"))
    run(s.step())
    assert s.controller.decisions == decided  # a heartbeat changes nothing a pod waits for
    s.controller.node_event("MODIFIED", node("node-0"))  # the taint removed
    run(s.step())
    assert s.device_of("c") == "d0"
    cond = s.condition("a")
    assert cond is not None and (cond["status"], cond["reason"]) == ("True", "Allocated")


def test_a_toleration_lets_the_pod_use_the_tainted_node() -> None:
    tolerating = pod("a", "c", tolerations=[{"key": "node.example.com/maint", "operator": "Equal",
                                             "value": "x", "effect": "NoSchedule"}])
    s = Scenario([gpu_class(), slice_("node-0", "d0"), tolerating, claim("c")], nodes=())
    s.api.nodes = {"node-0": node("node-0", taints=[MAINT])}
    run(s.step())
    assert s.device_of("c") == "d0"


def test_a_cordoned_node_is_passed_over_and_uncordoning_wakes_the_pod() -> None:
    s = Scenario([gpu_class(), slice_("node-0", "d0"), slice_("node-1", "e0"),
                  pod("a", "ca"), claim("ca"), pod("b", "cb"), claim("cb")], nodes=())
    s.api.nodes = {"node-0": node("node-0", cordoned=True), "node-1": node("node-1")}
    run(s.step())
    # pod a (first: equally old, then by name) gets node-1's device, though node-0 comes
    # first by name: it is cordoned; pod b finds nothing left on a node that takes it
    assert (s.device_of("ca"), s.device_of("cb")) == ("e0", None)
    cond = s.condition("b")
    assert cond is not None and "1 is cordoned (spec.unschedulable: node-0)" in cond["message"]
    s.controller.node_event("MODIFIED", node("node-0"))  # uncordoned
    run(s.step())
    assert s.device_of("cb") == "d0"


def shared_slice(node: str, memory: str) -> dict[str, Any]:
    out = slice_(node)
    out["spec"]["devices"] = [{"name": "shared", "allowMultipleAllocations": True,
                               "capacity": {"memory": {"value": memory}}}]
    return out


def memory_claim(name: str, memory: str) -> dict[str, Any]:
    out = claim(name)
    out["spec"]["devices"]["requests"][0]["exactly"]["capacity"] = {"requests": {"memory": memory}}
    return out


def test_pods_share_a_device_before_the_watch_confirms_and_never_beyond_its_capacity() -> None:
    s = Scenario([gpu_class(), shared_slice("node-0", "40Gi"),
                  pod("a", "ca"), memory_claim("ca", "15Gi"), pod("b", "cb"), memory_claim("cb", "15Gi"),
                  pod("c", "cc"), memory_claim("cc", "15Gi")])
    run(s.step())  # no watch event in between: the held shares count against the 40Gi
    results = {n: s.claim(n).get("status", {}).get("allocation", {}).get("devices", {}).get("results")
               for n in ("ca", "cb", "cc")}
    assert [r[0]["device"] for r in (results["ca"], results["cb"])] == ["shared", "shared"]
    assert results["ca"][0]["consumedCapacity"] == {"memory": "15Gi"}
    assert results["ca"][0]["shareID"] != results["cb"][0]["shareID"]
    assert results["cc"] is None  # 45Gi would exceed 40Gi
    assert s.warnings() == ["Unschedulable"]
    s.echo("ca")
    s.echo("cb")  # seen back: the tracker's shares replace the held ones
    assert len(s.controller.holds) == 0
    run(s.step())
    assert s.device_of("cc") is None
