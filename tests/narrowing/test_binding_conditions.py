"""Binding conditions (KEP-5007) in the narrowing controller: the gate stays until the
driver reports every condition True (an Event says what the pod waits for, once); a
failed binding is the allocator's to release (tests/allocator/test_binding_release.py)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tests.fake_api import FakeAPI
from tests.narrowing.test_narrowing_loop import NS, PIN_0, T0, Scenario, claim, pod, run


def binding_claim(name: str, *, conditions: list[dict[str, str]] | None = None,
                  reserved_for: str = "u-a", others: tuple[str, ...] = ()) -> dict[str, Any]:
    out = claim(name, node_selector=PIN_0, reserved_for=reserved_for)
    result = out["status"]["allocation"]["devices"]["results"][0]
    result["bindingConditions"] = ["attached"]
    result["bindingFailureConditions"] = ["attach-failed"]
    out["status"]["allocation"]["allocationTimestamp"] = "2026-01-01T00:00:00Z"
    for other in others:
        out["status"]["reservedFor"].append({"resource": "pods", "name": other, "uid": f"u-{other}"})
    if conditions is not None:
        out["status"]["devices"] = [{"driver": result["driver"], "pool": result["pool"],
                                     "device": result["device"], "conditions": [
                                         {"lastTransitionTime": "2026-01-01T00:00:01Z", "reason": "r",
                                          "message": "", **c} for c in conditions]}]
    return out


def with_claim(s: Scenario, obj: dict[str, Any]) -> None:
    s.api.add(obj)
    s.feed(s.api.claim(NS, obj["metadata"]["name"]))


def test_the_gate_stays_until_every_binding_condition_is_true() -> None:
    s = Scenario([pod("a"), binding_claim("c")])
    with_claim(s, binding_claim("c"))
    run(s.step())
    assert s.api.puts() == []  # still gated
    pending = [e for e in s.api.events if e["reason"] == "BindingConditionsPending"]
    assert len(pending) == 1 and "device gpu.example.com/p/d-c waits for binding condition attached" \
        in pending[0]["message"]
    s.feed(binding_claim("c", conditions=[{"type": "attached", "status": "False"}]))
    run(s.step())
    assert s.api.puts() == []
    assert len([e for e in s.api.events if e["reason"] == "BindingConditionsPending"]) == 1  # once
    s.feed(binding_claim("c", conditions=[{"type": "attached", "status": "True"}]))
    run(s.step())
    puts = s.api.puts()
    assert len(puts) == 1 and "schedulingGates" not in puts[0][1]["spec"]


def test_a_failed_binding_keeps_the_gate_and_is_left_to_the_allocator() -> None:
    failed = binding_claim("c", conditions=[{"type": "attach-failed", "status": "True"}])
    s = Scenario([pod("a"), failed])
    with_claim(s, failed)
    s.now = T0 + timedelta(seconds=601)
    run(s.step())
    assert s.api.puts() == [] and s.api.claim(NS, "c")["status"]["allocation"]  # no write here


def test_fake_api_paths_are_what_the_release_writes() -> None:
    assert FakeAPI.path_of(binding_claim("c")).endswith(f"/namespaces/{NS}/resourceclaims/c")
