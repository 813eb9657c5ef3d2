"""DeviceHealthPolicy decisions as tables: signals x for/clearAfter x partitions x
maxUnavailable, with a fake clock (each pass is one `decide` at a given second)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from operators.health.decisions import Decision, Memory, decide, rule_name, taint_value
from operators.health.policy import HealthPolicy, parse_duration, parse_health_policy
from operators.model import DeviceID, ModelError

T0 = datetime(2026, 11, 26, tzinfo=UTC)
DRIVER = "gpu.nvidia.com"


def gpu(i: int, pool: str = "node-a") -> DeviceID:
    return DeviceID(DRIVER, pool, f"gpu-{i}")


def policy(**spec: Any) -> HealthPolicy:
    body = {"deviceSelector": {"driver": DRIVER}, "signals": [{"sliceTaint": {"key": "gpu.nvidia.com/xid"}}],
            "taint": {"key": "health.draco.dev/unhealthy", "effect": "NoExecute"}, **spec}
    return parse_health_policy({"apiVersion": "resource.draco.dev/v1alpha1", "kind": "DeviceHealthPolicy",
                                "metadata": {"name": "gpus", "uid": "u"}, "spec": body})


class Run:
    """Passes of one policy over time, keeping memory and the rules as a controller would."""

    def __init__(self, p: HealthPolicy, devices: list[DeviceID],
                 siblings: dict[DeviceID, frozenset[DeviceID]] | None = None) -> None:
        self.p, self.devices, self.siblings = p, devices, siblings or {}
        self.memory: dict[DeviceID, Memory] = {}
        self.rules: dict[DeviceID, str] = {}
        self.writes = 0
        self.last = Decision()

    def at(self, second: float, active: dict[DeviceID, str]) -> Decision:
        now = T0 + timedelta(seconds=second)
        d = decide(self.p, self.devices, {k: (v, None) for k, v in active.items()}, self.siblings,
                   self.rules, self.memory, now)
        self.writes += len(set(d.taint) - set(self.rules)) + len(d.untaint)
        self.rules = dict(d.taint)
        self.memory = d.memory
        self.last = d
        return d


BAD = {gpu(0): "gpu.nvidia.com/xid=79"}


def test_a_signal_is_tainted_after_for_and_the_rule_names_the_signal() -> None:
    run = Run(policy(**{"for": "30s"}), [gpu(0), gpu(1)])
    assert run.at(0, BAD).pending == {gpu(0): T0 + timedelta(seconds=30)}
    assert run.at(29, BAD).taint == {}
    assert run.at(30, BAD).taint == {gpu(0): "gpu.nvidia.com-xid-79"}
    assert run.last.next_wake() is None


def test_a_signal_that_drops_before_for_resets_the_wait() -> None:
    run = Run(policy(**{"for": "30s"}), [gpu(0)])
    run.at(0, BAD)
    assert run.at(10, {}).pending == {}
    assert run.at(20, BAD).pending == {gpu(0): T0 + timedelta(seconds=50)}
    assert run.writes == 0


@pytest.mark.parametrize(("clear_after", "gone_at", "expected"), [
    ("10m", 599, {gpu(0)}),  # still recovering
    ("10m", 600, set()),  # recovered: deleted
    (None, 10**6, {gpu(0)}),  # never removed by the policy
])
def test_clear_after(clear_after: str | None, gone_at: float, expected: set[DeviceID]) -> None:
    spec = {"clearAfter": clear_after} if clear_after else {}
    run = Run(policy(**spec), [gpu(0)])
    run.at(0, BAD)
    run.at(1, {})
    assert set(run.at(1 + gone_at, {}).taint) == expected


def test_flapping_costs_one_write_per_real_transition() -> None:
    run = Run(policy(clearAfter="60s"), [gpu(i) for i in range(10)])
    for second in range(120):  # gpu-0 flaps every second for two minutes
        run.at(second, BAD if second % 2 == 0 else {})
    assert run.writes == 1 and set(run.rules) == {gpu(0)}
    for second in range(120, 200):
        run.at(second, {})
    assert run.writes == 2 and run.rules == {}  # and one to clear it, 60 s after the last signal


def test_a_signal_on_a_whole_gpu_taints_its_partitions() -> None:
    whole, parts = gpu(0), [gpu(1), gpu(2)]
    siblings = {whole: frozenset(parts), parts[0]: frozenset({whole, parts[1]}),
                parts[1]: frozenset({whole, parts[0]})}
    run = Run(policy(partitions=True), [whole, *parts, gpu(3)], siblings)
    d = run.at(0, BAD)
    assert set(d.taint) == {whole, *parts}
    assert d.taint[parts[0]] == "partition-of-gpu-0-gpu.nvidia.com-xid-79"
    assert set(Run(policy(), [whole, *parts], siblings).at(0, BAD).taint) == {whole}


def test_max_unavailable_holds_back_the_rest_and_never_takes_rules_back() -> None:
    devices = [gpu(i) for i in range(100)]
    run = Run(policy(maxUnavailable="10%"), devices)
    failing = {d: "gpu.nvidia.com/gpu-lost" for d in devices[:50]}
    d = run.at(0, failing)
    assert len(d.taint) == 10 and len(d.held_back) == 40 and d.throttled and d.limit == 10
    first = set(sorted(devices[:50])[:10])  # the oldest signals first, then by device name
    assert set(d.taint) == first
    d = run.at(1, failing)
    assert set(d.taint) == first and run.writes == 10  # no more, none taken back
    # room frees up as devices recover: the held-back ones follow, in order
    run2 = Run(policy(maxUnavailable=2, clearAfter="0s"), devices[:4])
    run2.at(0, {d: "x" for d in devices[:4]})
    assert set(run2.rules) == set(devices[:2])
    run2.at(1, {d: "x" for d in devices[2:4]})
    assert set(run2.at(2, {d: "x" for d in devices[2:4]}).taint) == set(devices[2:4])


def test_a_rule_for_a_device_the_policy_no_longer_selects_is_deleted() -> None:
    p = policy(clearAfter="1h")
    other = DeviceID("nic.example.com", "node-a", "nic-0")
    d = decide(p, [gpu(0)], {}, {}, {other: "x", gpu(0): "y"}, {}, T0)
    assert d.untaint == [other] and d.recovering == {gpu(0): T0 + timedelta(hours=1)}


def test_names_and_values() -> None:
    assert rule_name("gpus", gpu(0)) == rule_name("gpus", gpu(0)) != rule_name("gpus", gpu(0, "node-b"))
    assert rule_name("gpus", gpu(0)).startswith("gpus-gpu-0-") and len(rule_name("x" * 300, gpu(0))) <= 253
    assert taint_value("gpu.nvidia.com/xid=79") == "gpu.nvidia.com-xid-79"
    assert len(taint_value("a" * 100)) == 63 and taint_value("///") == "unhealthy"
    assert Run(policy(taint={"key": "k", "value": "broken", "effect": "NoSchedule"}),
               [gpu(0)]).at(0, BAD).taint == {gpu(0): "broken"}


@pytest.mark.parametrize(("spec", "path", "message"), [
    ({"signals": [{"smoke": {}}]}, "spec.signals[0]", "unknown signal type 'smoke'"),
    ({"signals": [{"sliceTaint": {"key": "k"}, "podHealth": {}}]}, "spec.signals[0]", "exactly one"),
    ({"signals": [{"podHealth": {"health": ["Sick"]}}]}, "spec.signals[0].podHealth.health[0]", "unknown health"),
    ({"signals": []}, "spec.signals", "at least one signal"),
    ({"for": "ten minutes"}, "spec.for", "not a duration"),
    ({"maxUnavailable": "110%"}, "spec.maxUnavailable", "0% to 100%"),
    ({"taint": {"key": "k", "effect": "NoExecuteHarder"}}, "spec.taint.effect", "unknown effect"),
])
def test_a_policy_draco_does_not_understand_is_left_out_saying_where(spec: dict[str, Any], path: str,
                                                                      message: str) -> None:
    with pytest.raises(ModelError) as err:
        policy(**spec)
    assert path in str(err.value) and message in str(err.value), str(err.value)


@pytest.mark.parametrize(("text", "seconds"), [("0s", 0), ("90s", 90), ("10m", 600), ("1h30m", 5400),
                                               ("500ms", 0.5), ("0", 0)])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text).total_seconds() == seconds


def test_limit_rounds_up_and_is_at_least_one() -> None:
    assert policy(maxUnavailable="10%").limit(5) == 1
    assert policy(maxUnavailable="10%").limit(101) == 11
    assert policy(maxUnavailable="0%").limit(100) == 1
    assert policy(maxUnavailable=0).limit(100) == 0
    assert policy().limit(100) is None


def test_a_device_signal_reads_a_missing_attribute_as_no_signal_and_other_errors_as_unknown() -> None:
    from operators.health.signals import observe
    from operators.model import Attribute
    from operators.tracker.views import DeviceView

    def view(i: int, attrs: dict[str, Any]) -> DeviceView:
        from operators.model.devices import Device
        return DeviceView(gpu(i), Device(gpu(i)), attributes=attrs)

    p = policy(signals=[{"device": {"cel": 'device.attributes["example.com"].state == "degraded"'}}])
    seen = observe(p, [view(0, {"example.com/state": Attribute("string", "degraded")}), view(1, {})])
    assert set(seen.active) == {gpu(0)} and seen.unknown == set() and seen.problems == []
    p = policy(signals=[{"device": {"cel": 'device.attributes["example.com"].state / 0 == 1'}}])
    seen = observe(p, [view(0, {"example.com/state": Attribute("int", 2)})])
    assert seen.unknown == {gpu(0)} and "signals[0].device.cel" in seen.problems[0]
