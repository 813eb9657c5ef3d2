"""Re-evaluation does only the work an event calls for, counted rather than timed."""

from __future__ import annotations

from typing import Any

import pytest
from patch_builders import added, class_obj, patch_obj, slice_obj

from operators.cel import stats as cel_stats
from operators.model import DeviceID
from operators.tracker import Tracker
from operators.tracker.slice_patches import SlicePatchOverlay

GPU = "gpu.example.com"
NIC = "nic.example.com"
MODELS = ("H100", "A100", "L4", "B200")
PER_SLICE = 8


def gpu(i: int, model: str | None = None) -> dict[str, Any]:
    return {
        "name": f"gpu-{i}",
        "attributes": {"model": {"string": model or MODELS[i % len(MODELS)]},
                       "uuid": {"string": f"GPU-{i}"}},
    }


def model_is(model: str) -> str:
    return f'device.attributes["{GPU}"].model == "{model}"'


@pytest.fixture
def cluster() -> tuple[Tracker, SlicePatchOverlay]:
    tracker = Tracker()
    overlay = SlicePatchOverlay()
    tracker.register_overlay(overlay)
    with tracker.batch():
        for n in range(10):
            tracker.apply(added(slice_obj(f"node-{n}-gpu", GPU, f"node-{n}",
                                          [gpu(i) for i in range(PER_SLICE)])))
            tracker.apply(added(slice_obj(f"node-{n}-nic", NIC, f"node-{n}",
                                          [{"name": "nic-0"}])))
        tracker.apply(added(class_obj("gpus", [f'device.driver == "{GPU}"'])))
        for m in MODELS:
            tracker.apply(added(patch_obj(f"family-{m}", filter={"selectors": [model_is(m)]},
                                          attributes={"example.com/family": {"string": m}})))
        tracker.apply(added(patch_obj("by-class", filter={"deviceClassName": "gpus"},
                                      attributes={"example.com/gpu": {"bool": True}})))
        tracker.apply(added(patch_obj("nics", filter={"driver": NIC},
                                      attributes={"example.com/nic": {"bool": True}})))
    return tracker, overlay


PATCHES = 6


def test_initial_state(cluster: tuple[Tracker, SlicePatchOverlay]) -> None:
    tracker, overlay = cluster
    counts = {r.name: r.matched_devices for r in overlay.reports()}
    assert counts == {"family-H100": 20, "family-A100": 20, "family-L4": 20, "family-B200": 20,
                      "by-class": 80, "nics": 10}
    v = tracker.device(DeviceID(GPU, "node-3", "gpu-1"))
    assert v is not None and v.patched_by == ("by-class", "family-A100")


def test_a_slice_update_re_evaluates_only_the_devices_that_changed(
    cluster: tuple[Tracker, SlicePatchOverlay],
) -> None:
    tracker, overlay = cluster
    before = overlay.stats.filter_checks
    devices = [gpu(i) for i in range(PER_SLICE)]
    devices[2] = gpu(2, model="B200")  # was L4
    change = tracker.apply({"type": "MODIFIED",
                            "object": slice_obj("node-4-gpu", GPU, "node-4", devices)})
    assert overlay.stats.filter_checks - before == PATCHES  # one device x every patch
    did = DeviceID(GPU, "node-4", "gpu-2")
    assert change.devices == {did}
    v = tracker.device(did)
    assert v is not None and v.attributes["example.com/family"].value == "B200"
    counts = {r.name: r.matched_devices for r in overlay.reports()}
    assert counts["family-L4"] == 19 and counts["family-B200"] == 21


def test_a_new_pool_generation_re_evaluates_that_pool_only(
    cluster: tuple[Tracker, SlicePatchOverlay],
) -> None:
    tracker, overlay = cluster
    before = overlay.stats.filter_checks
    tracker.apply({"type": "MODIFIED", "object": slice_obj(
        "node-4-gpu", GPU, "node-4", [gpu(i, "L4") for i in range(PER_SLICE)], generation=2)})
    assert 0 < overlay.stats.filter_checks - before <= PER_SLICE * PATCHES


def test_a_removed_slice_drops_its_devices_from_the_counts(
    cluster: tuple[Tracker, SlicePatchOverlay],
) -> None:
    tracker, overlay = cluster
    tracker.apply({"type": "DELETED", "object": slice_obj("node-0-gpu", GPU, "node-0", [])})
    report = overlay.report("by-class")
    assert report is not None and report.matched_devices == 72


def test_a_patch_change_evaluates_only_its_candidates(
    cluster: tuple[Tracker, SlicePatchOverlay],
) -> None:
    tracker, overlay = cluster
    before = overlay.stats.filter_checks
    tracker.apply({"type": "MODIFIED", "object": patch_obj(
        "nics", filter={"driver": NIC, "pool": "node-1"},
        attributes={"example.com/nic": {"bool": True}}, generation=2)})
    assert overlay.stats.filter_checks - before == 1  # only node-1's NIC is a candidate
    report = overlay.report("nics")
    assert report is not None and report.matched_devices == 1 and report.generation == 2
    v = tracker.device(DeviceID(NIC, "node-2", "nic-0"))
    assert v is not None and v.patched_by == ()


def test_status_writes_and_effect_only_changes_skip_filter_evaluation(
    cluster: tuple[Tracker, SlicePatchOverlay],
) -> None:
    tracker, overlay = cluster
    before = overlay.stats.filter_checks
    obj = patch_obj("family-H100", filter={"selectors": [model_is("H100")]},
                    attributes={"example.com/family": {"string": "H100"}})
    obj["metadata"]["resourceVersion"] = "99"
    obj["status"] = {"matchedDevices": 20}
    change = tracker.apply({"type": "MODIFIED", "object": obj})
    assert change.devices == frozenset()
    # A new value with the same filter: views change, filters are not re-run.
    obj["spec"]["devices"]["attributes"] = {"example.com/family": {"string": "hopper"}}
    change = tracker.apply({"type": "MODIFIED", "object": obj})
    assert len(change.devices) == 20
    assert overlay.stats.filter_checks == before


def test_a_class_change_re_evaluates_only_patches_naming_it(
    cluster: tuple[Tracker, SlicePatchOverlay],
) -> None:
    tracker, overlay = cluster
    before = overlay.stats.patch_evaluations
    tracker.apply({"type": "MODIFIED", "object": class_obj(
        "gpus", [f'device.driver == "{GPU}"', model_is("H100")])})
    assert overlay.stats.patch_evaluations - before == 1
    report = overlay.report("by-class")
    assert report is not None and report.matched_devices == 20
    tracker.apply({"type": "DELETED", "object": class_obj("gpus")})
    report = overlay.report("by-class")
    assert report is not None and report.matched_devices == 0 and report.missing_class == "gpus"
    tracker.apply(added(class_obj("unrelated")))
    assert overlay.stats.patch_evaluations - before == 2


def test_selector_results_are_cached_by_the_values_read() -> None:
    tracker = Tracker()
    overlay = SlicePatchOverlay()
    tracker.register_overlay(overlay)
    expression = model_is("H100") + ' && device.attributes["example.com"].x == 1'
    tracker.apply(added(patch_obj("p", filter={"selectors": [expression]})))
    cel_stats.reset()
    for n in range(5):
        tracker.apply(added(slice_obj(f"s{n}", GPU, f"pool-{n}",
                                      [gpu(i) for i in range(40)])))
    # 200 devices of 4 models, unique UUIDs: one evaluation per model.
    assert cel_stats.evaluations == len(MODELS)


def test_failures_over_many_devices_become_one_record() -> None:
    tracker = Tracker()
    overlay = SlicePatchOverlay()
    tracker.register_overlay(overlay)
    with tracker.batch():
        for n in range(25):
            tracker.apply(added(slice_obj(f"s{n}", GPU, f"pool-{n:02}",
                                          [gpu(i) for i in range(80)])))
        tracker.apply(added(patch_obj(
            "bad", filter={"selectors": [f'device.attributes["{GPU}"].memory > 1']})))
    records = overlay.error_records()
    assert len(records) == 1
    message = records[0]["message"]
    assert "failed on 2000 devices" in message
    assert f"{GPU}/pool-00/gpu-0, {GPU}/pool-00/gpu-1, {GPU}/pool-00/gpu-10 and 1997 more" in message
    assert "no such key: memory" in message
    # Devices going away take their failures with them.
    for n in range(24):
        tracker.apply({"type": "DELETED", "object": slice_obj(f"s{n}", GPU, f"pool-{n:02}", [])})
    report = overlay.report("bad")
    assert report is not None and report.failed_devices == 80


def test_patched_devices_survive_an_unrelated_patch_deletion(
    cluster: tuple[Tracker, SlicePatchOverlay],
) -> None:
    tracker, overlay = cluster
    change = tracker.apply({"type": "DELETED", "object": patch_obj("nics")})
    assert len(change.devices) == 10
    assert overlay.patch_names() == sorted(
        ["by-class", "family-A100", "family-B200", "family-H100", "family-L4"])
