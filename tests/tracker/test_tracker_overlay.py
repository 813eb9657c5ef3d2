"""The overlay protocol, proven with two tiny in-test overlays.

`NameTaints` stands in for DeviceTaintRules: taints selected by driver/pool/device name,
also on allocated devices whose slice is gone. `ModelPatch` stands in for
ResourceSlicePatches: attribute overrides whose filter reads the device as published.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

from tracker_builders import DRIVER, claim_obj, ev, slice_obj

from operators.model import Attribute, DeviceID, DeviceTaint, ModelError, ObjectRef
from operators.tracker import (
    AttributeOverride,
    CapacityOverride,
    DeviceContribution,
    EventType,
    Overlay,
    OverlayBase,
    Tracker,
)

MODEL = f"{DRIVER}/model"


class NameTaints(OverlayBase):
    name = "name-taints"
    kinds = frozenset({"NameTaint"})

    def __init__(self) -> None:
        super().__init__()
        self.rules: dict[str, dict[str, Any]] = {}
        self.told: list[tuple[frozenset[DeviceID], frozenset[DeviceID], frozenset[DeviceID]]] = []

    def _matches(self, rule: Mapping[str, Any], d: DeviceID) -> bool:
        sel = rule["spec"]["selector"]
        return all(sel.get(f) in (None, getattr(d, f)) for f in ("driver", "pool", "device"))

    def _matching(self, rule: Mapping[str, Any]) -> set[DeviceID]:
        assert self.tracker is not None
        return {d for d in self.tracker.device_ids() if self._matches(rule, d)}

    def apply(self, event_type: EventType, obj: Any) -> Iterable[DeviceID]:
        name = obj["metadata"]["name"]
        if "spec" not in obj:
            raise ModelError(ObjectRef("NameTaint", "", name), "spec", "required field is missing")
        old = self.rules.pop(name, None)
        touched = self._matching(old) if old else set()
        if event_type != "DELETED":
            self.rules[name] = obj
            touched |= self._matching(obj)
        return touched

    def devices_changed(
        self,
        added: frozenset[DeviceID],
        modified: frozenset[DeviceID],
        removed: frozenset[DeviceID],
    ) -> Iterable[DeviceID]:
        self.told.append((added, modified, removed))
        return ()  # contributions depend on names only, and the tracker recomposes these anyway

    def contribution(self, device: DeviceID) -> DeviceContribution | None:
        taints = tuple(
            DeviceTaint(r["spec"]["key"], "", r["spec"]["effect"], None, f"NameTaint/{n}")
            for n, r in sorted(self.rules.items())
            if self._matches(r, device)
        )
        return DeviceContribution(taints=taints) if taints else None


class ModelPatch(OverlayBase):
    """Patch objects: {metadata.name, spec: {ifModel, setModel, dropIndex, memory}}; also
    consumes DeviceClass events to prove built-in kinds are routed after the tracker."""

    name = "model-patch"
    kinds = frozenset({"ModelPatch", "DeviceClass"})

    def __init__(self) -> None:
        super().__init__()
        self.patches: dict[str, Mapping[str, Any]] = {}
        self.classes_seen: list[str] = []
        self.evaluations = 0

    def _ids(self) -> set[DeviceID]:
        assert self.tracker is not None
        return {d.id for d in self.tracker.published_devices()}

    def apply(self, event_type: EventType, obj: Any) -> Iterable[DeviceID]:
        if not isinstance(obj, Mapping):  # a parsed DeviceClass
            assert (
                self.tracker is not None
                and self.tracker.device_class(obj.meta.name) is not None
                or event_type == "DELETED"
            )
            self.classes_seen.append(f"{event_type} {obj.meta.name}")
            return ()
        name = obj["metadata"]["name"]
        if event_type == "DELETED":
            self.patches.pop(name, None)
        else:
            self.patches[name] = obj["spec"]
        return self._ids()

    def devices_changed(
        self,
        added: frozenset[DeviceID],
        modified: frozenset[DeviceID],
        removed: frozenset[DeviceID],
    ) -> Iterable[DeviceID]:
        return added | modified

    def contribution(self, device: DeviceID) -> DeviceContribution | None:
        assert self.tracker is not None
        published = self.tracker.published_device(device)
        if published is None:
            return None
        attrs: dict[str, AttributeOverride] = {}
        caps: dict[str, CapacityOverride] = {}
        for name, spec in sorted(self.patches.items()):
            self.evaluations += 1
            if published.attributes.get(MODEL) != Attribute("string", spec["ifModel"]):
                continue
            if "setModel" in spec:
                attrs[MODEL] = AttributeOverride(Attribute("string", spec["setModel"]), name)
            if spec.get("dropIndex"):
                attrs[f"{DRIVER}/index"] = AttributeOverride(None, name)
            if "memory" in spec:
                caps[f"{DRIVER}/memory"] = CapacityOverride(spec["memory"], name)
        if not attrs and not caps:
            return None
        return DeviceContribution(
            attributes=MappingProxyType(attrs), capacity=MappingProxyType(caps)
        )


def dev(name: str, model: str = "H100", index: int = 0) -> dict[str, Any]:
    return {
        "name": name,
        "attributes": {"model": {"string": model}, "index": {"int": index}},
        "capacity": {"memory": {"value": "80Gi"}},
        "taints": [{"key": "driver/ecc", "effect": "NoSchedule"}] if name == "d0" else [],
    }


def did(d: str, pool: str = "pool") -> DeviceID:
    return DeviceID(DRIVER, pool, d)


def setup() -> tuple[Tracker, NameTaints, ModelPatch]:
    t = Tracker()
    taints, patch = NameTaints(), ModelPatch()
    assert isinstance(taints, Overlay) and isinstance(patch, Overlay)
    t.register_overlay(taints)
    t.register_overlay(patch)
    t.apply(ev(slice_obj("s", "pool", [dev("d0"), dev("d1", "A100", 1), dev("d2", "H100", 2)])))
    return t, taints, patch


def nt(name: str, effect: str = "NoExecute", **selector: str) -> dict[str, Any]:
    return {
        "kind": "NameTaint",
        "metadata": {"name": name},
        "spec": {"selector": selector, "key": "maint", "effect": effect},
    }


def test_overlay_taints_carry_their_source_next_to_slice_taints() -> None:
    t, _, _ = setup()
    change = t.apply(ev(nt("r1", device="d0")))
    assert change.devices == {did("d0")}
    assert change.objects == {ObjectRef("NameTaint", "", "r1")}
    assert [(x.key, x.source) for x in t.device(did("d0")).taints] == [
        ("driver/ecc", "ResourceSlice/s"),
        ("maint", "NameTaint/r1"),
    ]
    change = t.apply(ev(nt("r1", device="d0"), "DELETED"))
    assert change.devices == {did("d0")}
    assert [x.source for x in t.device(did("d0")).taints] == ["ResourceSlice/s"]


def test_overlay_is_told_which_devices_moved() -> None:
    t, taints, _ = setup()
    taints.told.clear()
    t.apply(ev(slice_obj("s", "pool", [dev("d0"), dev("d1", "A100", 1), dev("d3")]), "MODIFIED"))
    assert taints.told == [(frozenset({did("d3")}), frozenset(), frozenset({did("d2")}))]


def test_rule_still_taints_an_allocated_device_whose_slice_is_gone() -> None:
    t, taints, _ = setup()
    t.apply(ev(nt("pool-wide", pool="pool")))
    t.apply(ev(claim_obj("c", [(DRIVER, "pool", "d1")])))
    taints.told.clear()
    change = t.apply(ev(slice_obj("s", "pool", []), "DELETED"))
    assert taints.told == [(frozenset(), frozenset({did("d1")}), frozenset({did("d0"), did("d2")}))]
    assert change.devices == {did("d0"), did("d1"), did("d2")}
    ghost = t.device(did("d1"))
    assert ghost is not None and not ghost.published
    assert [(x.key, x.source) for x in ghost.taints] == [("maint", "NameTaint/pool-wide")]
    # A rule created after the slice vanished still reaches the allocated device.
    t.apply(ev(nt("late", device="d1")))
    assert [x.source for x in t.device(did("d1")).taints] == [
        "NameTaint/late",
        "NameTaint/pool-wide",
    ]


def test_patches_override_remove_and_name_themselves() -> None:
    t, _, _ = setup()
    change = t.apply(
        ev(
            {
                "kind": "ModelPatch",
                "metadata": {"name": "p1"},
                "spec": {
                    "ifModel": "H100",
                    "setModel": "H100-SXM",
                    "dropIndex": True,
                    "memory": "40Gi",
                },
            }
        )
    )
    assert change.devices == {did("d0"), did("d2")}
    v = t.device(did("d2"))
    assert v.attributes[MODEL] == Attribute("string", "H100-SXM")
    assert f"{DRIVER}/index" not in v.attributes
    assert v.capacity[f"{DRIVER}/memory"] == "40Gi"
    assert v.patched_by == ("p1",)
    assert dict(v.patched_attributes) == {MODEL: "p1", f"{DRIVER}/index": "p1"}
    assert dict(v.patched_capacity) == {f"{DRIVER}/memory": "p1"}
    assert (
        v.device is not None and v.device.attributes[MODEL].value == "H100"
    )  # published untouched
    assert t.device(did("d1")).patched_by == ()


def test_patch_filters_see_devices_as_published_not_patched() -> None:
    t, _, _ = setup()
    t.apply(
        ev(
            {
                "kind": "ModelPatch",
                "metadata": {"name": "a-rename"},
                "spec": {"ifModel": "H100", "setModel": "A100"},
            }
        )
    )
    t.apply(
        ev(
            {
                "kind": "ModelPatch",
                "metadata": {"name": "b-a100-memory"},
                "spec": {"ifModel": "A100", "memory": "38Gi"},
            }
        )
    )
    renamed, real_a100 = t.device(did("d0")), t.device(did("d1"))
    assert (
        renamed.attributes[MODEL].value == "A100" and renamed.capacity[f"{DRIVER}/memory"] == "80Gi"
    )
    assert renamed.patched_by == ("a-rename",)
    assert real_a100.capacity[f"{DRIVER}/memory"] == "38Gi" and real_a100.patched_by == (
        "b-a100-memory",
    )


def test_overlay_work_stays_proportional_to_the_change() -> None:
    t, _, patch = setup()
    t.apply(
        ev(
            {
                "kind": "ModelPatch",
                "metadata": {"name": "p"},
                "spec": {"ifModel": "A100", "memory": "1Gi"},
            }
        )
    )
    before_views, before_evals = t.stats.view_updates, patch.evaluations
    t.apply(
        ev(
            slice_obj("s", "pool", [dev("d0"), dev("d1", "A100", 1), dev("d2", "B200", 2)]),
            "MODIFIED",
        )
    )
    assert t.stats.view_updates - before_views == 1
    assert patch.evaluations - before_evals == 1


def test_builtin_kinds_reach_overlays_after_the_tracker_stores_them() -> None:
    t, _, patch = setup()
    dc = {
        "kind": "DeviceClass",
        "metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": "true"}}]},
    }
    change = t.apply(ev(dc))
    assert change.device_classes == {"gpu"}
    t.apply(ev(dc, "DELETED"))
    assert patch.classes_seen == ["ADDED gpu", "DELETED gpu"]
    assert t.device_class("gpu") is None


def test_overlay_parse_errors_are_reported() -> None:
    t, _, _ = setup()
    change = t.apply(ev({"kind": "NameTaint", "metadata": {"name": "broken"}}))
    assert [str(e) for e in change.errors] == ["NameTaint broken spec: required field is missing"]


def test_registering_late_recomposes_existing_devices() -> None:
    t = Tracker()
    t.apply(ev(slice_obj("s", "pool", [dev("d0")])))
    taints = NameTaints()
    taints.rules["pre"] = nt("pre", device="d0")
    t.register_overlay(taints)
    assert [x.source for x in t.device(did("d0")).taints] == ["ResourceSlice/s", "NameTaint/pre"]


def test_refresh_recomposes_on_overlay_request() -> None:
    t, taints, _ = setup()
    seen = []
    t.subscribe(seen.append)
    taints.rules["timer"] = nt("timer", device="d2")
    change = t.refresh([did("d2")])
    assert (
        change.devices == {did("d2")} and seen[-1] is not None and seen[-1].devices == {did("d2")}
    )


def test_unreadable_update_of_a_builtin_kind_reaches_overlays_as_deletion() -> None:
    t, _, patch = setup()
    dc = {"kind": "DeviceClass", "metadata": {"name": "gpu"}, "spec": {}}
    t.apply(ev(dc))
    change = t.apply(ev({**dc, "spec": {"selectors": "all"}}, "MODIFIED"))
    assert [e.path for e in change.errors] == ["spec.selectors"]
    assert change.device_classes == {"gpu"} and t.device_class("gpu") is None
    assert patch.classes_seen == ["ADDED gpu", "DELETED gpu"]
    # The unreadable object's deletion clears the error without reporting a new one.
    change = t.apply(ev({**dc, "spec": {"selectors": "all"}}, "DELETED"))
    assert change.empty and not t.errors
