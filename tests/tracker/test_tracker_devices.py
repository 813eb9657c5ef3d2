"""Device view, pool completeness and the cost of updates."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest
from tracker_builders import DRIVER, claim_obj, ev, slice_obj

from operators.model import DeviceID, PoolID, parse_object
from operators.tracker import Change, Tracker


def did(pool: str, dev: str) -> DeviceID:
    return DeviceID(DRIVER, pool, dev)


def big_tracker(pools: int = 20, per_slice: int = 128) -> Tracker:
    t = Tracker()
    with t.batch():
        for p in range(pools):
            t.apply(ev(slice_obj(f"s-{p}", f"node-{p}", [f"gpu-{i}" for i in range(per_slice)])))
    return t


def test_one_slice_update_costs_that_slice_only() -> None:
    t = big_tracker()
    assert len(list(t.devices())) == 20 * 128
    obj = slice_obj("s-7", "node-7", [f"gpu-{i}" for i in range(128)])
    obj["spec"]["devices"][5]["attributes"]["model"] = {"string": "B200"}
    before = t.stats.snapshot()
    change = t.apply(ev(obj, "MODIFIED"))
    after = t.stats.snapshot()
    assert after["device_updates"] - before["device_updates"] == 128
    assert after["view_updates"] - before["view_updates"] == 1
    assert change.devices == {did("node-7", "gpu-5")}
    assert change.slices == {"s-7"} and change.pools == {PoolID(DRIVER, "node-7")}
    assert t.device(did("node-7", "gpu-5")).attributes[f"{DRIVER}/model"].value == "B200"


def test_unchanged_republish_reports_nothing() -> None:
    t = big_tracker(pools=3)
    before = t.stats.view_updates
    change = t.apply(ev(slice_obj("s-1", "node-1", [f"gpu-{i}" for i in range(128)]), "MODIFIED"))
    assert change.empty
    assert t.stats.view_updates == before


def test_slice_delete_removes_only_its_devices() -> None:
    t = big_tracker(pools=4, per_slice=8)
    change = t.apply(ev(slice_obj("s-2", "node-2", []), "DELETED"))
    assert change.devices == {did("node-2", f"gpu-{i}") for i in range(8)}
    assert t.pool(PoolID(DRIVER, "node-2")) is None
    assert len(list(t.devices())) == 24
    assert t.stats.device_updates == 4 * 8 + 8


def test_slice_moving_to_another_pool() -> None:
    t = Tracker()
    t.apply(ev(slice_obj("s", "p1", ["a", "b"])))
    change = t.apply(ev(slice_obj("s", "p2", ["a"]), "MODIFIED"))
    assert change.devices == {did("p1", "a"), did("p1", "b"), did("p2", "a")}
    assert [v.id for v in t.devices()] == [did("p2", "a")]
    assert t.pool(PoolID(DRIVER, "p1")) is None


# Pool completeness table: (case, slices as (name, generation, count, device names),
#   complete, valid, reason fragment, device names in the view in order, outdated slices)
POOLS: list[
    tuple[str, list[tuple[str, int, int, list[str]]], bool, bool, str, list[str], list[str]]
] = [
    ("single complete slice", [("a", 1, 1, ["d0", "d1"])], True, True, "", ["d0", "d1"], []),
    (
        "one of two slices",
        [("a", 1, 2, ["d0"])],
        False,
        True,
        "1 of 2 ResourceSlices at generation 1",
        ["d0"],
        [],
    ),
    (
        "two of two, listed by slice name",
        [("b", 1, 2, ["d2"]), ("a", 1, 2, ["d0", "d1"])],
        True,
        True,
        "",
        ["d0", "d1", "d2"],
        [],
    ),
    (
        "newer generation replaces older slices",
        [("a", 1, 2, ["d0"]), ("b", 1, 2, ["d1"]), ("c", 2, 1, ["d5"])],
        True,
        True,
        "",
        ["d5"],
        ["a", "b"],
    ),
    (
        "older generation arriving late is ignored",
        [("c", 2, 1, ["d5"]), ("a", 1, 1, ["d0"])],
        True,
        True,
        "",
        ["d5"],
        ["a"],
    ),
    (
        "newer generation still incomplete",
        [("a", 1, 1, ["d0"]), ("c", 2, 2, ["d5"])],
        False,
        True,
        "1 of 2 ResourceSlices at generation 2",
        ["d5"],
        ["a"],
    ),
    (
        "more slices than announced",
        [("a", 1, 1, ["d0"]), ("b", 1, 1, ["d1"])],
        False,
        True,
        "2 of 1 ResourceSlices",
        ["d0", "d1"],
        [],
    ),
    (
        "duplicate device across slices",
        [("a", 1, 2, ["d0", "d1"]), ("b", 1, 2, ["d1"])],
        True,
        False,
        "duplicate device name d1",
        ["d0", "d1"],
        [],
    ),
    (
        "duplicate device within one slice",
        [("a", 1, 1, ["d0", "d0"])],
        True,
        False,
        "duplicate device name d0",
        ["d0"],
        [],
    ),
    (
        "duplicate in an outdated slice does not count",
        [("a", 1, 1, ["d0", "d0"]), ("b", 2, 1, ["d0"])],
        True,
        True,
        "",
        ["d0"],
        ["a"],
    ),
    (
        "incomplete is reported before invalid",
        [("a", 1, 3, ["d0"]), ("b", 1, 3, ["d0"])],
        False,
        False,
        "incomplete",
        ["d0"],
        [],
    ),
]


@pytest.mark.parametrize(
    ("case", "slices", "complete", "valid", "reason", "devices", "outdated"),
    POOLS,
    ids=[c[0] for c in POOLS],
)
def test_pool_completeness(
    case: str,
    slices: list[tuple[str, int, int, list[str]]],
    complete: bool,
    valid: bool,
    reason: str,
    devices: list[str],
    outdated: list[str],
) -> None:
    t = Tracker()
    for name, gen, count, devs in slices:
        t.apply(ev(slice_obj(name, "pool", devs, generation=gen, count=count)))
    st = t.pool(PoolID(DRIVER, "pool"))
    assert st is not None
    assert (st.complete, st.valid, st.usable) == (complete, valid, complete and valid)
    assert reason in st.reason if reason else st.reason == ""
    assert [v.id.device for v in t.pool_devices(PoolID(DRIVER, "pool"))] == devices
    assert list(st.outdated_slices) == outdated
    assert sorted(v.id.device for v in t.devices()) == sorted(devices)


def test_deleting_newest_generation_restores_the_older_one() -> None:
    t = Tracker()
    t.apply(ev(slice_obj("old", "pool", ["d0"], generation=1)))
    t.apply(ev(slice_obj("new", "pool", ["d9"], generation=2)))
    assert [v.id.device for v in t.devices()] == ["d9"]
    change = t.apply(ev(slice_obj("new", "pool", ["d9"], generation=2), "DELETED"))
    assert change.devices == {did("pool", "d0"), did("pool", "d9")}
    st = t.pool(PoolID(DRIVER, "pool"))
    assert st.generation == 1 and st.usable and st.slices == ("old",)


def test_duplicate_resolves_when_one_copy_goes() -> None:
    t = Tracker()
    t.apply(ev(slice_obj("a", "pool", ["d0"], count=2)))
    t.apply(ev(slice_obj("b", "pool", ["d0"], count=2, model="A100")))
    assert not t.pool(PoolID(DRIVER, "pool")).valid
    assert t.device(did("pool", "d0")).slice_name == "a"  # first slice by name wins the view
    t.apply(ev(slice_obj("a", "pool", ["d0"], count=2), "DELETED"))
    assert t.pool(PoolID(DRIVER, "pool")).valid
    assert t.device(did("pool", "d0")).attributes[f"{DRIVER}/model"].value == "A100"


def test_node_placement_and_slice_taint_sources() -> None:
    t = Tracker()
    obj = slice_obj(
        "s", "pool", [{"name": "d", "taints": [{"key": "k", "effect": "NoExecute"}]}], node="n1"
    )
    t.apply(ev(obj))
    v = t.device(did("pool", "d"))
    assert v.node_name == "n1" and v.placement.matches("n1", {})
    assert [tt.source for tt in v.taints] == ["ResourceSlice/s"]


def test_already_parsed_objects_and_initial_listing_events() -> None:
    t = Tracker()
    parsed = parse_object(slice_obj("s", "pool", ["d"]))
    t.apply({"type": None, "object": parsed})
    assert t.device(did("pool", "d")) is not None
    t.apply({"type": "DELETED", "object": parsed})
    assert t.device(did("pool", "d")) is None


def test_bad_slice_is_reported_and_dropped_not_raised() -> None:
    t = Tracker()
    good = slice_obj("s", "pool", ["d0", "d1"])
    t.apply(ev(good))
    bad: dict[str, Any] = copy.deepcopy(good)
    bad["spec"]["devices"][1]["attributes"]["model"] = {"float": 1.0}
    change = t.apply(ev(bad, "MODIFIED"))
    assert [e.path for e in change.errors] == ["spec.devices[1].attributes.model"]
    assert str(change.errors[0].ref) == "ResourceSlice s"
    assert change.devices == {did("pool", "d0"), did("pool", "d1")}
    assert list(t.devices()) == []
    assert list(t.errors) and t.stats.parse_errors == 1
    t.apply(ev(good, "MODIFIED"))
    assert not t.errors and len(list(t.devices())) == 2


def test_unknown_kind_is_an_error_not_an_exception() -> None:
    t = Tracker()
    change = t.apply(ev({"kind": "Widget", "metadata": {"name": "w"}}))
    assert change.errors and change.errors[0].path == "kind"


def test_bad_envelope_is_a_programming_error() -> None:
    t = Tracker()
    with pytest.raises(ValueError):
        t.apply({"type": "ADDED"})
    with pytest.raises(ValueError):
        t.apply({"type": "BOOKMARK", "object": {}})


def test_injected_clock() -> None:
    when = datetime(2030, 5, 6, tzinfo=UTC)
    assert Tracker(clock=lambda: when).now() == when


def test_allocated_device_outlives_its_slice() -> None:
    t = Tracker()
    t.apply(ev(slice_obj("s", "pool", ["d0", "d1"])))
    t.apply(ev(claim_obj("c", [(DRIVER, "pool", "d0")])))
    change = t.apply(ev(slice_obj("s", "pool", []), "DELETED"))
    assert change.devices == {did("pool", "d0"), did("pool", "d1")}
    ghost = t.device(did("pool", "d0"))
    assert ghost is not None and not ghost.published and ghost.attributes == {}
    assert t.device(did("pool", "d1")) is None
    assert [v.id for v in t.devices()] == []
    assert [v.id for v in t.devices(include_unpublished=True)] == [did("pool", "d0")]
    change = t.apply(ev(claim_obj("c"), "DELETED"))
    assert change.devices == {did("pool", "d0")} and t.device(did("pool", "d0")) is None


def test_change_is_frozen_value() -> None:
    assert Change().empty
