"""The pure decisions under extreme input: the patch merge and the eviction of a claim
whose tolerations are anything the API (or a broken client) might hold."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import tempfile
from pathlib import Path
from typing import Any

import yaml
from bad_objects import INTERESTING_INTS, INTERESTING_STRINGS, base_objects
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import operators.cli.state  # noqa: F401 - registers the CRD kinds' parsers
from operators.cli.main import main
from operators.model import DeviceTaint, ModelError, ResourceClaim, parse_object
from operators.tracker.slice_patches.merge import resolve, verdict
from operators.tracker.slice_patches.objects import ResourceSlicePatch

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])
TAINT = DeviceTaint("example.com/maintenance", "planned", "NoExecute")

names = st.sampled_from(["example.com/a", "example.com/b", "gpu.example.com/model", "x.example.com/c"])
attribute = st.one_of(
    st.builds(lambda v: {"int": v}, st.sampled_from(INTERESTING_INTS)),
    st.builds(lambda v: {"string": v}, st.sampled_from(INTERESTING_STRINGS)),
    st.builds(lambda v: {"bool": v}, st.booleans()),
    st.just({"null": {}}),
    st.builds(lambda v: {"version": v}, st.sampled_from(["1.0.0", "01.0", "v2", ""])),
)
patch_dict = st.fixed_dictionaries(
    {"name": st.text("abcdefghij-", min_size=1, max_size=6)},
    optional={
        "priority": st.one_of(st.sampled_from(INTERESTING_INTS), st.just("high"), st.floats()),
        "created": st.sampled_from(["2026-01-01T00:00:00Z", "0001-01-01T00:00:00Z",
                                    "9999-12-31T23:59:59Z", "not a time"]),
        "attributes": st.dictionaries(names, attribute, max_size=3),
        "capacity": st.dictionaries(names, st.builds(lambda v: {"value": v},
                                                     st.sampled_from(INTERESTING_STRINGS)), max_size=2),
    },
)


def _patch_object(d: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": d["name"]}
    if "created" in d:
        meta["creationTimestamp"] = d["created"]
    devices: dict[str, Any] = {"filter": {}}
    for key in ("priority", "attributes", "capacity"):
        if key in d:
            devices[key] = d[key]
    return {"apiVersion": "resource.draco.dev/v1alpha1", "kind": "ResourceSlicePatch", "metadata": meta,
            "spec": {"devices": devices}}


@SETTINGS
@given(st.lists(patch_dict, max_size=5, unique_by=lambda d: d["name"]), st.randoms())
def test_patch_merge_picks_the_same_winner_in_any_order(dicts: list[dict[str, Any]], rnd: Any) -> None:
    patches: list[ResourceSlicePatch] = []
    for d in dicts:
        try:
            parsed = parse_object(_patch_object(d))
        except ModelError as err:
            assert err.ref.name == d["name"]
            continue
        assert isinstance(parsed, ResourceSlicePatch)
        patches.append(parsed)
    first = verdict(resolve(patches), {})
    shuffled = list(patches)
    rnd.shuffle(shuffled)
    assert verdict(resolve(shuffled), {}) == first
    for name, winner in first.attribute_patches.items():
        best = min((p for p in patches if name in p.attributes), key=lambda p: p.precedence)
        assert best.meta.name == winner


toleration = st.fixed_dictionaries({}, optional={
    "key": st.sampled_from(["", "example.com/maintenance", "example.com/other", 7, None, "🙂"]),
    "operator": st.sampled_from(["Exists", "Equal", "", "Gt", "exists", 5, None]),
    "value": st.sampled_from(["", "planned", "other", 1, None]),
    "effect": st.sampled_from(["", "NoExecute", "NoSchedule", "None", "Bogus", None, True]),
    "tolerationSeconds": st.one_of(st.sampled_from(INTERESTING_INTS), st.sampled_from(["300", 1.5, None])),
})
where = st.sampled_from(["result", "request", "annotation"])


@SETTINGS
@given(st.lists(toleration, max_size=3), where)
def test_a_claim_is_never_dropped_from_eviction_by_its_tolerations(
    tolerations: list[dict[str, Any]], place: str
) -> None:
    objects = base_objects()
    claim = next(o for o in objects if o["kind"] == "ResourceClaim" and o["metadata"]["name"] == "training")
    result = claim["status"]["allocation"]["devices"]["results"][0]
    result.pop("tolerations", None)
    if place == "result":
        result["tolerations"] = copy.deepcopy(tolerations)
    elif place == "request":
        claim["spec"]["devices"]["requests"][0]["firstAvailable"][0]["tolerations"] = copy.deepcopy(tolerations)
    else:
        claim["metadata"]["annotations"] = {"resource.draco.dev/tolerations": json.dumps(tolerations)}
    parsed = parse_object(claim)  # tolerations never make a claim unreadable
    assert isinstance(parsed, ResourceClaim) and parsed.allocation is not None
    try:
        tols = parsed.tolerations_for(parsed.allocation.results[0])
    except ModelError:
        tols = ()  # a malformed annotation is ignored (and reported)
    tolerated = any(t.tolerates(TAINT) for t in tols if t.effect in ("", "NoExecute"))
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "c.yaml"
        f.write_text(yaml.safe_dump_all(objects, allow_unicode=True))
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["evictions", "--from", str(f), "--now", "2026-11-22T10:00:00Z", "-o", "json"])
    assert code == 0, err.getvalue()
    doc = json.loads(out.getvalue())
    pending = doc["evict"] + [p["pod"] for p in doc["later"]]
    if not tolerated:
        assert "team-a/trainer-0" in doc["evict"], doc
    else:
        assert "team-a/trainer-0" not in doc["evict"] or any(
            t.toleration_seconds is not None for t in tols if t.tolerates(TAINT))
    if parsed.toleration_problems():
        assert "ResourceClaim/team-a/training" in {e["object"] for e in doc["errors"]}
    assert len(pending) == len(set(pending))
