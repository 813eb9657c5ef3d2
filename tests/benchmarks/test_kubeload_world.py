"""The DRA-at-size world the loader writes, and the eviction_at_size report, without a cluster."""

from __future__ import annotations

import ipaddress

import pytest

from benchmarks.__main__ import discover, explicit_only, format_table
from benchmarks.kubeload import (
    World,
    node_readiness,
    running_status,
    shards,
    writer_count,
    writers_from_env,
)
from benchmarks.scale_objects import allocated_devices
from benchmarks.scenarios import eviction_at_size

# cores -> writer processes: one per four cores, at least one, at most eight
WRITERS = [(1, 1), (2, 1), (3, 1), (4, 1), (7, 1), (8, 2), (16, 4), (32, 8), (64, 8), (256, 8)]


@pytest.mark.parametrize(("cpus", "writers"), WRITERS)
def test_writer_count_scales_with_cores(cpus: int, writers: int) -> None:
    assert writer_count(cpus) == writers


# nodes, writers -> shard sizes
SHARDS = [(2_000, 1, [2_000]), (2_000, 4, [500] * 4), (10, 3, [4, 3, 3]), (2, 8, [1, 1]),
          (1, 4, [1])]


@pytest.mark.parametrize(("nodes", "writers", "sizes"), SHARDS)
def test_every_node_belongs_to_exactly_one_writer(nodes: int, writers: int, sizes: list[int]) -> None:
    parts = shards(nodes, writers)
    assert [len(p) for p in parts] == sizes
    assert sorted(n for p in parts for n in p) == list(range(nodes))


def test_every_writer_gets_nodes_of_both_halves() -> None:
    for part in shards(2_000, 4):
        assert min(part) < 1_000 <= max(part)


def test_the_full_world_has_ten_thousand_claims_and_the_evicted_devices_a_thousand_each() -> None:
    w = World()
    held = [(n, d) for n in range(w.nodes)
            for d in allocated_devices(w.per_node, w.claims_per_node, n, w.nodes)]
    assert w.claims == len(held) == 10_000
    on = {dev: {n for n, d in held if d == int(dev.removeprefix("gpu-"))}
          for dev in (eviction_at_size.DRACO_DEVICE, eviction_at_size.BARE_DEVICE)}
    assert [len(nodes) for nodes in on.values()] == [1_000, 1_000]
    assert not set.intersection(*on.values())  # the two sides never evict the same pods


def test_a_written_pod_status_is_running_and_kwok_leaves_it_alone() -> None:
    status = running_status(7, "2026-01-01T00:00:00Z")["status"]
    assert status["phase"] == "Running"
    ready = {c["type"]: c["status"] for c in status["conditions"]}
    assert ready["Ready"] == "True"  # kwok's pod-ready stage selects Pending, not-Ready pods
    assert status["containerStatuses"][0]["name"] == "c"
    assert status["containerStatuses"][0]["state"]["running"]


def test_pod_ips_are_distinct_and_outside_kwoks_range() -> None:
    w = World()
    ips = {running_status(n * w.per_node + d, "x")["status"]["podIP"]
           for n in range(w.nodes) for d in range(w.per_node)}
    assert len(ips) == w.nodes * w.per_node
    kwok = ipaddress.ip_network("10.244.0.0/16")
    assert not any(ipaddress.ip_address(ip) in kwok for ip in ips)


def test_writers_and_connections_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DRACO_BENCH_WRITERS", raising=False)
    monkeypatch.delenv("DRACO_BENCH_CONNECTIONS", raising=False)
    assert writers_from_env(16) == (4, 96)
    monkeypatch.setenv("DRACO_BENCH_WRITERS", "2")
    monkeypatch.setenv("DRACO_BENCH_CONNECTIONS", "8")
    assert writers_from_env(16) == (2, 8)
    monkeypatch.setenv("DRACO_BENCH_WRITERS", "0")
    with pytest.raises(ValueError, match="at least 1"):
        writers_from_env(16)


def test_sizes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DRACO_BENCH_SIZES", raising=False)
    assert eviction_at_size.world(False).claims == 10_000
    assert eviction_at_size.world(True).claims == 1_000
    monkeypatch.setenv("DRACO_BENCH_SIZES", "nodes=400")
    assert eviction_at_size.world(False).claims == 2_000
    monkeypatch.setenv("DRACO_BENCH_SIZES", "plain_pods=3")
    with pytest.raises(SystemExit, match="nodes=N"):
        eviction_at_size.world(False)


def test_the_scenario_runs_only_when_named() -> None:
    assert "eviction_at_size" in discover()
    assert explicit_only("eviction_at_size")


def test_the_report_puts_draco_beside_the_bare_client() -> None:
    out = {
        "fill": {"total_s": 95.0, "writers": 4, "connections": 32, "cpus": 16, "nodes_ready_s": 20.0,
                 "objects_s": 75.0, "writes_per_s": 560.0, "load": "1 1 1"},
        "draco": {"pods": 1_000, "evicted_s": 20.0, "gone_s": 21.0, "condition_s": 22.0,
                  "cpu_s": 5.0, "load": "2 2 2"},
        "bare": {"pods": 1_000, "evicted_s": 16.0, "gone_s": 17.0, "load": "2 2 2"},
        "ready": {"ready_s": 10.0},
    }
    rows = eviction_at_size.rows(out, World())
    table = format_table(rows)
    assert "10,000 allocated claims" in table and "95000.0 ms" in table
    assert "4 writer(s) x 32 connections on 16 cores" in table
    evict = rows[1]
    assert (evict["draco_s"], evict["baseline_s"]) == (20.0, 16.0)
    assert evict["ratio"] == pytest.approx(0.8)
    assert "0.8x" in table and "gone 21.0 s vs 17.0 s" in table


def _node(ready: str, *taints: tuple[str, str]) -> dict[str, object]:
    return {"metadata": {"name": "node-0"},
            "spec": {"taints": [{"key": k, "effect": e} for k, e in taints]},
            "status": {"conditions": [{"type": "Ready", "status": ready}]}}


# a node watch's event -> counted as ready for bound pods
READINESS = [
    ("ADDED", _node("True"), True),
    ("MODIFIED", _node("True", ("node.kubernetes.io/not-ready", "NoSchedule")), True),
    ("MODIFIED", _node("True", ("node.kubernetes.io/not-ready", "NoExecute")), False),
    ("MODIFIED", _node("True", ("node.kubernetes.io/unreachable", "NoExecute")), False),
    ("MODIFIED", _node("False"), False),
    ("MODIFIED", _node("Unknown"), False),
    ("DELETED", _node("True"), False),
]


@pytest.mark.parametrize(("kind", "node", "counted"), READINESS)
def test_a_node_counts_once_ready_without_a_noexecute_taint(
        kind: str, node: dict[str, object], counted: bool) -> None:
    ready = {"node-0"} if kind != "ADDED" else set()
    node_readiness(ready)(kind, node, 0.0)
    assert ("node-0" in ready) is counted
