"""Property: on tiny random clusters the allocator finds an allocation exactly when a
brute-force oracle does, every allocation it returns is valid, and a claim's first
`firstAvailable` request gets the earliest subrequest any solution can use, and the
allocation is the first fit in upstream's search order (the oracle enumerates every
combination in that order, so its first solution is what kube-scheduler picks).

The one exception is upstream's: `All` devices that break a `matchAttribute`
constraint end the search with an error (see the table), whatever else might fit."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from operators.allocator import allocate
from tests.allocator.build import case_inputs

Pred = Callable[[dict[str, Any]], bool]
SELECTORS: list[tuple[str | None, Pred]] = [
    (None, lambda d: True),
    ('device.attributes["driver-a"].model == "a"', lambda d: d["model"] == "a"),
    ('device.attributes["driver-a"].numa == 1', lambda d: d["numa"] == 1),
]
CONSTRAINT_ATTRS = ["numa", "pcie"]


@dataclass
class Spec:
    selector: int
    count: int
    all_mode: bool
    tolerate: bool


def _spec() -> st.SearchStrategy[Spec]:
    return st.builds(Spec, st.integers(0, 2), st.integers(1, 2),
                     st.integers(0, 3).map(lambda n: n == 0), st.booleans())


devices_st = st.lists(
    st.fixed_dictionaries({
        "model": st.sampled_from(["a", "b"]),
        "numa": st.integers(0, 1),
        "pcie": st.sampled_from([None, "x", "y"]),
        "taint": st.sampled_from([None, "NoSchedule", "NoExecute", "None"]),
        "in_use": st.integers(0, 3).map(lambda n: n == 0),
    }), min_size=1, max_size=4)

request_st = st.lists(_spec(), min_size=1, max_size=2)  # 1: exactly, 2: firstAvailable
claim_st = st.fixed_dictionaries({
    "requests": st.lists(request_st, min_size=1, max_size=2),
    "constraint": st.sampled_from([None, *CONSTRAINT_ATTRS]),
})


def _api_spec(s: Spec) -> dict[str, Any]:
    out: dict[str, Any] = {}
    expr = SELECTORS[s.selector][0]
    if expr:
        out["selectors"] = [expr]
    if s.all_mode:
        out["mode"] = "All"
    else:
        out["count"] = s.count
    if s.tolerate:
        out["tolerations"] = [{"key": "k", "operator": "Exists"}]
    return out


def _case(devices: list[dict[str, Any]], claims: list[dict[str, Any]]) -> dict[str, Any]:
    devs = []
    for i, d in enumerate(devices):
        attrs: dict[str, Any] = {"model": {"string": d["model"]}, "numa": {"int": d["numa"]}}
        if d["pcie"] is not None:
            attrs["pcie"] = {"string": d["pcie"]}
        dev: dict[str, Any] = {"name": f"d{i}", "attributes": attrs}
        if d["taint"]:
            dev["taints"] = [{"key": "k", "effect": d["taint"]}]
        devs.append(dev)
    api_claims = []
    for ci, c in enumerate(claims):
        reqs = []
        for ri, alts in enumerate(c["requests"]):
            if len(alts) == 1:
                reqs.append({"name": f"r{ri}", **_api_spec(alts[0])})
            else:
                reqs.append({"name": f"r{ri}", "firstAvailable": [
                    {"name": f"s{k}", **_api_spec(a)} for k, a in enumerate(alts)]})
        ac: dict[str, Any] = {"name": f"c{ci}", "requests": reqs}
        if c["constraint"]:
            ac["constraints"] = [{"matchAttribute": f"driver-a/{c['constraint']}"}]
        api_claims.append(ac)
    return {"slices": [{"devices": devs}], "claims": api_claims,
            "inUse": [f"driver-a/pool-1/d{i}" for i, d in enumerate(devices) if d["in_use"]]}


def _fits(d: dict[str, Any], s: Spec) -> bool:
    return SELECTORS[s.selector][1](d)


def _usable(d: dict[str, Any], s: Spec) -> bool:
    return not d["in_use"] and (d["taint"] in (None, "None") or s.tolerate)


def _options(devices: list[dict[str, Any]], s: Spec) -> Iterator[tuple[int, ...]]:
    if s.all_mode:
        chosen = tuple(i for i, d in enumerate(devices) if _fits(d, s))
        if chosen and all(_usable(devices[i], s) for i in chosen):
            yield chosen
        return
    ok = [i for i, d in enumerate(devices) if _fits(d, s) and _usable(d, s)]
    yield from itertools.combinations(ok, s.count)


def _constraint_ok(devices: list[dict[str, Any]], attr: str | None, used: list[int]) -> bool:
    if attr is None:
        return True
    values = [devices[i][attr] for i in used]
    return all(v is not None for v in values) and len(set(values)) <= 1


Slot = tuple[int, tuple[int, ...]]  # (subrequest index, devices) of one request


def oracle(devices: list[dict[str, Any]],
           claims: list[dict[str, Any]]) -> tuple[list[int], list[Slot] | None]:
    """Every subrequest index the first request of the first claim can take in some full
    solution (0 for an `exactly` request), and the first solution in first-fit order:
    requests in order, subrequests in order, device sets in slice order."""
    slots = [(ci, alts) for ci, c in enumerate(claims) for alts in c["requests"]]
    firsts: set[int] = set()
    first_solution: list[Slot] | None = None

    def rec(k: int, taken: set[int], per_claim: dict[int, list[int]], chosen: list[Slot]) -> None:
        nonlocal first_solution
        if k == len(slots):
            if all(_constraint_ok(devices, claims[ci]["constraint"], used)
                   for ci, used in per_claim.items()):
                firsts.add(chosen[0][0])
                if first_solution is None:
                    first_solution = list(chosen)
            return
        ci, alts = slots[k]
        for ai, s in enumerate(alts):
            for opt in _options(devices, s):
                if taken.intersection(opt):
                    continue
                new = dict(per_claim)
                new[ci] = per_claim.get(ci, []) + list(opt)
                rec(k + 1, taken | set(opt), new, [*chosen, (ai, opt)])

    rec(0, set(), {}, [])
    return sorted(firsts), first_solution


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(devices_st, st.lists(claim_st, min_size=1, max_size=2))
def test_allocator_agrees_with_oracle(devices: list[dict[str, Any]],
                                      claims: list[dict[str, Any]]) -> None:
    case = _case(devices, claims)
    outcome = allocate(*case_inputs(case))
    firsts, first_fit = oracle(devices, claims)
    if outcome.status == "error":
        # Upstream's own incompleteness: an `All` device that breaks a constraint on the
        # path the search took is an error, even if other earlier choices would fit.
        assert outcome.reason and "constraint would not be satisfied" in outcome.reason
        return
    assert outcome.status in ("allocated", "unsatisfiable"), outcome.reason
    assert outcome.allocated == bool(firsts), (case, outcome.reason)
    if not outcome.allocated:
        return
    seen: set[str] = set()
    got_slots: list[Slot] = []
    for ci, c in enumerate(claims):
        api = outcome.allocation_api(ci)
        used: list[int] = []
        per_request: dict[str, list[int]] = {}
        for r in api["devices"]["results"]:
            assert r["device"] not in seen, "a device given twice"
            seen.add(r["device"])
            idx = int(r["device"][1:])
            used.append(idx)
            per_request.setdefault(r["request"], []).append(idx)
        names = set()
        for ri, alts in enumerate(c["requests"]):
            match = [(k, a) for k, a in enumerate(alts)
                     if (f"r{ri}" if len(alts) == 1 else f"r{ri}/s{k}") in per_request]
            assert len(match) == 1
            k, s = match[0]
            name = f"r{ri}" if len(alts) == 1 else f"r{ri}/s{k}"
            names.add(name)
            got = per_request[name]
            assert all(_fits(devices[i], s) and _usable(devices[i], s) for i in got)
            if s.all_mode:
                assert sorted(got) == [i for i, d in enumerate(devices) if _fits(d, s)]
            else:
                assert len(got) == s.count
            if ci == 0 and ri == 0:
                assert k == firsts[0], "the preferred satisfiable subrequest was not chosen"
            got_slots.append((k, tuple(got)))
        assert set(per_request) == names
        assert _constraint_ok(devices, c["constraint"], used)
    assert got_slots == first_fit, "not the first fit in upstream's search order"
