"""Upstream's DeviceTaintRule beside draco's: told apart by apiVersion, never mixed up."""

from __future__ import annotations

from typing import Any

import pytest

from operators.model import DeviceID
from operators.tracker import Tracker
from operators.tracker.taint_rules import (
    TaintRuleOverlay,
    UpstreamTaintRuleOverlay,
    ensure_upstream_overlay,
)

D0 = DeviceID("gpu.example.com", "p", "d0")


def slice_obj() -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
            "spec": {"driver": "gpu.example.com", "nodeName": "n", "pool": {"name": "p", "generation": 1,
                                                                              "resourceSliceCount": 1},
                     "devices": [{"name": "d0"}]}}


def rule(api_version: str | None, effect: str, kind: str = "DeviceTaintRule") -> dict[str, Any]:
    obj: dict[str, Any] = {"kind": kind, "metadata": {"name": "same"},
                           "spec": {"deviceSelector": {"device": "d0"}, "taint": {"key": "k", "effect": effect}}}
    if api_version:
        obj["apiVersion"] = api_version
    return obj


def tracker() -> Tracker:
    t = Tracker()
    t.register_overlay(TaintRuleOverlay())
    ensure_upstream_overlay(t)
    ensure_upstream_overlay(t)  # idempotent
    t.apply({"type": "ADDED", "object": slice_obj()})
    return t


# (case, object) -> the taint source it becomes
ORIGINS = [
    ("draco's CRD", rule("resource.draco.dev/v1alpha1", "NoSchedule"), "DeviceTaintRule/same"),
    ("no apiVersion: draco's", rule(None, "NoSchedule"), "DeviceTaintRule/same"),
    ("upstream v1", rule("resource.k8s.io/v1", "NoSchedule"), "DeviceTaintRule.resource.k8s.io/same"),
    ("upstream v1beta2", rule("resource.k8s.io/v1beta2", "NoSchedule"), "DeviceTaintRule.resource.k8s.io/same"),
    ("upstream v1alpha3", rule("resource.k8s.io/v1alpha3", "NoSchedule"), "DeviceTaintRule.resource.k8s.io/same"),
    ("the feed's kind name", rule(None, "NoSchedule", "DeviceTaintRule.resource.k8s.io"),
     "DeviceTaintRule.resource.k8s.io/same"),
]


@pytest.mark.parametrize(("obj", "source"), [c[1:] for c in ORIGINS], ids=[c[0] for c in ORIGINS])
def test_origin_decides_the_source(obj: dict[str, Any], source: str) -> None:
    t = tracker()
    t.apply({"type": "ADDED", "object": obj})
    view = t.device(D0)
    assert view is not None and [x.source for x in view.taints] == [source]


def test_same_name_in_both_groups_coexists_and_deletes_apart() -> None:
    t = tracker()
    t.apply({"type": "ADDED", "object": rule("resource.draco.dev/v1alpha1", "NoSchedule")})
    t.apply({"type": "ADDED", "object": rule("resource.k8s.io/v1", "NoExecute")})
    view = t.device(D0)
    assert view is not None and [(x.source, x.effect) for x in view.taints] == [
        ("DeviceTaintRule/same", "NoSchedule"), ("DeviceTaintRule.resource.k8s.io/same", "NoExecute")]
    t.apply({"type": "DELETED", "object": rule("resource.k8s.io/v1", "NoExecute")})
    view = t.device(D0)
    assert view is not None and [x.source for x in view.taints] == ["DeviceTaintRule/same"]
    draco = next(o for o in t.overlays if isinstance(o, TaintRuleOverlay))
    upstream = next(o for o in t.overlays if isinstance(o, UpstreamTaintRuleOverlay))
    assert set(draco.rules) == {"same"} and upstream.rules == {}
