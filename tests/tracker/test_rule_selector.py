"""A DeviceTaintRule's selector: `all: true`, the `{}` of before `all`, `all: false`, and
the ambiguous `all: true` with fields (left out, with the reason)."""

from __future__ import annotations

from typing import Any

import pytest

from operators.model import DeviceID, ModelError
from operators.tracker.taint_rules import parse_device_taint_rule

GPU = DeviceID("gpu.example.com", "node-a", "gpu-0")
NIC = DeviceID("nic.example.com", "node-b", "nic-0")


def rule(selector: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"taint": {"key": "k", "effect": "NoExecute"}}
    if selector is not ...:
        spec["deviceSelector"] = selector
    return {"apiVersion": "resource.draco.dev/v1alpha1", "kind": "DeviceTaintRule",
            "metadata": {"name": "r", "uid": "u", "creationTimestamp": "2026-11-26T00:00:00Z"},
            "spec": spec}


@pytest.mark.parametrize(("selector", "selects"), [
    ({"all": True}, {GPU, NIC}),
    ({}, {GPU, NIC}),  # stored before the CRD refused it: as it always did
    (..., set()),  # no selector: nothing, as upstream
    ({"all": False}, set()),
    ({"all": False, "driver": "gpu.example.com"}, {GPU}),
    ({"pool": "node-b"}, {NIC}),
])
def test_what_a_selector_selects(selector: Any, selects: set[DeviceID]) -> None:
    parsed = parse_device_taint_rule(rule(selector))
    assert {d for d in (GPU, NIC) if parsed.matches(d)} == selects


def test_all_true_with_fields_is_left_out_with_the_reason() -> None:
    with pytest.raises(ModelError) as err:
        parse_device_taint_rule(rule({"all": True, "driver": "gpu.example.com"}))
    assert "spec.deviceSelector.all" in str(err.value) and "takes no driver" in str(err.value)


def test_all_is_kept_when_written_back() -> None:
    parsed = parse_device_taint_rule(rule({"all": True}))
    assert parsed.selector is not None and parsed.selector.to_api() == {"all": True}
