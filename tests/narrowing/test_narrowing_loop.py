"""The narrowing controller with a fake clock and a fake API (pods, resourceVersions, 409s).

What a user would notice: the one PUT that narrows and ungates, other gates kept, a 409
recovered from, pods not ready or not draco's left alone, the Event and the condition
when narrowing is impossible or claims stay unallocated, and work per event.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prometheus_client import REGISTRY

from operators.cli.state import build_tracker
from operators.kube.supervision import error_count
from operators.narrowing import DRACO_GATE
from operators.narrowing.controller import CONDITION, NarrowingController, NarrowingSettings
from operators.tracker import Tracker
from tests.fake_api import PODS, ControllerScenario, FakeAPI, run

T0 = datetime(2026, 1, 1, tzinfo=UTC)
NS = "ns"
PIN_0 = {"nodeSelectorTerms": [{"matchFields": [
    {"key": "metadata.name", "operator": "In", "values": ["node-0"]}]}]}
ZONE_A = {"nodeSelectorTerms": [{"matchExpressions": [
    {"key": "zone", "operator": "In", "values": ["a"]}]}]}


def pod(name: str, *, gates: tuple[str, ...] = (DRACO_GATE,), claims: tuple[str, ...] = ("c",),
        affinity: dict[str, Any] | None = None, uid: str | None = None,
        template: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulingGates": [{"name": g} for g in gates],
        "containers": [{"name": "c", "image": "i"}],
        "resourceClaims": [{"name": f"r{i}", "resourceClaimTemplateName": "t"} if template else
                           {"name": f"r{i}", "resourceClaimName": c} for i, c in enumerate(claims)],
    }
    if affinity is not None:
        spec["affinity"] = affinity
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "uid": uid or f"u-{name}",
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": spec, "status": {"phase": "Pending"}}


def claim(name: str, *, node_selector: dict[str, Any] | None = None, allocated: bool = True,
          reserved_for: str | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if allocated:
        allocation: dict[str, Any] = {"devices": {"results": [
            {"request": "gpu", "driver": "gpu.example.com", "pool": "p", "device": f"d-{name}"}]}}
        if node_selector is not None:
            allocation["nodeSelector"] = node_selector
        status["allocation"] = allocation
    if reserved_for:
        pod_name = reserved_for.removeprefix("u-")  # the fixtures' pods have uid u-<name>
        status["reservedFor"] = [{"resource": "pods", "name": pod_name, "uid": reserved_for}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": NS, "uid": f"uc-{name}"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
            "status": status}


class Scenario(ControllerScenario):
    def __init__(self, objects: list[dict[str, Any]], *, timeout: float = 300.0,
                 act_beside: frozenset[str] = frozenset()) -> None:
        self.now = T0 + timedelta(seconds=10)
        self.tracker: Tracker = build_tracker(objects)
        self.api = FakeAPI()
        for obj in objects:
            if obj["kind"] == "Pod":
                self.api.add(obj)
        self.controller = NarrowingController(
            self.tracker, self.api, NarrowingSettings(timeout=timeout, act_beside=act_beside),  # type: ignore[arg-type]
            clock=lambda: self.now)

    def stored(self, name: str) -> dict[str, Any]:
        return self.api.pod(NS, name)

    def condition(self, name: str) -> dict[str, Any] | None:
        conds = self.stored(name).get("status", {}).get("conditions", [])
        return next((c for c in conds if c["type"] == CONDITION), None)


def test_a_ready_pod_is_narrowed_and_ungated_in_one_put() -> None:
    s = Scenario([pod("a"), claim("c", node_selector=PIN_0, reserved_for="u-a")])

    async def go() -> None:
        await s.step()
        await s.step()  # nothing new: no second write

    run(go())
    puts = s.api.puts()
    assert len(puts) == 1
    path, body = puts[0]
    assert path == f"{PODS}{NS}/pods/a"
    assert body["metadata"]["resourceVersion"] == "101"  # the version read: a precondition
    assert "schedulingGates" not in body["spec"]
    assert body["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == PIN_0
    assert [e["reason"] for e in s.api.events] == ["Narrowed"]
    assert s.condition("a") is None  # nothing went wrong: no condition written
    assert s.controller.narrowed_total == 1


def test_other_gates_stay_when_draco_may_act_beside_them() -> None:
    s = Scenario([pod("a", gates=("example.com/quota", DRACO_GATE)),
                  claim("c", node_selector=ZONE_A, reserved_for="u-a")],
                 act_beside=frozenset({"example.com/quota"}))
    run(s.step())
    (_, body), = s.api.puts()
    assert body["spec"]["schedulingGates"] == [{"name": "example.com/quota"}]


@pytest.mark.parametrize("objects", [
    pytest.param([pod("a"), claim("c", allocated=False)], id="claim-unallocated"),
    pytest.param([pod("a"), claim("c", node_selector=PIN_0)], id="allocated-not-reserved"),
    pytest.param([pod("a"), claim("c", node_selector=PIN_0, reserved_for="someone-else")],
                 id="reserved-for-another-pod"),
    pytest.param([pod("a", claims=("c", "d")), claim("c", node_selector=PIN_0, reserved_for="u-a")],
                 id="second-claim-missing"),
    pytest.param([pod("a", template=True)], id="generated-claim-not-created"),
    pytest.param([pod("a", gates=("example.com/other",)), claim("c", node_selector=PIN_0, reserved_for="u-a")],
                 id="not-gated-by-draco"),
])
def test_pods_not_ready_or_not_draco_s_are_left_alone(objects: list[dict[str, Any]]) -> None:
    s = Scenario(objects)
    run(s.step())
    assert s.api.puts() == [] and s.api.events == []


def test_a_generated_claim_named_in_the_pod_status_counts() -> None:
    p = pod("a", template=True)
    p["status"]["resourceClaimStatuses"] = [{"name": "r0", "resourceClaimName": "a-r0-xyz"}]
    s = Scenario([p, claim("a-r0-xyz", node_selector=PIN_0, reserved_for="u-a")])
    run(s.step())
    assert len(s.api.puts()) == 1


def test_acts_when_the_last_claim_becomes_reserved_and_only_reconsiders_changed_pods() -> None:
    pods = [pod(f"p{i}", claims=(f"c{i}",)) for i in range(20)]
    claims = [claim(f"c{i}", allocated=False) for i in range(20)]
    s = Scenario(pods + claims)

    async def go() -> tuple[int, int]:
        await s.step()  # first pass: every pod looked at once
        first = s.controller.considered
        s.feed(claim("c7", node_selector=PIN_0, reserved_for="u-p7"))
        await s.step()
        return first, s.controller.considered - first

    first, later = run(go())
    assert first == 20 and later == 1
    assert [p for p, _ in s.api.puts()] == [f"{PODS}{NS}/pods/p7"]


def test_a_409_rereads_and_recomputes_from_the_fresh_pod() -> None:
    s = Scenario([pod("a", gates=(DRACO_GATE,)), claim("c", node_selector=PIN_0, reserved_for="u-a")])
    path = f"{PODS}{NS}/pods/a"

    def concurrent(_: str) -> None:  # another controller adds its gate between our GET and PUT
        s.api.touch(path, lambda p: p["spec"]["schedulingGates"].append({"name": "example.com/late"}))

    s.api.before_write = concurrent
    run(s.step())
    methods = [(m, p) for m, p, _ in s.api.calls if p == path]
    assert methods == [("GET", path), ("PUT", path), ("GET", path), ("PUT", path)]
    final = s.stored("a")
    assert final["spec"]["schedulingGates"] == [{"name": "example.com/late"}]  # theirs kept, ours gone
    assert "nodeAffinity" in final["spec"]["affinity"]
    assert s.controller.narrowed_total == 1


def test_a_pod_deleted_or_ungated_meanwhile_is_left_alone() -> None:
    s = Scenario([pod("a"), pod("b", uid="u-b"), claim("c", node_selector=PIN_0, reserved_for="u-a"),
                  ])
    s.feed(claim("c2", node_selector=PIN_0, reserved_for="u-b"), "ADDED")
    s.feed(pod("b", claims=("c2",), uid="u-b"))
    del s.api.objects[f"{PODS}{NS}/pods/a"]  # deleted on the server; the watch has not told us yet
    s.api.touch(f"{PODS}{NS}/pods/b", lambda p: p["spec"].update(schedulingGates=[]))  # ungated by someone
    run(s.step())
    assert s.api.puts() == [] and s.api.events == []


def test_a_pod_replaced_under_the_same_name_is_left_alone() -> None:
    s = Scenario([pod("a"), claim("c", node_selector=PIN_0, reserved_for="u-a")])
    s.api.touch(f"{PODS}{NS}/pods/a", lambda p: p["metadata"].update(uid="u-new"))
    run(s.step())
    assert s.api.puts() == []


def test_impossible_narrowing_gets_a_warning_event_and_condition_once_and_keeps_the_gate() -> None:
    excludes_node_0 = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "NotIn", "values": ["node-0"]}]}]}}}
    s = Scenario([pod("a", affinity=excludes_node_0), claim("c", node_selector=PIN_0, reserved_for="u-a")])

    async def go() -> None:
        await s.step()
        s.feed(claim("c", node_selector=PIN_0, reserved_for="u-a") | {"metadata": {
            "name": "c", "namespace": NS, "uid": "uc-c", "labels": {"touched": "yes"}}})
        await s.step()  # reconsidered, same verdict: no second Event or condition write

    run(go())
    assert s.api.puts() == []
    assert s.stored("a")["spec"]["schedulingGates"] == [{"name": DRACO_GATE}]
    warnings = [e for e in s.api.events if e["type"] == "Warning"]
    assert [e["reason"] for e in warnings] == ["NoCommonNodes"]
    assert warnings[0]["involvedObject"]["uid"] == "u-a"
    cond = s.condition("a")
    assert cond is not None and (cond["status"], cond["reason"]) == ("False", "NoCommonNodes")
    assert DRACO_GATE in cond["message"]
    patches = [c for c in s.api.calls if c[0] == "PATCH"]
    assert len(patches) == 1


def test_claims_unallocated_past_the_timeout_are_reported_then_cleared_once_narrowed() -> None:
    s = Scenario([pod("a"), claim("c", allocated=False)], timeout=60)

    async def go() -> tuple[float, int]:
        delay = await s.step()  # created at T0, now T0+10: due at T0+60
        before = len(s.api.events)
        s.now = T0 + timedelta(seconds=61)
        await s.step()
        s.now = T0 + timedelta(seconds=90)
        s.feed(claim("c", node_selector=PIN_0, reserved_for="u-a"))
        await s.step()
        return delay, before

    delay, before = run(go())
    assert before == 0
    assert delay == pytest.approx(50.0)  # sleeps until the deadline, no polling
    reasons = [(e["type"], e["reason"]) for e in s.api.events]
    assert reasons == [("Warning", "ClaimsNotAllocated"), ("Normal", "Narrowed")]
    assert "claim c is not allocated" in s.api.events[0]["message"]
    cond = s.condition("a")
    assert cond is not None and (cond["status"], cond["reason"]) == ("True", "Narrowed")
    assert len(s.api.puts()) == 1


def test_a_node_pinned_allocation_gives_the_chosen_node_when_the_exact_narrowing_cannot_be_written() -> None:
    two_terms = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}]}}}
    rack_or_row = {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]},
        {"matchExpressions": [{"key": "row", "operator": "In", "values": ["w1"]}]}]}
    s = Scenario([pod("a", claims=("c", "d"), affinity=two_terms),
                  claim("c", node_selector=rack_or_row, reserved_for="u-a"),
                  claim("d", node_selector=PIN_0, reserved_for="u-a")])
    s.api.nodes["node-0"] = {"metadata": {"name": "node-0", "labels": {"zone": "a", "rack": "r1"}}}
    run(s.step())
    (_, body), = s.api.puts()
    terms = body["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert len(terms) == 2  # KEP-3838: no term added or removed
    for term in terms:
        assert {"key": "rack", "operator": "In", "values": ["r1"]} in term["matchExpressions"]
        assert term["matchFields"] == PIN_0["nodeSelectorTerms"][0]["matchFields"]
    assert ("GET", "/api/v1/nodes/node-0", None) in s.api.calls


def test_a_failed_write_is_retried_after_the_backoff() -> None:
    s = Scenario([pod("a"), claim("c", node_selector=PIN_0, reserved_for="u-a")])
    s.api.fail_writes = 1

    async def go() -> float:
        await s.step()  # the PUT fails (the real loop is woken to re-plan)
        delay = await s.step()  # not yet: sleeps until the retry is due
        s.now += timedelta(seconds=6)
        await s.step()
        return delay

    delay = run(go())
    assert 0 < delay <= 5
    assert len(s.api.puts()) == 2
    assert "schedulingGates" not in s.stored("a")["spec"]


def test_a_crashing_step_is_counted_and_retried_not_fatal() -> None:
    s = Scenario([pod("a"), claim("c", node_selector=PIN_0, reserved_for="u-a")])
    real = s.api.request
    crashes = [1]

    async def crashing(method: str, path: str, body: Any = None, content_type: str = "") -> Any:
        if method == "PUT" and crashes:
            crashes.pop()
            raise RuntimeError("connection pool exploded")
        return await real(method, path, body, content_type)

    s.api.request = crashing  # type: ignore[method-assign]
    before = error_count("narrowing", "narrow")

    async def go() -> None:
        await s.step()
        s.now += timedelta(seconds=6)
        await s.step()

    run(go())
    assert error_count("narrowing", "narrow") == before + 1
    assert "schedulingGates" not in s.stored("a")["spec"]


def test_draco_run_wires_the_narrowing_controller_on_pods_and_claims() -> None:
    from types import SimpleNamespace

    from operators.cli.run import CONTROLLERS, FEEDS, build

    assert "narrowing" in CONTROLLERS and set(FEEDS["narrowing"]) == {
        "Pod", "ResourceClaim", "Gang", "PodGroup"}  # gangs: members are ungated together
    _, _, started = build(["narrowing"], SimpleNamespace(narrowing_timeout=42.0))
    controller = started["narrowing"]
    assert isinstance(controller, NarrowingController)
    assert controller.settings.timeout == 42.0


def test_a_gated_pod_without_claims_or_with_unrestricted_allocations_is_just_ungated() -> None:
    s = Scenario([pod("a", claims=()), pod("b"), claim("c", node_selector=None, reserved_for="u-b")])
    run(s.step())
    bodies = {path.rsplit("/", 1)[1]: body for path, body in s.api.puts()}
    assert sorted(bodies) == ["a", "b"]
    for body in bodies.values():
        assert "schedulingGates" not in body["spec"] and "affinity" not in body["spec"]


def test_a_pod_behind_another_gate_is_left_alone_and_its_timeout_starts_when_the_gate_goes() -> None:
    """Kueue may keep a workload queued for hours: no ClaimsNotAllocated report for that
    time, and none the moment it is admitted; the timeout counts from the gate's removal."""
    s = Scenario([pod("a", gates=("kueue.x-k8s.io/admission", DRACO_GATE)),
                  claim("c", node_selector=PIN_0, reserved_for="u-a")], timeout=60)

    async def go() -> None:
        s.now = T0 + timedelta(hours=5)
        await s.step()  # ready claims, but another gate: nothing written
        assert s.api.puts() == [] and s.api.events == []
        s.feed(pod("a"))  # admitted: only draco's gate left
        s.feed(claim("c", allocated=False))  # ... and, say, its claim released meanwhile
        await s.step()
        assert s.api.events == [], "the timeout starts now, not at the pod's creation"
        s.now = T0 + timedelta(hours=5, seconds=61)
        await s.step()

    run(go())
    (event,) = s.api.events
    assert event["reason"] == "ClaimsNotAllocated"
    assert "60s after its other scheduling gates were removed" in event["message"]


def test_the_narrowing_duration_counts_from_when_the_other_gate_left() -> None:
    """`draco_allocation_duration_seconds{controller="narrowing"}` is draco's part: for a
    pod Kueue kept queued for five hours, from the moment its gate went."""
    labels = {"controller": "narrowing"}
    s = Scenario([pod("a", gates=("kueue.x-k8s.io/admission", DRACO_GATE)),
                  claim("c", node_selector=PIN_0, reserved_for="u-a")])
    before = REGISTRY.get_sample_value("draco_allocation_duration_seconds_sum", labels) or 0.0

    async def go() -> None:
        s.now = T0 + timedelta(hours=5)
        await s.step()
        assert s.api.puts() == []
        s.feed(pod("a"))  # admitted: only draco's gate left, its claim not yet allocated
        s.feed(claim("c", allocated=False))
        await s.step()
        s.now = T0 + timedelta(hours=5, seconds=3)
        s.feed(claim("c", node_selector=PIN_0, reserved_for="u-a"))  # allocated 3 s later
        await s.step()

    run(go())
    assert len(s.api.puts()) == 1
    took = (REGISTRY.get_sample_value("draco_allocation_duration_seconds_sum", labels) or 0.0) - before
    assert took == pytest.approx(3.0), "3 s from the gate's removal, not five hours"
