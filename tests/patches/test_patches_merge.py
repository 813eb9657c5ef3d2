"""The KEP-5027 merge table (merge_cases.yaml) through the tracker and the patch overlay."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from patch_builders import added, class_obj, patch_from_case, slices_from_devices

from operators.model import DeviceID, parse_attribute
from operators.tracker import Tracker
from operators.tracker.slice_patches import SlicePatchOverlay

CASES: list[dict[str, Any]] = yaml.safe_load(
    (Path(__file__).parent / "merge_cases.yaml").read_text()
)
ORDERS = ("slices-first", "patches-first", "classes-last")


def build(case: dict[str, Any], order: str) -> tuple[Tracker, SlicePatchOverlay]:
    tracker = Tracker()
    overlay = SlicePatchOverlay()
    tracker.register_overlay(overlay)
    slices = [added(s) for s in slices_from_devices(case["devices"])]
    classes = [added(class_obj(c["name"], c.get("selectors", ()))) for c in case.get("classes", ())]
    patches = [added(patch_from_case(p)) for p in case.get("patches", ())]
    if order == "slices-first":
        events = classes + slices + patches
    elif order == "patches-first":
        events = classes + patches + slices
    else:
        events = patches + slices + classes
    for ev in events:  # one by one: every step exercises the incremental path
        change = tracker.apply(ev)
        assert not change.errors, change.errors
    return tracker, overlay


def view_of(tracker: Tracker, did: DeviceID) -> dict[str, Any]:
    v = tracker.device(did)
    assert v is not None
    return {
        "attributes": {k: a.to_api() for k, a in v.attributes.items()},
        "capacity": dict(v.capacity),
        "patchedBy": list(v.patched_by),
    }


def published_of(tracker: Tracker, did: DeviceID) -> dict[str, Any]:
    d = tracker.published_device(did)
    assert d is not None
    return {
        "attributes": {k: a.to_api() for k, a in d.attributes.items()},
        "capacity": dict(d.capacity),
        "patchedBy": [],
    }


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_merge_table(case: dict[str, Any], order: str) -> None:
    tracker, overlay = build(case, order)
    expect = case.get("expect", {})
    for d in case["devices"]:
        did = DeviceID(*d["id"].split("/"))
        got = view_of(tracker, did)
        if d["id"] not in expect:
            assert got == published_of(tracker, did), d["id"]
            continue
        want = expect[d["id"]]
        published = published_of(tracker, did)
        want_attrs = {
            k: parse_attribute(v).to_api()
            for k, v in want.get("attributes", published["attributes"]).items()
        }
        assert got["attributes"] == want_attrs, d["id"]
        assert got["capacity"] == {
            k: str(v) for k, v in want.get("capacity", published["capacity"]).items()
        }, d["id"]
        assert got["patchedBy"] == want.get("patchedBy", []), d["id"]
        # The overlay's own per-device answer agrees with the composed view.
        verdict = overlay.patched(did)
        assert (list(verdict.patched_by) if verdict else []) == got["patchedBy"]
    for name, count in case.get("matched", {}).items():
        report = overlay.report(name)
        assert report is not None and report.matched_devices == count, name
    if "errors" in case:
        records = overlay.error_records()
        assert all(set(r) == {"object", "message"} for r in records)
        lines = [f"{r['object']} {r['message']}" for r in records]
        assert len(lines) == len(case["errors"]), lines
        for want_text, line in zip(case["errors"], lines, strict=True):
            assert want_text in line, (want_text, line)
