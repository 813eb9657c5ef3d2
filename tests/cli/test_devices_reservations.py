"""`draco devices` shows which Kueue Workload draco's devices check keeps a device for.

The reservation is the annotation `resource.draco.dev/reservation` on the Workload
(`admission.reservation`); the view shows it where the controller honours it (valid
for the Workload's admission, the Workload not over), as a `workload` field on each
kept device and a `workloads` section, added to the JSON contract only where there are
reservations: a cluster without them prints exactly the fields it printed before."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from operators.admission.reservation import (
    RESERVATION_ANNOTATION,
    Reservation,
    admission_fingerprint,
)
from operators.admission.workload import parse_workload
from operators.cli.main import main
from operators.model import DeviceID
from tests.admission.kueue import pod_set, workload
from tests.cli.test_devices import slice_obj, write

DRIVER = "gpu.example.com"
BASE_FIELDS = {"driver", "pool", "device", "slice", "node", "nodeSelector", "attributes", "capacity", "taints",
               "patchedBy"}


def reserved(name: str, devices: list[str], *, stale: bool = False, finished: bool = False) -> dict[str, Any]:
    """Workload NAME (two pods) whose reservation keeps DEVICES of pool p."""
    conditions = [{"type": "Finished", "status": "True", "reason": "Succeeded", "message": "",
                   "lastTransitionTime": "2026-11-28T00:05:00Z"}] if finished else []
    wl = workload(name, [pod_set("workers", 2, templates={"gpu": "gpu"})], state="Ready", conditions=conditions)
    fingerprint = "0" * 16 if stale else admission_fingerprint(parse_workload(wl))
    r = Reservation(f"uid-{name}", fingerprint, "2026-11-28T00:01:00Z",
                    frozenset(DeviceID(DRIVER, "p", d) for d in devices),
                    {"workers": {"0": {}, "1": {}}}, {}, (), "devices reserved for 2 pods")
    wl["metadata"]["annotations"] = {RESERVATION_ANNOTATION: r.to_json()}
    return wl


def devices_json(tmp_path: Path, capsys: pytest.CaptureFixture[str], objects: list[dict[str, Any]],
                 ) -> dict[str, Any]:
    f = write(tmp_path, "c.yaml", [slice_obj("s", "p", ["d0", "d1", "d2"]), *objects])
    assert main(["devices", "--from", f, "-o", "json"]) == 0
    return dict(json.loads(capsys.readouterr().out))


CASES: list[tuple[str, list[dict[str, Any]], dict[str, str]]] = [
    # (case, Workloads, device -> the Workload shown for it)
    ("a Ready Workload's reservation", [reserved("w", ["d0", "d1"])], {"d0": "default/w", "d1": "default/w"}),
    ("two Workloads, each its own devices", [reserved("w", ["d0"]), reserved("v", ["d2"])],
     {"d0": "default/w", "d2": "default/v"}),
    ("a reservation of an earlier admission keeps nothing", [reserved("w", ["d0"], stale=True)], {}),
    ("a finished Workload keeps nothing", [reserved("w", ["d0"], finished=True)], {}),
    ("a Workload without a reservation", [workload("w", [pod_set("workers", 1)])], {}),
]


@pytest.mark.parametrize(("workloads", "shown"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_device_names_the_workload_it_is_kept_for(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], workloads: list[dict[str, Any]],
        shown: dict[str, str]) -> None:
    doc = devices_json(tmp_path, capsys, workloads)
    assert {d["device"]: d["workload"] for d in doc["devices"] if "workload" in d} == shown
    for d in doc["devices"]:  # the contract's fields unchanged, `workload` only added
        assert set(d) - {"workload"} == BASE_FIELDS
    assert doc["errors"] == [], "a Workload in the input is read, not an error"
    if shown:
        assert set(doc["workloads"]) == set(shown.values())
    else:
        assert "workloads" not in doc and set(doc) == {"devices", "pools", "errors"}


def test_the_workloads_section_says_when_and_for_how_many_pods(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = devices_json(tmp_path, capsys, [reserved("w", ["d1", "d0"])])
    assert doc["workloads"] == {"default/w": {
        "reservedAt": "2026-11-28T00:01:00Z", "devices": [f"{DRIVER}/p/d0", f"{DRIVER}/p/d1"], "pods": 2,
        "message": "devices reserved for 2 pods"}}


def test_the_table_has_a_reserved_for_column_only_where_devices_are_kept(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write(tmp_path, "c.yaml", [slice_obj("s", "p", ["d0", "d1", "d2"]), reserved("w", ["d0"])])
    assert main(["devices", "--from", f]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split()[-2:] == ["RESERVED", "FOR"]
    row = next(line for line in lines if " d0 " in f" {line} ")
    assert row.split()[-1] == "default/w"
    assert "Reserved for Kueue Workloads (draco's devices check):" in out
    assert any(line.split()[:3] == ["default/w", "2", "1"] for line in lines)
    f = write(tmp_path, "plain.yaml", [slice_obj("s", "p", ["d0"])])
    assert main(["devices", "--from", f]) == 0
    plain = capsys.readouterr().out
    assert "RESERVED" not in plain and "Kueue" not in plain
