"""Partitionable devices, generated: no counter is ever exceeded, no device is in two
claims, and the search finds a fit exactly when one exists.

Random pools (one or two counter sets, partitions consuming from one or both), claims
asking for one to three partitions, allocated one after the other as pods arrive; the
devices each allocation takes count as in use for the next. A brute force over every
set of free partitions is the oracle for "a fit exists".
"""

from __future__ import annotations

import itertools
from fractions import Fraction
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from operators.allocator import allocate
from tests.allocator.build import case_inputs

SETS = ("gpu-0", "gpu-1")


@st.composite
def pools(draw: st.DrawFn) -> tuple[dict[str, dict[str, int]], list[dict[str, Any]]]:
    sets = {name: {"mem": draw(st.integers(1, 8)), "sm": draw(st.integers(1, 4))}
            for name in SETS[:draw(st.integers(1, 2))]}
    devices = []
    for i in range(draw(st.integers(1, 7))):
        consumes = []
        for name in draw(st.lists(st.sampled_from(sorted(sets)), min_size=1, max_size=2, unique=True)):
            counters = draw(st.lists(st.sampled_from(["mem", "sm"]), min_size=1, max_size=2, unique=True))
            consumes.append({"counterSet": name, "counters": {
                c: {"value": str(draw(st.integers(0, sets[name][c] + 1)))} for c in counters}})
        devices.append({"name": f"p-{i}", "consumesCounters": consumes})
    return sets, devices


def _fits(chosen: list[dict[str, Any]], sets: dict[str, dict[str, int]],
          taken: list[dict[str, Any]]) -> bool:
    used = {(s, c): Fraction(0) for s, cs in sets.items() for c in cs}
    for d in taken + chosen:
        for cc in d["consumesCounters"]:
            for c, v in cc["counters"].items():
                used[(cc["counterSet"], c)] += Fraction(v["value"])
    return all(used[(s, c)] <= v for s, cs in sets.items() for c, v in cs.items())


@settings(max_examples=300, deadline=None, derandomize=True)
@given(pool=pools(), counts=st.lists(st.integers(1, 3), min_size=1, max_size=5))
def test_partitions_never_overcommit_and_fit_when_a_fit_exists(
        pool: tuple[dict[str, dict[str, int]], list[dict[str, Any]]], counts: list[int]) -> None:
    sets, devices = pool
    by_name = {d["name"]: d for d in devices}
    slices = [{"name": "counters", "count": 2, "sharedCounters": [
                  {"name": s, "counters": {c: {"value": str(v)} for c, v in cs.items()}}
                  for s, cs in sets.items()]},
              {"name": "devices", "count": 2, "devices": devices}]
    taken: list[str] = []
    for i, count in enumerate(counts):
        case = {"slices": slices, "claims": [{"name": f"claim-{i}", "requests": [
            {"name": "req", "count": count}]}],
                "inUse": [f"driver-a/pool-1/{n}" for n in taken]}
        claims, node, inventory, classes, in_use = case_inputs(case)
        outcome = allocate(claims, node, inventory, classes, in_use)
        free = [d for d in devices if d["name"] not in taken]
        exists = any(_fits(list(combo), sets, [by_name[n] for n in taken])
                     for combo in itertools.combinations(free, count))
        assert outcome.status in ("allocated", "unsatisfiable"), outcome.reason
        assert (outcome.status == "allocated") == exists, (outcome.reason, taken, count)
        if outcome.status == "allocated":
            got = [r.device for r in outcome.allocations[0].results]
            assert not set(got) & set(taken), "a device went to two claims"
            assert len(set(got)) == count
            taken += got
            assert _fits([], sets, [by_name[n] for n in taken]), "a counter was exceeded"
