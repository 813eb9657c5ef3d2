"""draco answers as the kube-scheduler of one release (1.34 to 1.38) with default gates:
which release, its gates, and what changes with it where a table cannot show it (the
node an `All` request falls back to; the command line's choice of release).

The per-release answers of single allocations are in allocation_cases.yaml
(`since:`/`until:`).
"""

from __future__ import annotations

import io
import json
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from operators.allocator.features import DEFAULT_GATES, parse_feature_gates
from operators.allocator.nodes import NodeIndex, place
from operators.allocator.releases import (
    DEFAULT_RELEASE,
    RELEASES,
    parse_release,
    release_for_server,
)
from operators.cli.allocate_serve import serve
from operators.model.nodes import parse_node
from tests.allocator.build import case_inputs
from tests.cli.test_allocate import dclass, exactly, node, rclaim, rslice, write

# (release, gates on) — kube-scheduler's defaults, from pkg/features of each release
GATES_ON = [
    ("1.34", {"admin_access", "prioritized_list"}),
    ("1.35", {"admin_access", "prioritized_list"}),
    ("1.36", {"admin_access", "prioritized_list", "consumable_capacity",
              "device_binding_conditions", "device_taints", "partitionable_devices"}),
    ("1.37", {"admin_access", "prioritized_list", "consumable_capacity",
              "device_binding_conditions", "device_taints", "partitionable_devices"}),
    ("1.38", {"admin_access", "prioritized_list", "consumable_capacity",
              "device_binding_conditions", "device_taints", "partitionable_devices",
              "fractional_capacity_range"}),
]


@pytest.mark.parametrize(("release", "on"), GATES_ON)
def test_each_release_has_kube_schedulers_default_gates(release: str, on: set[str]) -> None:
    gates = parse_release(release).gates
    names = {f.name for f in fields(gates) if f.name != "semantics"}
    assert {n for n in names if getattr(gates, n)} == on
    assert gates.semantics.release == release


def test_the_default_is_1_37_as_before() -> None:
    assert DEFAULT_RELEASE.gates == DEFAULT_GATES and DEFAULT_RELEASE.name == "1.37"
    assert sorted(RELEASES) == [34, 35, 36, 37, 38]


VERSIONS = [  # (text, minor) — what --kubernetes-version and /version's gitVersion look like
    ("1.38", 38), ("v1.38.0-beta.0", 38), ("1.35.8", 35), ("v1.34.4+k3s1", 34), ("v1.37.2", 37),
]


@pytest.mark.parametrize(("text", "minor"), VERSIONS)
def test_versions_name_their_release(text: str, minor: int) -> None:
    assert parse_release(text).minor == minor
    assert release_for_server(text) == (RELEASES[minor], None)


@pytest.mark.parametrize(("text", "why"), [("1.33", "not a release draco answers as"),
                                            ("1.39.0", "not a release draco answers as"),
                                            ("2.0", "not a Kubernetes version"),
                                            ("latest", "not a Kubernetes version")])
def test_unknown_versions_are_refused_by_name(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_release(text)


@pytest.mark.parametrize(("server", "minor", "warned"), [
    ("v1.34.0-draco", 37, False),  # draco's embedded server: no kube-scheduler to follow
    ("", 37, False),
    ("v1.33.5", 34, True), ("v1.40.1", 38, True), ("garbage", 37, True),
])
def test_servers_outside_the_releases_get_the_nearest_with_a_warning(
        server: str, minor: int, warned: bool) -> None:
    release, warning = release_for_server(server)
    assert release.minor == minor and (warning is not None) == warned


def test_gates_a_release_does_not_know_or_locks_are_refused() -> None:
    with pytest.raises(ValueError, match="unrecognized feature gate: DRAFractionalCapacityRange"):
        parse_feature_gates("DRAFractionalCapacityRange=true", RELEASES[36].gates)
    for gate in ("DRAPartitionableDevices", "DRADeviceBindingConditions"):
        with pytest.raises(ValueError, match=f"cannot set feature gate {gate} to false, feature "
                           "is locked to true in Kubernetes 1.38"):
            parse_feature_gates(f"{gate}=false", RELEASES[38].gates, enforce_locks=True)
        # a library caller's feature set (upstream's suite) may still turn it off
        assert not getattr(parse_feature_gates(f"{gate}=false", RELEASES[38].gates),
                           {"DRAPartitionableDevices": "partitionable_devices",
                            "DRADeviceBindingConditions": "device_binding_conditions"}[gate])
    # 1.37 as before: nothing locked
    assert not parse_feature_gates("DRAPrioritizedList=false", enforce_locks=True).prioritized_list
    gates = parse_feature_gates("DRAFractionalCapacityRange=false", RELEASES[38].gates)
    assert not gates.fractional_capacity_range and gates.semantics.release == "1.38"


ALL_OVER_A_BAD_POOL: dict[str, Any] = {
    "nodes": [{"name": "node-1"}, {"name": "node-2"}],
    "slices": [
        {"node": "node-1", "pool": "p1", "count": 2, "devices": ["dev-1"]},  # being updated
        {"node": "node-2", "pool": "p2", "devices": ["dev-2"]},
    ],
    "claims": [{"requests": [{"name": "req", "mode": "All"}]}],
}


@pytest.mark.parametrize(("minor", "status", "where"), [
    (37, "error", "node-1"),   # 1.37: the node's error is the pod's
    (38, "allocated", "node-2"),  # 1.38: that node fails, the next one serves
])
def test_all_over_a_pool_being_updated_fails_only_that_node_from_1_38(
        minor: int, status: str, where: str) -> None:
    claims, _, inventory, classes, in_use = case_inputs(ALL_OVER_A_BAD_POOL)
    nodes = [parse_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": n["name"]}})
             for n in ALL_OVER_A_BAD_POOL["nodes"]]
    placed = place(claims, NodeIndex(inventory, nodes), classes, in_use, 10.0,
                   features=RELEASES[minor].gates)
    assert placed.outcome.status == status, placed.outcome.reason
    assert placed.node == where
    if status == "error":
        assert "resource pool driver-a/p1 is currently being updated" in (placed.outcome.reason or "")


def test_all_over_a_bad_pool_on_every_node_is_still_an_error_in_1_38() -> None:
    case = {**ALL_OVER_A_BAD_POOL, "slices": ALL_OVER_A_BAD_POOL["slices"][:1]}
    claims, _, inventory, classes, in_use = case_inputs(case)
    nodes = [parse_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}})]
    placed = place(claims, NodeIndex(inventory, nodes), classes, in_use, 10.0,
                   features=RELEASES[38].gates)
    assert placed.outcome.status == "error" and "being updated" in (placed.outcome.reason or "")


# -- the command line -----------------------------------------------------------------

def _versioned(tmp_path: Path) -> str:
    """Two devices whose versions differ only in build metadata, a claim matching them."""
    devices = [{"name": f"gpu-{i}", "attributes": {"v": {"version": f"1.0.0+b{i}"}}}
               for i in range(2)]
    claim = rclaim("c", exactly(count=2))
    claim["spec"]["devices"]["constraints"] = [{"matchAttribute": "gpu.example.com/v"}]
    return write(tmp_path, [node("node-1"), dclass(), rslice("node-1", devices), claim])


def _allocate(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    from operators.cli.main import main
    assert main(["allocate", *args, "-o", "json"]) == 0
    return dict(json.loads(capsys.readouterr().out)["claims"]["default/c"])


def test_allocate_answers_as_the_release_it_is_given(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _versioned(tmp_path)
    assert _allocate(capsys, "--from", path)["allocated"] is False  # 1.37 by default
    assert _allocate(capsys, "--from", path, "--kubernetes-version", "1.37")["allocated"] is False
    rec = _allocate(capsys, "--from", path, "--kubernetes-version", "v1.38.0-beta.0")
    assert rec["allocated"] is True and len(rec["results"]) == 2


@pytest.mark.parametrize(("args", "message"), [
    (["--kubernetes-version", "1.33"], "Kubernetes 1.33 is not a release draco answers as"),
    (["--kubernetes-version", "1.38", "--feature-gates", "DRAPartitionableDevices=false"],
     "feature is locked to true in Kubernetes 1.38"),
    (["--kubernetes-version", "1.36", "--feature-gates", "DRAFractionalCapacityRange=true"],
     "unrecognized feature gate: DRAFractionalCapacityRange"),
])
def test_a_release_or_gate_it_refuses_is_a_usage_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    from operators.cli.main import main
    try:  # argparse exits (a bad version); a gate the release refuses returns
        code = main(["allocate", "--from", _versioned(tmp_path), *args])
    except SystemExit as exc:
        code = exc.code
    assert code == 2
    assert message in capsys.readouterr().err


def test_serve_takes_a_release_per_request() -> None:
    devices = [{"name": f"gpu-{i}", "attributes": {"v": {"version": f"1.0.0+b{i}"}}}
               for i in range(2)]
    claim = rclaim("c", exactly(count=2))
    claim["spec"]["devices"]["constraints"] = [{"matchAttribute": "gpu.example.com/v"}]
    request = {"objects": [node("node-1"), dclass(), rslice("node-1", devices), claim],
               "claims": ["default/c"], "node": "node-1"}
    lines = "".join(json.dumps(r) + "\n" for r in (
        request, {**request, "kubernetesVersion": "1.38"},
        {**request, "kubernetesVersion": "1.99"}))
    out = io.StringIO()
    assert serve(DEFAULT_GATES, io.StringIO(lines), out) == 0
    answers = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [a["status"] for a in answers] == ["unsatisfiable", "allocated", "bad-request"]
    assert "kubernetesVersion: Kubernetes 1.99 is not a release" in answers[2]["reason"]
