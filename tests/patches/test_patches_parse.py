"""Bad ResourceSlicePatch input: a clear error naming the field, never a crash, and a
patch that stops parsing stops patching (and says why)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from patch_builders import added, patch_obj, slices_from_devices

from operators.model import DeviceID, ModelError, ObjectRef, parse_object
from operators.tracker import Tracker
from operators.tracker.slice_patches import ResourceSlicePatch, SlicePatchOverlay

GOOD = {"example.com/x": {"int": 1}}

# (case id, spec.devices, error path, message substring)
BAD: list[tuple[str, dict[str, Any], str, str]] = [
    ("short attribute name", {"attributes": {"model": {"string": "x"}}},
     "spec.devices.attributes.model", "must be fully qualified"),
    ("short capacity name", {"capacity": {"memory": {"value": "1Gi"}}},
     "spec.devices.capacity.memory", "must be fully qualified"),
    ("bad domain", {"attributes": {"Example_com/x": {"int": 1}}},
     "spec.devices.attributes.Example_com/x", "DNS subdomain"),
    ("bad identifier", {"attributes": {"example.com/x-y": {"int": 1}}},
     "spec.devices.attributes.example.com/x-y", "C identifier"),
    ("two value types", {"attributes": {"example.com/x": {"int": 1, "string": "a"}}},
     "spec.devices.attributes.example.com/x", "exactly one"),
    ("null and a value", {"attributes": {"example.com/x": {"null": {}, "int": 1}}},
     "spec.devices.attributes.example.com/x", "exactly one"),
    ("no value", {"attributes": {"example.com/x": {}}},
     "spec.devices.attributes.example.com/x", "exactly one"),
    ("wrong value type", {"attributes": {"example.com/x": {"int": "1"}}},
     "spec.devices.attributes.example.com/x.int", "expected an integer"),
    ("capacity removal", {"capacity": {"example.com/m": {"null": {}}}},
     "spec.devices.capacity.example.com/m", "cannot be removed"),
    ("bad quantity", {"capacity": {"example.com/m": {"value": "lots"}}},
     "spec.devices.capacity.example.com/m.value", "invalid quantity"),
    ("too many entries",
     {"attributes": {f"example.com/a{i}": {"int": i} for i in range(20)},
      "capacity": {f"example.com/c{i}": {"value": "1"} for i in range(13)}},
     "spec.devices.attributes", "at most 32 attributes and capacities combined, got 33"),
    ("selector without cel", {"filter": {"selectors": [{}]}},
     "spec.devices.filter.selectors[0].cel", "required field is missing"),
    ("filter not an object", {"filter": "all"},
     "spec.devices.filter", "expected an object"),
    ("priority not an integer", {"priority": "high"},
     "spec.devices.priority", "expected an integer"),
]


def raw(devices: dict[str, Any]) -> dict[str, Any]:
    obj = patch_obj("p")
    obj["spec"]["devices"] = devices
    return obj


@pytest.mark.parametrize(("devices", "path", "message"), [c[1:] for c in BAD],
                         ids=[c[0] for c in BAD])
def test_bad_input_names_the_field(devices: dict[str, Any], path: str, message: str) -> None:
    with pytest.raises(ModelError) as info:
        parse_object(raw(devices))
    assert info.value.path == path
    assert message in info.value.message


def test_an_unquoted_yaml_null_key_is_the_null_value() -> None:
    text = """
apiVersion: resource.draco.dev/v1alpha1
kind: ResourceSlicePatch
metadata: {name: p}
spec:
  devices:
    attributes:
      gpu.example.com/uuid:
        null: {}
    capacity:
      gpu.example.com/memory: {value: 38Gi}
"""
    p = parse_object(yaml.safe_load(text))
    assert p.attributes["gpu.example.com/uuid"] is None
    bad = yaml.safe_load(text.replace("memory: {value: 38Gi}", "memory: {null: {}}"))
    with pytest.raises(ModelError, match="cannot be removed"):
        parse_object(bad)


def test_missing_devices_is_an_error() -> None:
    obj = patch_obj("p")
    del obj["spec"]["devices"]
    with pytest.raises(ModelError) as info:
        parse_object(obj)
    assert info.value.path == "spec.devices"


def test_good_input_parses() -> None:
    p = parse_object(patch_obj(
        "p", priority=-3, filter={"driver": "d", "pool": "", "selectors": ["true"]},
        attributes={"example.com/gone": {"null": {}}, "example.com/v": {"version": "1.0.0"}},
        capacity={"example.com/m": {"value": 5}},
    ))
    assert isinstance(p, ResourceSlicePatch)
    assert p.priority == -3
    assert p.filter.driver == "d" and p.filter.pool is None  # "" means unset
    assert p.attributes["example.com/gone"] is None
    assert p.capacity == {"example.com/m": "5"}
    assert parse_object(patch_obj("q")).priority == 0


def test_a_patch_that_stops_parsing_stops_patching_and_says_why() -> None:
    tracker = Tracker()
    overlay = SlicePatchOverlay()
    tracker.register_overlay(overlay)
    for s in slices_from_devices([{"id": "gpu.example.com/a/gpu-0"}]):
        tracker.apply(added(s))
    did = DeviceID("gpu.example.com", "a", "gpu-0")
    seen: list[Any] = []
    tracker.subscribe(seen.append)
    tracker.apply(added(patch_obj("p", attributes=GOOD)))
    view = tracker.device(did)
    assert view is not None and view.patched_by == ("p",)

    bad = patch_obj("p", attributes={"x": {"int": 1}}, generation=2)
    change = tracker.apply({"type": "MODIFIED", "object": bad})
    assert [e.path for e in change.errors] == ["spec.devices.attributes.x"]
    view = tracker.device(did)
    assert view is not None and view.patched_by == () and view.attributes == {}
    assert any(did in c.devices for c in seen)  # subscribers heard about the un-patching
    report = overlay.report("p")
    assert report is not None and report.faulty and report.generation == 2
    assert report.invalid == ("spec.devices.attributes.x: attribute name 'x' must be fully "
                              "qualified (domain/name), e.g. gpu.example.com/model")
    # The tracker reports the parse error; the overlay does not repeat it in the view.
    assert list(tracker.errors) == [ObjectRef("ResourceSlicePatch", "", "p")]
    assert overlay.error_records() == []

    tracker.apply({"type": "MODIFIED", "object": patch_obj("p", attributes=GOOD, generation=3)})
    report = overlay.report("p")
    assert report is not None and not report.faulty
    assert tracker.errors == {}
    view = tracker.device(did)
    assert view is not None and view.patched_by == ("p",)

    tracker.apply({"type": "DELETED", "object": bad})
    assert overlay.patch_names() == []
    view = tracker.device(did)
    assert view is not None and view.patched_by == ()
