"""Malformed objects become errors in the Change; the tracker never raises for them."""

from __future__ import annotations

from typing import Any

import pytest

from operators.cli.state import standard_overlays
from operators.tracker import Tracker

KINDS = ("ResourceSlice", "DeviceClass", "ResourceClaim", "Pod", "DeviceTaintRule",
         "ResourceSlicePatch")
BAD_METADATA: list[Any] = [True, "x", [1], 7, {"name": 5}, {"name": None, "namespace": []}]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("metadata", BAD_METADATA, ids=repr)
def test_bad_metadata_is_an_error_for_every_kind(kind: str, metadata: Any) -> None:
    tracker = Tracker()
    for overlay in standard_overlays():
        tracker.register_overlay(overlay)
    change = tracker.apply({"type": "ADDED",
                            "object": {"kind": kind, "metadata": metadata, "spec": {}}})
    assert [e.ref.kind for e in change.errors] == [kind]
    assert "metadata" in str(change.errors[0])
