"""draco_health_devices and draco_health_policy_throttled from real decisions: per pool
and state, replaced as a whole each pass, gone with their policy."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from prometheus_client import REGISTRY

from operators.health import metrics
from operators.health.decisions import decide
from operators.health.policy import HealthPolicy, parse_health_policy
from operators.model import DeviceID

T0 = datetime(2026, 11, 26, tzinfo=UTC)
DRIVER = "gpu.metrics-test.example.com"


def policy(name: str, **spec: Any) -> HealthPolicy:
    body = {"deviceSelector": {"driver": DRIVER}, "signals": [{"sliceTaint": {"key": "xid"}}],
            "taint": {"key": "health.draco.dev/unhealthy", "effect": "NoExecute"}, **spec}
    return parse_health_policy({"apiVersion": "resource.draco.dev/v1alpha1", "kind": "DeviceHealthPolicy",
                                "metadata": {"name": name, "uid": name}, "spec": body})


def devices(name: str, pool: str, state: str) -> float | None:
    return REGISTRY.get_sample_value("draco_health_devices",
                                     {"policy": name, "driver": DRIVER, "pool": pool, "state": state})


def throttled(name: str) -> float | None:
    return REGISTRY.get_sample_value("draco_health_policy_throttled", {"policy": name, "driver": DRIVER})


def gpu(pool: str, i: int) -> DeviceID:
    return DeviceID(DRIVER, pool, f"gpu-{i}")


def test_a_capped_policys_devices_per_pool_and_state() -> None:
    p = policy("capped", maxUnavailable=1)
    selected = [gpu("a", 0), gpu("a", 1), gpu("b", 0)]
    active = {gpu("a", 0): ("xid 79", T0), gpu("b", 0): ("xid 48", T0)}
    decision = decide(p, selected, active, {}, {}, {}, T0)
    metrics.publish(p, selected, decision)
    # the older-named device wins the one slot (same signal time): a/gpu-0 tainted, b/gpu-0 held back
    assert [devices("capped", "a", s) for s in metrics.STATES] == [2, 1, 0, 0, 0]
    assert [devices("capped", "b", s) for s in metrics.STATES] == [1, 0, 1, 0, 0]
    assert throttled("capped") == 1
    # the signal on b goes: b's series stay (its device is still selected), throttling ends
    decision = decide(p, selected, {gpu("a", 0): ("xid 79", T0)}, {}, {gpu("a", 0): "xid-79"}, decision.memory, T0)
    metrics.publish(p, selected, decision)
    assert devices("capped", "b", "held_back") == 0 and throttled("capped") == 0
    # pool b's devices leave the selection: its series go, a's stay
    metrics.publish(p, selected[:2], decide(p, selected[:2], {}, {}, {}, {}, T0))
    assert devices("capped", "b", "selected") is None and devices("capped", "a", "selected") == 2


def test_a_policy_that_goes_takes_its_series_with_it() -> None:
    kept, gone = policy("kept"), policy("gone", **{"for": "1m"})
    selected = [gpu("c", 0)]
    metrics.publish(kept, selected, decide(kept, selected, {}, {}, {}, {}, T0))
    pending = decide(gone, selected, {gpu("c", 0): ("xid 1", T0)}, {}, {}, {}, T0)
    metrics.publish(gone, selected, pending)
    assert devices("gone", "c", "pending") == 1 and throttled("gone") == 0
    metrics.keep_only(["kept"])
    assert devices("gone", "c", "pending") is None and throttled("gone") is None
    assert devices("kept", "c", "selected") == 1 and throttled("kept") == 0
    metrics.keep_only([])
    assert devices("kept", "c", "selected") is None and throttled("kept") is None
