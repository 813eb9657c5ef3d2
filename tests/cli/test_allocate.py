"""`draco allocate`: the JSON contract, failures as results, the device view, usage."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from operators.cli.allocate import document
from operators.cli.main import main
from operators.cli.state import build_tracker

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "cluster.yaml"
RECORD_KEYS = {"status", "allocated", "node", "nodeSelector", "results", "config", "reason", "explain"}


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["allocate", *args, "-o", "json"]) == 0
    out = capsys.readouterr().out
    doc = json.loads(out)  # stdout carries only the JSON document
    assert set(doc) == {"claims"}
    for rec in doc["claims"].values():
        assert set(rec) == RECORD_KEYS
        for r in rec["results"]:
            assert set(r) <= {"request", "driver", "pool", "device", "adminAccess", "tolerations"}
            assert r.get("adminAccess", True) is True  # present only when true
    return doc


def node(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


def dev(name: str, **attrs: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name}
    if attrs:
        out["attributes"] = {k: ({"int": v} if isinstance(v, int) else {"string": v})
                             for k, v in attrs.items()}
    return out


def rslice(name: str, devices: list[dict[str, Any]], *, node_name: str | None = None,
           pool: str | None = None, count: int = 1, all_nodes: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"driver": "gpu.example.com",
                            "pool": {"name": pool or name, "generation": 1, "resourceSliceCount": count},
                            "devices": devices}
    if all_nodes:
        spec["allNodes"] = True
    else:
        spec["nodeName"] = node_name or name
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": name}, "spec": spec}


def dclass(name: str = "gpu", config: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}
    if config is not None:
        spec["config"] = [{"opaque": config}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": spec}


def exactly(name: str = "gpu", **extra: Any) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": "gpu", **extra}}


def rclaim(name: str, *requests: dict[str, Any], ns: str = "default",
           allocation: dict[str, Any] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                           "metadata": {"name": name, "namespace": ns},
                           "spec": {"devices": {"requests": list(requests) or [exactly()]}}}
    if allocation is not None:
        obj["status"] = {"allocation": allocation}
    return obj


def write(tmp_path: Path, objects: list[dict[str, Any]], name: str = "in.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(objects))
    return str(path)


def devices_of(rec: dict[str, Any]) -> list[str]:
    return [f"{r['request']}={r['pool']}/{r['device']}" for r in rec["results"]]


TWO_NODES = [node("node-1"), node("node-2"), dclass(),
             rslice("node-1", [dev("gpu-0")]), rslice("node-2", [dev("gpu-0")])]


def test_example_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_json(capsys, "--from", str(EXAMPLE))
    training, inference = doc["claims"]["team-a/training"], doc["claims"]["team-b/inference"]
    # Already allocated in the file: reported as it stands.
    assert training["allocated"] is True and training["node"] == "node-a"
    assert devices_of(training) == ["gpu/h100=node-a/gpu-0"]
    assert training["explain"] is None and training["reason"] is None
    # The FPGA sits behind a rack selector: the first node (by name) on rack r1.
    assert inference["allocated"] is True and inference["node"] == "node-a"
    assert devices_of(inference) == ["accel=rack-1/fpga-0"]
    assert inference["nodeSelector"] == {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "example.com/rack", "operator": "In", "values": ["r1"]}]}]}


def test_each_claim_sees_the_earlier_ones_devices_as_taken(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write(tmp_path, [*TWO_NODES, rclaim("c"), rclaim("a"), rclaim("b")])
    doc = run_json(capsys, "--from", f)
    assert list(doc["claims"]) == ["default/c", "default/a", "default/b"]  # input order
    c, a, b = (doc["claims"][k] for k in ("default/c", "default/a", "default/b"))
    assert (c["node"], devices_of(c)) == ("node-1", ["gpu=node-1/gpu-0"])
    assert (a["node"], devices_of(a)) == ("node-2", ["gpu=node-2/gpu-0"])
    assert b["allocated"] is False and b["node"] is None and b["results"] == []
    assert "cannot allocate" in b["reason"]
    assert b["explain"]["claim"] == "default/b"
    assert b["explain"]["requests"][0]["inUse"] == 2


def test_claims_named_together_are_all_or_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objs = [node("node-1"), dclass(), rslice("node-1", [dev("gpu-0")]), rclaim("a"), rclaim("b")]
    f = write(tmp_path, objs)
    doc = run_json(capsys, "--from", f, "--claim", "default/a", "--claim", "default/b")
    assert set(doc["claims"]) == {"default/a", "default/b"}
    assert all(not r["allocated"] and r["results"] == [] for r in doc["claims"].values())
    # Alone, the same claim fits.
    doc = run_json(capsys, "--from", f, "--claim", "default/b")
    assert devices_of(doc["claims"]["default/b"]) == ["gpu=node-1/gpu-0"]


def test_allocated_claims_hold_their_devices(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    held = {"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com",
                                     "pool": "node-1", "device": "gpu-0"}]}}
    f = write(tmp_path, [*TWO_NODES, rclaim("old", allocation=held), rclaim("new")])
    doc = run_json(capsys, "--from", f, "--claim", "default/new", "--claim", "default/old")
    assert doc["claims"]["default/old"]["allocated"] is True
    assert doc["claims"]["default/new"]["node"] == "node-2"


def test_node_option_and_scoring(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fa = {"name": "gpu", "firstAvailable": [
        {"name": "big", "deviceClassName": "gpu",
         "selectors": [{"cel": {"expression": 'device.attributes["gpu.example.com"].size == 2'}}]},
        {"name": "small", "deviceClassName": "gpu",
         "selectors": [{"cel": {"expression": 'device.attributes["gpu.example.com"].size == 1'}}]}]}
    f = write(tmp_path, [node("node-1"), node("node-2"), dclass(),
                         rslice("node-1", [dev("gpu-0", size=1)]),
                         rslice("node-2", [dev("gpu-0", size=2)]), rclaim("c", fa)])
    best = run_json(capsys, "--from", f)["claims"]["default/c"]
    assert (best["node"], devices_of(best)) == ("node-2", ["gpu/big=node-2/gpu-0"])
    forced = run_json(capsys, "--from", f, "--node", "node-1")["claims"]["default/c"]
    assert (forced["node"], devices_of(forced)) == ("node-1", ["gpu/small=node-1/gpu-0"])


def test_node_independent_claim_has_no_node(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write(tmp_path, [node("node-1"), dclass(config={"driver": "gpu.example.com",
                                                        "parameters": {"mode": "shared"}}),
                         rslice("fabric", [dev("gpu-0")], all_nodes=True),
                         rclaim("c", exactly(adminAccess=True))])
    rec = run_json(capsys, "--from", f)["claims"]["default/c"]
    assert rec["allocated"] is True and rec["node"] is None and rec["nodeSelector"] is None
    assert rec["results"] == [{"request": "gpu", "driver": "gpu.example.com", "pool": "fabric",
                               "device": "gpu-0", "adminAccess": True}]
    assert rec["config"] == [{"source": "FromClass", "opaque": {
        "driver": "gpu.example.com", "parameters": {"mode": "shared"}}}]


def test_nodes_from_slices_when_the_input_has_none(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write(tmp_path, [dclass(), rslice("node-9", [dev("gpu-0")]), rclaim("c")])
    assert run_json(capsys, "--from", f)["claims"]["default/c"]["node"] == "node-9"


@pytest.mark.parametrize(("objects", "reason"), [
    pytest.param([rclaim("c", exactly(selectors=[{"cel": {"expression":
                  'device.attributes["gpu.example.com"].missing == 1'}}]))],
                 "CEL runtime error", id="cel-runtime-error"),
    pytest.param([rslice("part", [dev("gpu-9")], node_name="node-1", count=2),
                  rclaim("c", exactly(allocationMode="All"))],
                 "currently being updated", id="all-over-incomplete-pool"),
    pytest.param([rclaim("c", exactly(count=33))], "exceeds the claim limit", id="too-many-results"),
    pytest.param([rclaim("c", exactly(deviceClassName="nope"))], "device class nope", id="missing-class"),
])
def test_failures_are_results(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                              objects: list[dict[str, Any]], reason: str) -> None:
    base = [node("node-1"), dclass(), rslice("node-1", [dev("gpu-0")])]
    rec = run_json(capsys, "--from", write(tmp_path, base + objects))["claims"]["default/c"]
    assert rec["allocated"] is False and rec["node"] is None
    assert reason in rec["reason"]


def test_time_budget_is_a_result() -> None:
    objs = [*TWO_NODES, rclaim("c")]
    doc = document(build_tracker(objs), objs, [], None, budget_s=1e-9)
    rec = doc["claims"]["default/c"]
    assert rec["allocated"] is False and "too complex" in rec["reason"]


def test_taint_rules_and_patches_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rule = {"apiVersion": "resource.draco.dev/v1alpha1", "kind": "DeviceTaintRule",
            "metadata": {"name": "maint"},
            "spec": {"deviceSelector": {"driver": "gpu.example.com", "pool": "node-1"},
                     "taint": {"key": "maint", "effect": "NoSchedule"}}}
    patch = {"apiVersion": "resource.draco.dev/v1alpha1", "kind": "ResourceSlicePatch",
             "metadata": {"name": "fast"},
             "spec": {"devices": {"filter": {"pool": "node-2"},
                                  "attributes": {"example.com/fast": {"bool": True}}}}}
    want_fast = exactly(selectors=[{"cel": {"expression": '"fast" in device.attributes["example.com"]'}}])
    f = write(tmp_path, [*TWO_NODES, rule, rclaim("plain"), rclaim("again")])
    doc = run_json(capsys, "--from", f)
    assert doc["claims"]["default/plain"]["node"] == "node-2"  # node-1's device is tainted
    again = doc["claims"]["default/again"]
    assert again["allocated"] is False
    assert again["explain"]["requests"][0]["tainted"] == 1
    assert again["explain"]["requests"][0]["inUse"] == 1
    # The patch gives node-2's device the attribute the claim selects.
    doc = run_json(capsys, "--from", write(tmp_path, [*TWO_NODES, patch, rclaim("fast", want_fast)], "p.yaml"))
    assert devices_of(doc["claims"]["default/fast"]) == ["gpu=node-2/gpu-0"]
    doc = run_json(capsys, "--from", write(tmp_path, [*TWO_NODES, rclaim("fast", want_fast)], "np.yaml"))
    assert doc["claims"]["default/fast"]["allocated"] is False


def test_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write(tmp_path, [*TWO_NODES, rclaim("a"), rclaim("b"), rclaim("c")])
    assert main(["allocate", "--from", f]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["CLAIM", "ALLOCATED", "NODE", "DEVICES", "REASON"]
    assert lines[1].split()[:4] == ["default/a", "yes", "node-1", "gpu=node-1/gpu-0"]
    assert lines[3].split()[:3] == ["default/c", "no", "<none>"]
    assert "cannot allocate" in lines[3]


@pytest.mark.parametrize("args", [
    ["--claim", "no-namespace"],
    ["--claim", "a/b/c"],
    ["--claim", "default/missing"],
    ["-o", "yaml"],
    ["--bogus"],
])
def test_bad_usage_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    f = write(tmp_path, [*TWO_NODES, rclaim("a")])
    with pytest.raises(SystemExit) as exc:
        assert main(["allocate", "--from", f, *args]) == 2
        raise SystemExit(2)
    assert exc.value.code == 2
    assert capsys.readouterr().out == ""


def test_unreadable_input_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["allocate", "--from", str(tmp_path / "missing.yaml")]) == 1
    assert "missing.yaml" in capsys.readouterr().err


@pytest.mark.parametrize("api_version", [
    "resource.k8s.io/v1",           # upstream's own rule (1.37+): a taint source too
    "resource.draco.dev/v1alpha1",  # draco's rule
])
def test_rules_of_both_groups_keep_devices_away(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], api_version: str) -> None:
    rule = {"apiVersion": api_version, "kind": "DeviceTaintRule", "metadata": {"name": "drain-1"},
            "spec": {"deviceSelector": {"pool": "node-1"},
                     "taint": {"key": "example.com/drain", "effect": "NoSchedule"}}}
    f = write(tmp_path, [*TWO_NODES, rule, rclaim("a")])
    doc = run_json(capsys, "--from", f, "--claim", "default/a")
    assert doc["claims"]["default/a"]["node"] == "node-2"
    assert devices_of(doc["claims"]["default/a"]) == ["gpu=node-2/gpu-0"]


def test_each_claim_has_a_machine_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """For programs: `allocated`, `unsatisfiable`, `error` (upstream's errors: a missing
    DeviceClass here) and `unreadable` (a claim that cannot be read at all), without
    parsing the reason; a claim with no namespace is in "default" (as `kubectl apply -f`
    puts it) and `--claim NAME` names it."""
    def claim(name: str, cls: str, ns: str | None = None, mode: str | None = None) -> dict[str, Any]:
        exactly: dict[str, Any] = {"deviceClassName": cls}
        if mode:
            exactly["allocationMode"] = mode
        md: dict[str, Any] = {"name": name}
        if ns:
            md["namespace"] = ns
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": md,
                "spec": {"devices": {"requests": [{"name": "r", "exactly": exactly}]}}}
    world = [
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
         "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
         "spec": {"driver": "gpu.example.com", "nodeName": "n",
                  "pool": {"name": "n", "generation": 1, "resourceSliceCount": 1},
                  "devices": [{"name": "d0"}]}},
        claim("first", "gpu", "ns"), claim("second", "gpu", "ns"), claim("nocls", "missing", "ns"),
        claim("bad", "gpu", "ns", mode="Sometimes"), claim("plain", "gpu"),
    ]
    path = tmp_path / "world.yaml"
    path.write_text(yaml.safe_dump_all(world))
    assert main(["allocate", "--from", str(path), "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)["claims"]
    assert {k: v["status"] for k, v in doc.items()} == {
        "ns/first": "allocated", "ns/second": "unsatisfiable", "ns/nocls": "error",
        "default/plain": "unsatisfiable", "ns/bad": "unreadable"}
    assert "allocationMode" in doc["ns/bad"]["reason"]
    assert main(["allocate", "--from", str(path), "--claim", "plain", "-o", "json"]) == 0
    alone = json.loads(capsys.readouterr().out)["claims"]
    assert alone["default/plain"]["status"] == "allocated"
    assert alone["default/plain"]["results"][0]["device"] == "d0"
