"""`draco allocate` for programs: `--feature-gates`, `--serve`, tolerations in the JSON
results, and invalid pools node by node (all found by upstream's allocator suite)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from operators.allocator.features import DEFAULT_GATES, parse_feature_gates
from operators.cli.allocate_serve import serve
from operators.cli.main import main
from tests.cli.test_allocate import dclass, dev, exactly, node, rclaim, rslice, write

TAINT = {"key": "maintenance", "value": "yes", "effect": "NoSchedule"}


def tainted() -> list[dict[str, Any]]:
    gpu = dev("gpu-0")
    gpu["taints"] = [TAINT]
    return [node("node-1"), dclass(), rslice("node-1", [gpu])]


def allocate_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["allocate", *args, "-o", "json"]) == 0
    return dict(json.loads(capsys.readouterr().out)["claims"])


def test_results_carry_the_tolerations_the_claim_used(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    toleration = {"key": "maintenance", "operator": "Exists", "effect": "NoSchedule"}
    path = write(tmp_path, [*tainted(), rclaim("c", exactly(tolerations=[toleration]))])
    rec = allocate_json(capsys, "--from", path)["default/c"]
    assert rec["status"] == "allocated"
    assert rec["results"][0]["tolerations"] == [toleration]


def test_feature_gates_default_to_1_37_and_parse_as_upstream_spells_them() -> None:
    assert DEFAULT_GATES.prioritized_list and not DEFAULT_GATES.fractional_capacity_range
    gates = parse_feature_gates("DRADeviceTaints=false, DRAPrioritizedList=False,"
                                "DRAResourceClaimDeviceStatus=true")
    assert not gates.device_taints and not gates.prioritized_list and gates.admin_access
    for bad, why in (("DRANope=true", "unrecognized feature gate: DRANope"),
                     ("DRADeviceTaints", "expected NAME=true or NAME=false"),
                     ("DRADeviceTaints=maybe", "expected NAME=true or NAME=false"),
                     ("DRAListTypeAttributes=true", "does not implement")):
        with pytest.raises(ValueError, match=why):
            parse_feature_gates(bad)
    assert parse_feature_gates("DRAListTypeAttributes=false") == DEFAULT_GATES


def test_feature_gates_change_the_verdict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, [*tainted(), rclaim("c")])
    assert allocate_json(capsys, "--from", path)["default/c"]["status"] == "unsatisfiable"
    off = allocate_json(capsys, "--from", path, "--feature-gates", "DRADeviceTaints=false")
    assert off["default/c"]["status"] == "allocated"  # taints do not count with the gate off
    listed = write(tmp_path, [*tainted(), rclaim("c", {"name": "r", "firstAvailable": [
        {"name": "a", "deviceClassName": "gpu"}]})], "list.yaml")
    rec = allocate_json(capsys, "--from", listed, "--feature-gates", "DRAPrioritizedList=false")
    assert rec["default/c"]["status"] == "error"
    assert "DRAPrioritizedList feature is disabled" in rec["default/c"]["reason"]


def test_an_unknown_gate_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["allocate", "--feature-gates", "DRANope=true"])
    assert exit_info.value.code == 2
    assert "unrecognized feature gate: DRANope" in capsys.readouterr().err


def test_an_invalid_pool_on_one_node_does_not_stop_another_node(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Upstream reports invalid pools only when no node fits: node-1's pool repeats a
    device name, node-2's is fine."""
    objects = [node("node-1"), node("node-2"), dclass(),
               rslice("a", [dev("gpu-0")], node_name="node-1", pool="p1", count=2),
               rslice("b", [dev("gpu-0")], node_name="node-1", pool="p1", count=2),
               rslice("node-2", [dev("gpu-0")]), rclaim("c")]
    rec = allocate_json(capsys, "--from", write(tmp_path, objects))["default/c"]
    assert (rec["status"], rec["node"]) == ("allocated", "node-2")
    only = allocate_json(capsys, "--from", write(tmp_path, objects[:-2] + [objects[-1]], "one.yaml"))
    assert only["default/c"]["status"] == "error"
    assert "invalid resource pools were encountered" in only["default/c"]["reason"]
    assert "duplicate device name gpu-0" in only["default/c"]["reason"]


def ask(*requests: dict[str, Any] | str) -> list[dict[str, Any]]:
    lines = "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in requests)
    out = io.StringIO()
    assert serve(DEFAULT_GATES, io.StringIO(lines), out) == 0
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_serve_answers_each_line_and_keeps_going_after_a_bad_one() -> None:
    objects = [node("node-1"), dclass(), rslice("node-1", [dev("gpu-0"), dev("gpu-1")]),
               {**rclaim("c"), "metadata": {"name": "c"}}]  # no namespace: "default"
    held = {"driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0"}
    answers = ask({"objects": objects, "claims": ["c"], "node": "node-1", "inUse": [held]},
                  "not json",
                  {"objects": objects, "claims": ["c"], "node": "node-1",
                   "inUse": [held, {**held, "device": "gpu-1"}]},
                  {"objects": objects, "claims": ["missing"], "node": "node-1"},
                  {"objects": objects, "claims": ["c"], "node": "elsewhere"},
                  {"objects": objects, "claims": ["c"], "node": "node-1",
                   "featureGates": "DRANope=true"})
    first = answers[0]
    assert first["status"] == "allocated"
    assert first["allocations"][0]["devices"]["results"] == [
        {"request": "gpu", "driver": "gpu.example.com", "pool": "node-1", "device": "gpu-1"}]
    assert first["allocations"][0]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0][
        "values"] == ["node-1"]
    assert answers[1]["status"] == "bad-request" and "line 2" in answers[1]["reason"]
    assert answers[2]["status"] == "unsatisfiable" and "allocations" not in answers[2]
    assert answers[3] == {"status": "unreadable",
                          "reason": "ResourceClaim default/missing: no such ResourceClaim in the request"}
    assert answers[4]["status"] == "bad-request" and "no Node 'elsewhere'" in answers[4]["reason"]
    assert answers[5]["status"] == "bad-request" and "unrecognized feature gate" in answers[5]["reason"]


def test_serve_counts_shares_other_claims_hold() -> None:
    gpu = {"name": "gpu-0", "allowMultipleAllocations": True,
           "capacity": {"memory": {"value": "8Gi"}}}
    objects = [node("node-1"), dclass(), rslice("node-1", [gpu]),
               rclaim("c", exactly(capacity={"requests": {"memory": "6Gi"}}))]
    share = {"driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0"}
    free, held = ask({"objects": objects, "claims": ["default/c"], "node": "node-1"},
                     {"objects": objects, "claims": ["default/c"], "node": "node-1",
                      "consumed": [{**share, "capacity": {"memory": "4Gi"}}]})
    assert free["status"] == "allocated"
    assert free["allocations"][0]["devices"]["results"][0]["consumedCapacity"] == {"memory": "6Gi"}
    assert held["status"] == "unsatisfiable"  # 4Gi held + 6Gi asked > 8Gi
