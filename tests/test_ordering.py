"""The suite's order and xdist groups (tests/ordering.py): the tests that need no cluster
first, then each build stage's real-cluster tests as one group, in the build's order."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests import ordering
from tests.ordering import cluster_plan


class Item:
    """Just what ordering reads of a pytest item."""

    def __init__(self, module: str, fixtures: tuple[str, ...] = (), real: bool = False,
                 backend: str | None = None, module_scoped: bool = False) -> None:
        self.path = Path("tests/e2e") / module
        self.fixturenames = fixtures
        self.callspec = SimpleNamespace(params={"backend": backend}) if backend else None
        self.marks: list[Any] = [pytest.mark.real.mark] if real else []
        scope = "module" if module_scoped else "function"
        self._fixtureinfo = SimpleNamespace(
            name2fixturedefs={"f": [SimpleNamespace(scope=scope)]})
        self.module = SimpleNamespace()

    def get_closest_marker(self, name: str) -> Any:
        return next((m for m in self.marks if m.name == name), None)

    def add_marker(self, marker: Any) -> None:
        self.marks.append(marker.mark)

    def group(self) -> str | None:
        found = self.get_closest_marker("xdist_group")
        return None if found is None else str(found.args[0])


def test_stages_follow_the_build_and_leave_the_on_request_releases_out() -> None:
    # upstream's suite needs no cluster; a release moved into SMOKE comes after it, and
    # leaves ON_REQUEST
    assert ("helm", "1.34", "1.37", "stack", "node", "upstream", *cluster_plan.SMOKE) == ordering.STAGES
    assert not set(cluster_plan.ON_REQUEST) & set(ordering.STAGES)
    assert {s.stage for s in cluster_plan.plan()} <= set(ordering.STAGES)


def test_a_test_on_an_on_request_release_carries_its_marker_and_is_built_for_by_its_fixture() -> None:
    items = [Item("test_upstream_taints.py", ("operator_136", "real_136"), real=True),
             Item("test_devices_136.py", ("b",), real=True),
             Item("test_devices_136.py", ("b",), real=True),
             Item("test_release_smoke_real.py", ("real_138",), real=True),
             Item("test_upstream_taints.py", ("real_137",), real=True),
             Item("test_devices_136.py", ("real_136",))]  # no cluster: not real
    items[1].callspec = SimpleNamespace(params={"b": "real_136"})
    items[2].callspec = SimpleNamespace(params={"b": "real_137"})
    ordering.mark_on_request(items)  # type: ignore[arg-type]
    marks = [sorted(m.name for m in i.marks if m.name.startswith("release")) for i in items]
    assert marks == [["release_136"], ["release_136"], [], ["release_smoke"], [], []]
    # not built by the plan: ordered with 1.34's group, the fixture builds the release
    assert ordering.needed_stage(items[0]) == "1.34"  # type: ignore[arg-type]
    assert ordering.needed_stage(items[2]) == "1.37"  # type: ignore[arg-type]


def test_unit_tests_first_then_each_stage_in_build_order_as_one_group() -> None:
    items = [
        Item("test_upstream_taints.py", ("real_137",), real=True),
        Item("test_eviction.py", ("backend",), real=True, backend="real"),
        Item("test_eviction.py", ("backend",), backend="embedded"),
        Item("test_image.py", ("draco_image", "private_137"), real=True),
        Item("test_create_oracle.py", ("real_137", "backend"), real=True, backend="real"),
        Item("test_hack_cluster.py", (), real=True),
        Item("test_real_node_lifecycle.py", (), real=True),
    ]
    order = list(items)
    ordering.order(order)  # type: ignore[arg-type]
    assert [(i.path.name, i.group()) for i in order] == [
        ("test_eviction.py", None),
        ("test_eviction.py", "real-1.34"),
        ("test_hack_cluster.py", "real-1.34"),
        ("test_upstream_taints.py", "real-1.37"),
        ("test_create_oracle.py", "real-1.37"),  # needs 1.34 too: the later stage wins
        ("test_image.py", "real-node"),
        ("test_real_node_lifecycle.py", "real-node"),
    ]


def test_a_module_scoped_fixture_keeps_its_module_in_one_stage() -> None:
    early = Item("test_rbac.py", ("real_cluster",), real=True, module_scoped=True)
    late = Item("test_rbac.py", ("real_cluster", "real_137"), real=True, module_scoped=True)
    other = Item("test_full_flow.py", ("real",), real=True)
    items = [early, late, other]
    ordering.order(items)  # type: ignore[arg-type]
    assert items == [other, early, late]
    assert early.group() == late.group() == "real-1.37"


def test_a_fixture_parametrized_by_cluster_fixture_names_runs_each_half_in_its_stage() -> None:
    items = [Item("test_release_smoke_real.py", ("cluster", "release"), real=True) for _ in range(2)]
    for item, fixture in zip(items, ("real_137", "real"), strict=True):
        item.callspec = SimpleNamespace(params={"cluster": fixture})
    ordering.order(items)  # type: ignore[arg-type]
    assert [i.group() for i in items] == ["real-1.34", "real-1.37"]
    assert all(ordering.FIXTURE_STAGE[f"real_{k.replace('.', '')}"] == k for k in cluster_plan.SMOKE)


def test_what_a_test_waits_for_before_its_timeout_starts() -> None:
    assert ordering.needed_stage(Item("test_parity.py", ("backend",), backend="embedded")) is None  # type: ignore[arg-type]
    assert ordering.needed_stage(Item("test_devices_136.py", ("real_137",), real=True)) == "1.37"  # type: ignore[arg-type]
    assert ordering.needed_stage(Item("test_real_node.py", (), real=True)) == "node"  # type: ignore[arg-type]
    # Kueue and JobSet are started on a 1.37 cluster: built after 1.37's control plane
    assert ordering.needed_stage(Item("test_kueue_real.py", ("stack_137",), real=True)) == "stack"  # type: ignore[arg-type]
