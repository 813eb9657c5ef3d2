"""Malformed and extreme objects never escape as exceptions: the model raises only
ModelError, the tracker records the bad object and serves the rest, and every view
names the bad object in its `errors` while still showing everything else."""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from bad_objects import RULE, base_objects, mutated, values
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import operators.cli.state  # noqa: F401 - registers the CRD kinds' parsers
from operators.cli.main import main
from operators.cli.state import build_tracker, error_record
from operators.eviction.decisions import plan
from operators.model import DeviceTaint, ModelError, ResourceClaim, parse_object
from operators.model.objects import ref_of
from operators.tracker import Tracker

SETTINGS = settings(max_examples=50, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
NOW = "2026-11-22T10:00:00Z"
RULE_TAINT = DeviceTaint("example.com/maintenance", "planned", "NoExecute")


def _expected_error(obj: Any) -> str | None:
    """The `errors[].object` a view must show for `obj`, or None when the model reads it."""
    try:
        parse_object(obj)
    except ModelError as err:
        return error_record(err.ref, err.message)["object"]
    return None


def _cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


def _write(objects: list[dict[str, Any]], directory: str) -> str:
    path = Path(directory) / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(objects, allow_unicode=True))
    return str(path)


def _is(obj: dict[str, Any], kind: str, name: str) -> bool:
    return bool(obj.get("kind") == kind and isinstance(obj.get("metadata"), dict)
                and obj["metadata"].get("name") == name)


@SETTINGS
@given(mutated())
def test_model_raises_only_model_error(case: tuple[list[dict[str, Any]], int, tuple[Any, ...]]) -> None:
    objects, index, _ = case
    try:
        parse_object(objects[index])
    except ModelError as err:
        assert str(err.ref) and err.message  # names the object and says what is wrong
        assert "\n" not in err.message or "line" in err.message.lower()


@SETTINGS
@given(mutated())
def test_tracker_records_the_bad_object_and_serves_the_rest(
    case: tuple[list[dict[str, Any]], int, tuple[Any, ...]]
) -> None:
    objects, index, _ = case
    bad = objects[index]
    tracker = build_tracker(objects, clock=lambda: datetime(2026, 11, 22, 10, tzinfo=UTC))
    expected = _expected_error(bad)
    if expected is not None:
        assert ref_of(bad) in tracker.errors or any(
            error_record(ref, "")["object"] == expected for ref in tracker.errors)
    good_claims = [o for i, o in enumerate(objects) if o.get("kind") == "ResourceClaim" and i != index]
    served = {c.meta.name for c in tracker.claims()}
    assert {c["metadata"]["name"] for c in good_claims} <= served
    # Changing the object back and forth and deleting it never raises either.
    original = base_objects()[index]
    for event_type, obj in (("MODIFIED", original), ("MODIFIED", bad), ("DELETED", bad)):
        tracker.apply({"type": event_type, "object": obj})
    plan(tracker)


@settings(SETTINGS, max_examples=30)
@given(mutated())
def test_views_name_the_bad_object_and_show_the_rest(
    case: tuple[list[dict[str, Any]], int, tuple[Any, ...]]
) -> None:
    objects, index, path = case
    bad = objects[index]
    expected = _expected_error(bad)
    with tempfile.TemporaryDirectory() as d:
        f = _write(objects, d)
        code, out, err = _cli(["devices", "--from", f, "-o", "json"])
        assert code == 0, err
        devices = json.loads(out)
        code, out, err = _cli(["evictions", "--from", f, "--now", NOW, "-o", "json"])
        assert code == 0, err
        evictions = json.loads(out)
        code, out, err = _cli(["taint", "pool=node-a", "example.com/drain:NoExecute", "--from", f])
        assert code == 0, err
        assert "selects" in out
        code, out, err = _cli(["taint", "pool=node-a,device=gpu-0", "example.com/maintenance:NoExecute-",
                               "--from", f])
        assert code in (0, 1) and "Traceback" not in err
    for doc in (devices, evictions):
        named = {e["object"] for e in doc["errors"]}
        if expected is not None:
            assert expected in named, (expected, doc["errors"])
    # The rest is still served.
    original = base_objects()[index]
    listed = {(d["driver"], d["pool"], d["device"]) for d in devices["devices"]}
    for o in objects:
        if o.get("kind") == "ResourceSlice" and o is not bad and (
                original["kind"] != "ResourceSlice" or o["spec"]["driver"] != original["spec"]["driver"]):
            for dev in o["spec"]["devices"]:
                assert (o["spec"]["driver"], o["spec"]["pool"]["name"], dev["name"]) in listed
    touches_trainer = (_is(original, "DeviceTaintRule", RULE["metadata"]["name"])
                       or _is(original, "Pod", "trainer-0") or _is(original, "ResourceClaim", "training"))
    if not touches_trainer:
        assert "team-a/trainer-0" in evictions["evict"]
    elif _is(original, "ResourceClaim", "training") and "tolerations" in path:
        claim = parse_object(bad)
        assert isinstance(claim, ResourceClaim) and claim.allocation is not None
        tolerated = any(t.tolerates(RULE_TAINT) for t in claim.tolerations_for(claim.allocation.results[0]))
        if not tolerated:
            assert "team-a/trainer-0" in evictions["evict"], evictions
        if claim.toleration_problems():
            assert "ResourceClaim/team-a/training" in {e["object"] for e in evictions["errors"]}


@SETTINGS
@given(st.lists(values, min_size=1, max_size=4))
def test_arbitrary_documents_never_crash_a_view(docs: list[Any]) -> None:
    """Whole documents of any shape: a view either serves them or names the file."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "any.yaml"
        path.write_text(yaml.safe_dump_all(docs, allow_unicode=True))
        for argv in (["devices", "--from", str(path), "-o", "json"],
                     ["evictions", "--from", str(path), "-o", "json", "--now", NOW]):
            code, out, err = _cli(argv)
            assert "Traceback" not in err and "bug in draco" not in err, err
            if code == 0:
                json.loads(out)
            else:
                assert code == 1 and str(path) in err


@SETTINGS
@given(st.lists(values, min_size=1, max_size=3), st.sampled_from(["ADDED", "MODIFIED", "DELETED"]))
def test_tracker_apply_takes_any_event(objs: list[Any], event_type: Any) -> None:
    tracker = Tracker()
    for obj in objs:
        tracker.apply({"type": event_type, "object": obj})
    for obj in base_objects():
        tracker.apply({"type": "ADDED", "object": obj})
    assert len(list(tracker.claims())) == 2
