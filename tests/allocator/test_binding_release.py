"""KEP-5007 in the allocator controller: a claim reserved for a gated pod whose device
reports a binding failure condition, or whose binding conditions are not all True within
kube-scheduler's default binding timeout (600 s), is released as kube-scheduler releases
it, and the pod is allocated again; a claim other pods also use keeps its allocation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from tests.allocator.test_controller_allocator import (
    DRIVER,
    NS,
    PIN,
    Scenario,
    claim,
    gpu_class,
    pod,
    slice_,
)
from tests.fake_api import run

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def bound_claim(name: str, pod_name: str, *, status: str | None, others: tuple[str, ...] = ()) -> dict[str, Any]:
    out = claim(name, allocated_device="d0", reserved_for=pod_name)
    result = out["status"]["allocation"]["devices"]["results"][0]
    result.update(bindingConditions=["attached"], bindingFailureConditions=["attach-failed"])
    out["status"]["allocation"]["allocationTimestamp"] = "2026-01-01T00:00:00Z"
    out["status"]["allocation"]["nodeSelector"] = PIN
    for other in others:
        out["status"]["reservedFor"].append({"resource": "pods", "name": other, "uid": f"u-{other}"})
    if status is not None:
        out["status"]["devices"] = [{"driver": DRIVER, "pool": "node-0", "device": "d0", "conditions": [
            {"type": status, "status": "True", "lastTransitionTime": "2026-01-01T00:00:01Z",
             "reason": "r", "message": ""}]}]
    return out


def scenario(objects: list[dict[str, Any]], now: datetime) -> Scenario:
    s = Scenario(objects)
    s.controller.clock = lambda: now
    return s


def test_a_failure_condition_releases_the_claim_and_the_pod_is_allocated_again() -> None:
    failed = bound_claim("c", "a", status="attach-failed")
    s = scenario([gpu_class(), slice_("node-0", "d0"), pod("a", "c"), failed], T0 + timedelta(seconds=5))
    run(s.step())
    assert s.claim("c")["status"] == {}  # released: allocation, reservation and status gone
    s.echo("c")  # the watch shows the release: the pod is allocated anew
    run(s.step())
    status = s.claim("c")["status"]
    assert status["allocation"]["devices"]["results"][0]["device"] == "d0" and "devices" not in status
    warning = next(e for e in s.api.events if e["reason"] == "BindingFailed")
    assert "binding failure condition attach-failed" in warning["message"]


def test_open_binding_conditions_time_out_after_600_seconds() -> None:
    waiting = bound_claim("c", "a", status=None)
    s = scenario([gpu_class(), slice_("node-0", "d0"), pod("a", "c"), waiting], T0 + timedelta(seconds=10))
    delay = run(s.step())
    assert s.api.claim_writes() == []  # still waiting: nothing to do
    assert delay <= 60
    s.controller.clock = lambda: T0 + timedelta(seconds=601)
    s.now += 600  # the monotonic clock, as the wall clock moved
    run(s.step())
    assert any("not met within 600s" in e["message"] for e in s.api.events if e["reason"] == "BindingFailed")


def test_a_claim_other_pods_use_keeps_its_allocation_only_this_pods_reservation_goes() -> None:
    shared = bound_claim("c", "a", status="attach-failed", others=("b",))
    s = scenario([gpu_class(), slice_("node-0", "d0"), pod("a", "c"), shared], T0 + timedelta(seconds=5))
    run(s.step())
    status = s.claim("c")["status"]
    assert [r["name"] for r in status["reservedFor"]][0] == "b"
    assert f"/namespaces/{NS}/resourceclaims/c/status" in " ".join(p for _, p in s.api.claim_writes())
