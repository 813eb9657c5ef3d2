"""The reporter's pure decisions: status, the Faulty condition, and few Events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from patch_builders import added, patch_obj, slice_obj

from operators.patches.report import (
    MAX_EVENTS_PER_GENERATION,
    EventLedger,
    desired_status,
    status_differs,
)
from operators.tracker import Tracker
from operators.tracker.slice_patches import PatchReport, SlicePatchOverlay

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
GPU = "gpu.example.com"


def big_cluster(patch: dict) -> tuple[Tracker, SlicePatchOverlay]:
    tracker = Tracker()
    overlay = SlicePatchOverlay()
    tracker.register_overlay(overlay)
    with tracker.batch():
        for n in range(40):
            devices = [{"name": f"gpu-{i}", "attributes": {
                "model": {"string": "H100" if i % 2 else "A100"},
                "index": {"int": i}}} for i in range(250)]
            tracker.apply(added(slice_obj(f"s{n}", GPU, f"node-{n:02}", devices)))
        tracker.apply(added(patch))
    return tracker, overlay


def test_a_bad_patch_over_10000_devices_yields_a_handful_of_events() -> None:
    # Two different runtime errors across 10,000 devices.
    expression = (f'device.attributes["{GPU}"].model == "H100" ? '
                  f'device.attributes["{GPU}"].memory > 1 : device.attributes["{GPU}"].index')
    tracker, overlay = big_cluster(patch_obj("bad", filter={"selectors": [expression]}))
    report = overlay.report("bad")
    assert report is not None and report.failed_devices == 10_000
    ledger = EventLedger()
    events = ledger.due(report)
    assert [e.reason for e in events] == ["SelectorFailed", "SelectorFailed"]
    assert all(expression in e.message for e in events)
    assert {e.message.split("does not patch: ")[-1] for e in events} == {
        "no such key: memory", "CEL result of type int could not be converted to bool"}
    assert all("5000 devices (gpu.example.com/node-00/gpu-" in e.message for e in events)
    # Same problems on the next pass (a slice changed, say): nothing new to say.
    assert ledger.due(report) == []
    status = desired_status(report, None, T0)
    assert status["matchedDevices"] == 0
    (cond,) = status["conditions"]
    assert cond["type"] == "Faulty" and cond["status"] == "True"
    assert cond["reason"] == "SelectorFailed" and cond["observedGeneration"] == 1


def test_many_distinct_errors_are_capped_per_generation() -> None:
    # The error message names the device's own value: every device fails differently.
    expression = f'device.attributes["{GPU}"].index / 0 == 1'
    _, overlay = big_cluster(patch_obj("div", filter={"selectors": [expression]}))
    report = overlay.report("div")
    assert report is not None
    ledger = EventLedger()
    first = ledger.due(report)
    assert 1 <= len(first) <= MAX_EVENTS_PER_GENERATION
    assert ledger.due(report) == []
    newer = PatchReport(**{**{f: getattr(report, f) for f in report.__slots__},
                           "generation": 2})
    assert 1 <= len(ledger.due(newer)) <= MAX_EVENTS_PER_GENERATION


def test_compile_errors_are_announced_once_per_generation() -> None:
    report = PatchReport("p", 1, compile_errors=(("device.driver ==", "Syntax error"),))
    ledger = EventLedger()
    (event,) = ledger.due(report)
    assert event.reason == "InvalidSelector"
    assert event.message == ("selector `device.driver ==` does not compile, the patch matches "
                             "nothing: Syntax error")
    assert ledger.due(report) == []
    assert ledger.due(PatchReport("p", 1, compile_errors=report.compile_errors)) == []
    assert len(ledger.due(PatchReport("p", 2, compile_errors=report.compile_errors))) == 1


def test_a_problem_that_returns_is_announced_again() -> None:
    broken = PatchReport("p", 1, missing_class="gpus")
    ledger = EventLedger()
    assert [e.reason for e in ledger.due(broken)] == ["DeviceClassNotFound"]
    assert ledger.due(PatchReport("p", 1, matched_devices=3)) == []
    assert [e.reason for e in ledger.due(broken)] == ["DeviceClassNotFound"]


def test_the_condition_flips_and_keeps_its_transition_time() -> None:
    bad = PatchReport("p", 3, missing_class="gpus")
    s1 = desired_status(bad, None, T0)
    assert s1["conditions"][0]["lastTransitionTime"] == "2026-11-01T12:00:00Z"
    assert s1["conditions"][0]["message"] == (
        "DeviceClass 'gpus' does not exist, the patch matches nothing")
    # Still faulty later: same transition time, nothing to write.
    s2 = desired_status(bad, s1, T0 + timedelta(minutes=5))
    assert s2 == s1 and not status_differs(s1, s2)
    fixed = PatchReport("p", 4, matched_devices=7)
    s3 = desired_status(fixed, s1, T0 + timedelta(minutes=9))
    (cond,) = s3["conditions"]
    assert cond == {
        "type": "Faulty", "status": "False", "reason": "NoFaults",
        "message": "the filter matches 7 devices without errors",
        "observedGeneration": 4, "lastTransitionTime": "2026-11-01T12:09:00Z",
    }
    assert s3["matchedDevices"] == 7 and s3["observedGeneration"] == 4
    assert status_differs(s1, s3)


def test_other_conditions_are_kept() -> None:
    current = {"conditions": [{"type": "Other", "status": "True", "reason": "X", "message": "",
                               "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    status = desired_status(PatchReport("p", 1), current, T0)
    assert [c["type"] for c in status["conditions"]] == ["Other", "Faulty"]


def test_an_invalid_patch_reports_only_that() -> None:
    report = PatchReport("p", 2, invalid="spec.devices.attributes.x: must be fully qualified")
    (event,) = EventLedger().due(report)
    assert event.reason == "InvalidPatch"
    assert "must be fully qualified" in event.message
    cond = desired_status(report, None, T0)["conditions"][0]
    assert cond["reason"] == "InvalidPatch" and cond["status"] == "True"
