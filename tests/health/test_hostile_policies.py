"""DeviceHealthPolicies the hostile-object run found breaking the health controller
(tests/e2e/test_hostile_objects_real.py), pinned here without a cluster.

- A `for` or `clearAfter` the CRD's pattern lets through but no clock can add
  (`99999999999999999999h`): parsing raised OverflowError (not a ModelError), so the
  policy was never reported; one of `100000000h` parsed, and the first signal made
  `now + for` overflow inside the pass, which then failed every second for every policy.
  Upstream's durations are int64 nanoseconds: past 2562047h47m16.854775807s the policy
  is invalid, said with the field.
- A 253-character policy name with a dot where the rule name is cut: the rule's name
  became `….-<hash>`, which the API server refuses, and the pass failed again.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from operators.health.decisions import decide, rule_name
from operators.health.policy import MAX_DURATION, parse_duration, parse_health_policy
from operators.model import DeviceID, ModelError

DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
GPU = DeviceID("gpu.example.com", "node-a", "gpu-0")


def policy(**spec: Any) -> Any:
    body = {"deviceSelector": {"driver": GPU.driver}, "signals": [{"sliceTaint": {"key": "example.com/xid"}}],
            "taint": {"key": "example.com/unhealthy", "effect": "None"}, **spec}
    return parse_health_policy({"apiVersion": "resource.draco.dev/v1alpha1", "kind": "DeviceHealthPolicy",
                                "metadata": {"name": "p", "uid": "u"}, "spec": body})


@pytest.mark.parametrize(("field", "text"), [
    ("for", "99999999999999999999h"), ("for", "100000000h"), ("for", "2562048h"),
    ("for", "9223372037s"), ("clearAfter", "10000000000m"), ("clearAfter", "1" + "0" * 400 + "ms"),
])
def test_a_duration_past_int64_nanoseconds_is_an_invalid_policy_naming_the_field(field: str, text: str) -> None:
    with pytest.raises(ModelError) as err:
        policy(**{field: text})
    assert f"spec.{field}" in str(err.value) and "longest duration" in str(err.value), str(err.value)


@pytest.mark.parametrize("text", ["2562047h", "2562047h47m16s", "9223372036s", "1000000h"])
def test_the_longest_durations_upstream_takes_are_taken(text: str) -> None:
    assert parse_duration(text) <= MAX_DURATION


def test_a_signal_waiting_out_the_longest_for_is_pending_not_a_crash() -> None:
    now = datetime(2026, 11, 28, tzinfo=UTC)
    d = decide(policy(**{"for": "2562047h47m16s", "clearAfter": "2562047h"}), [GPU],
               {GPU: ("example.com/xid", None)}, {}, {}, {}, now)
    assert d.pending == {GPU: now + timedelta(hours=2562047, minutes=47, seconds=16)} and not d.taint


@pytest.mark.parametrize("cut", [240, 241, 242, 243])
def test_a_rule_name_cut_anywhere_is_a_name_the_api_server_takes(cut: int) -> None:
    name = ("a" * 62 + ".") * 4 + "a" * 1  # 253 characters
    name = name[:cut] + "." + name[cut + 1:] if name[cut - 1] != "." and name[cut + 1] != "." else name
    assert len(name) == 253
    rule = rule_name(name, GPU)
    assert len(rule) <= 253 and DNS_SUBDOMAIN.match(rule), rule


# -- the controller: one policy's failure is that policy's ------------------------------


class Writer:
    """Records the controller's writes; refuses the status of the policies named in `fail`."""

    def __init__(self, fail: set[str]) -> None:
        self.fail = fail
        self.statuses: dict[str, dict[str, Any]] = {}
        self.events: list[tuple[str, str, str]] = []

    async def create_rule(self, body: Any) -> None:
        return None

    async def delete_rule(self, name: str) -> None:
        return None

    async def patch_status(self, name: str, status: Any) -> None:
        if name in self.fail:
            raise RuntimeError(f"HTTP 422: {name}'s status refused")
        self.statuses[name] = dict(status)

    async def post_event(self, involved: Any, reason: str, message: str, type_: str) -> None:
        self.events.append((str(involved["name"]), reason, message))


def body(name: str, **spec: Any) -> dict[str, Any]:
    full = {"deviceSelector": {"driver": GPU.driver}, "signals": [{"sliceTaint": {"key": "example.com/xid"}}],
            "taint": {"key": "example.com/unhealthy", "effect": "None"}, **spec}
    return {"apiVersion": "resource.draco.dev/v1alpha1", "kind": "DeviceHealthPolicy",
            "metadata": {"name": name, "uid": f"uid-{name}", "generation": 1}, "spec": full}


async def test_a_policy_whose_pass_fails_leaves_the_others_served() -> None:
    from operators.health.controller import HealthController
    from operators.tracker import Tracker

    writer = Writer(fail={"a-refused"})
    controller = HealthController(Tracker(), writer)
    for name in ("a-refused", "b-fine", "c-fine"):
        controller.observe("ADDED", body(name))
    await controller.sync_once()
    assert set(writer.statuses) == {"b-fine", "c-fine"}
    assert controller.next_wake is not None, "the failed policy is tried again soon"


async def test_a_signal_draco_cannot_evaluate_is_one_warning_event_not_one_per_pass() -> None:
    from operators.health.controller import HealthController
    from operators.tracker import Tracker

    writer = Writer(fail=set())
    controller = HealthController(Tracker(), writer)
    controller.observe("ADDED", body("cel", signals=[{"device": {"cel": "device.attributes["}}]))
    for _ in range(3):
        await controller.sync_once()
    problems = writer.statuses["cel"]["problems"]
    assert len(problems) == 1 and problems[0].startswith("signals[0].device.cel: ")
    assert [(n, r) for n, r, _ in writer.events] == [("cel", "SignalProblem")]
    assert writer.events[0][2] == problems[0]
