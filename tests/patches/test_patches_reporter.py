"""The reporter loop against a recording writer: what it writes and when."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from patch_builders import added, class_obj, patch_obj, slice_obj

from operators.patches.report import EventSpec
from operators.patches.reporter import PatchReporter
from operators.tracker import Tracker
from operators.tracker.slice_patches import SlicePatchOverlay

GPU = "gpu.example.com"
T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


class Recorder:
    def __init__(self) -> None:
        self.statuses: list[tuple[str, dict[str, Any]]] = []
        self.events: list[tuple[str, EventSpec]] = []

    async def patch_status(self, name: str, status: Mapping[str, Any]) -> None:
        self.statuses.append((name, dict(status)))

    async def post_event(self, involved: Mapping[str, Any], event: EventSpec) -> None:
        assert involved["kind"] == "ResourceSlicePatch" and involved["uid"] == "uid-1"
        self.events.append((involved["name"], event))


def setup() -> tuple[Tracker, PatchReporter, Recorder]:
    tracker = Tracker()
    overlay = SlicePatchOverlay()
    tracker.register_overlay(overlay)
    rec = Recorder()
    reporter = PatchReporter(tracker, overlay, rec, clock=lambda: T0, debounce=0)
    devices = [{"name": f"gpu-{i}", "attributes": {"model": {"string": "H100"}}}
               for i in range(4)]
    tracker.apply(added(slice_obj("s", GPU, "node-a", devices)))
    return tracker, reporter, rec


def feed(tracker: Tracker, reporter: PatchReporter, obj: dict[str, Any],
         etype: str = "ADDED") -> None:
    obj["metadata"]["uid"] = "uid-1"
    tracker.apply({"type": etype, "object": obj})
    reporter.observe(etype, obj)


async def test_status_follows_devices_and_events_are_not_repeated() -> None:
    tracker, reporter, rec = setup()
    feed(tracker, reporter, patch_obj("p", filter={"selectors": [
        f'device.attributes["{GPU}"].model == "H100"']}))
    assert await reporter.sync_once() == 1
    ((name, status),) = rec.statuses
    assert name == "p" and status["matchedDevices"] == 4
    assert status["conditions"][0]["status"] == "False"
    assert await reporter.sync_once() == 0  # nothing changed, nothing written

    tracker.apply({"type": "DELETED", "object": slice_obj("s", GPU, "node-a", [])})
    assert await reporter.sync_once() == 1
    assert rec.statuses[-1][1]["matchedDevices"] == 0


async def test_a_faulty_patch_gets_one_event_and_a_condition_until_fixed() -> None:
    tracker, reporter, rec = setup()
    bad = patch_obj("p", filter={"selectors": [f'device.attributes["{GPU}"].memory > 1']})
    feed(tracker, reporter, bad)
    await reporter.sync_once()
    ((_, event),) = rec.events
    assert event.reason == "SelectorFailed"
    assert "failed on 4 devices" in event.message and "no such key: memory" in event.message
    cond = rec.statuses[-1][1]["conditions"][0]
    assert (cond["status"], cond["reason"], cond["observedGeneration"]) == (
        "True", "SelectorFailed", 1)
    await reporter.sync_once()
    assert len(rec.events) == 1

    fixed = patch_obj("p", filter={"selectors": [f'device.attributes["{GPU}"].model == "H100"']},
                      generation=2)
    feed(tracker, reporter, fixed, "MODIFIED")
    await reporter.sync_once()
    cond = rec.statuses[-1][1]["conditions"][0]
    assert (cond["status"], cond["reason"], cond["observedGeneration"]) == (
        "False", "NoFaults", 2)
    assert len(rec.events) == 1


async def test_a_restart_does_not_repeat_events_the_condition_already_tells() -> None:
    tracker, reporter, rec = setup()
    bad = patch_obj("p", filter={"deviceClassName": "missing"})
    feed(tracker, reporter, bad)
    await reporter.sync_once()
    assert len(rec.events) == 1
    stored = rec.statuses[-1][1]

    tracker2, reporter2, rec2 = setup()
    bad["status"] = stored
    feed(tracker2, reporter2, bad)
    assert await reporter2.sync_once() == 0
    # The class appears: the condition clears.
    tracker2.apply(added(class_obj("missing")))
    await reporter2.sync_once()
    assert rec2.statuses[-1][1]["conditions"][0]["status"] == "False"
    assert rec2.statuses[-1][1]["matchedDevices"] == 4


async def test_the_loop_wakes_on_tracker_changes() -> None:
    tracker, reporter, rec = setup()
    feed(tracker, reporter, patch_obj("p"))
    task = asyncio.create_task(reporter.run())
    try:
        for _ in range(3000):
            await asyncio.sleep(0.01)
            if rec.statuses:
                break
        assert rec.statuses[-1][1]["matchedDevices"] == 4
        tracker.apply(added(slice_obj("s2", GPU, "node-b", [{"name": "gpu-0"}])))
        for _ in range(3000):
            await asyncio.sleep(0.01)
            if rec.statuses[-1][1]["matchedDevices"] == 5:
                break
        assert rec.statuses[-1][1]["matchedDevices"] == 5
    finally:
        task.cancel()


class FailingFor(Recorder):
    """A writer whose status writes for one patch fail (an API outage, a bug)."""

    def __init__(self, bad: str) -> None:
        super().__init__()
        self.bad = bad

    async def patch_status(self, name: str, status: Mapping[str, Any]) -> None:
        if name == self.bad:
            raise RuntimeError("the API server is on fire")
        await super().patch_status(name, status)


async def test_one_failing_patch_is_counted_and_retried_while_the_others_are_served() -> None:
    from operators.kube.supervision import error_count

    tracker = Tracker()
    overlay = SlicePatchOverlay()
    tracker.register_overlay(overlay)
    writer = FailingFor("a")
    reporter = PatchReporter(tracker, overlay, writer, clock=lambda: T0, debounce=0)
    tracker.apply(added(slice_obj("s", GPU, "node-a", [{"name": "gpu-0"}])))
    for name in ("a", "b", "c"):
        feed(tracker, reporter, patch_obj(name, filter={"driver": GPU}))
    before = error_count("patches", "status")
    assert await reporter.sync_once() == 2
    assert sorted(name for name, _ in writer.statuses) == ["b", "c"]
    assert reporter.failed == ["a"]
    assert error_count("patches", "status") == before + 1
    writer.bad = ""  # the outage ends: the next pass writes the patch it missed
    assert await reporter.sync_once() == 1
    assert [name for name, _ in writer.statuses][-1] == "a" and reporter.failed == []
