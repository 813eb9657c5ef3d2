"""The incremental eviction index: the same answer as a full `plan`, for the work of
what a change touches.

Equivalence is checked after every event of generated event sequences; the cost of
single changes is asserted with the index's work counters, as the tracker's tests do.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from operators.eviction import status as rule_status
from operators.eviction.decisions import plan
from operators.eviction.index import EvictionIndex
from operators.tracker import Tracker
from operators.tracker.taint_rules import TaintRuleOverlay

DRIVER = "gpu.example.com"
T0 = "2026-01-01T00:00:00Z"
DEVICES = ("d0", "d1", "d2", "d3")


def slice_(name: str, pool: str, devices: list[dict[str, Any]], generation: int = 1) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
            "spec": {"driver": DRIVER, "nodeName": "n1",
                     "pool": {"name": pool, "generation": generation, "resourceSliceCount": 1},
                     "devices": devices}}


def claim(name: str, devices: list[str], reserved: list[tuple[str, str]], seconds: int | None = None,
          rv: str = "1") -> dict[str, Any]:
    tolerations = ([] if seconds is None else
                   [{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds}])
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": rv},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
            "status": {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": DRIVER, "pool": "p", "device": d,
                 **({"tolerations": tolerations} if tolerations else {})} for d in devices]}},
                       "reservedFor": [{"resource": "pods", "name": p, "uid": u} for p, u in reserved]}}


def pod(name: str, claims: list[str], *, uid: str | None = None, node: str = "n1", phase: str = "Running",
        rv: str = "1", namespace: str = "ns") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": uid or f"uid-{name}", "resourceVersion": rv},
            "spec": {"nodeName": node, "resourceClaims": [{"name": c, "resourceClaimName": c} for c in claims],
                     "containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": phase}}


def rule(name: str, effect: str, selector: dict[str, str] | None, rv: str = "1") -> dict[str, Any]:
    spec: dict[str, Any] = {"taint": {"key": "k", "effect": effect, "timeAdded": T0}}
    if selector is not None:
        spec["deviceSelector"] = selector
    return {"apiVersion": "resource.draco.dev/v1alpha1", "kind": "DeviceTaintRule",
            "metadata": {"name": name, "uid": f"uid-{name}", "generation": 1, "resourceVersion": rv,
                         "creationTimestamp": T0}, "spec": spec}


def live_index(tracker: Tracker) -> EvictionIndex:
    """An index kept current by the tracker's notifications, as the controller keeps it."""
    index = EvictionIndex()
    index.rebuild(tracker)
    tracker.subscribe(lambda change: index.update(tracker, change))
    return index


def new_tracker() -> Tracker:
    tracker = Tracker()
    tracker.register_overlay(TaintRuleOverlay())
    return tracker


def assert_same_as_full_plan(tracker: Tracker, index: EvictionIndex) -> None:
    full = plan(tracker)
    mine = index.as_plan()
    assert mine.pods == full.pods
    assert mine.claims == full.claims
    assert sorted(map(str, mine.errors)) == sorted(map(str, full.errors))
    for r in rule_status.rules(tracker):
        assert index.counts(r.name) == rule_status.count(tracker, r, full), r.name
        simulated = rule_status.count(tracker, r, plan(tracker, simulate=r.name))
        assert index.simulated_counts(tracker, r) == simulated, r.name


# -- generated event sequences -------------------------------------------------------------

taints = st.lists(st.sampled_from(["NoExecute", "NoSchedule", "None"]), max_size=2)
slice_events = st.builds(
    lambda gen, devs: ("slice", gen, devs), st.integers(1, 3),
    st.lists(st.tuples(st.sampled_from(DEVICES), taints), max_size=4, unique_by=lambda t: t[0]))
claim_events = st.builds(
    lambda n, devs, pods, secs, fake: ("claim", n, devs, pods, secs, fake), st.integers(0, 3),
    st.lists(st.sampled_from(DEVICES), max_size=2), st.lists(st.integers(0, 3), max_size=2),
    st.one_of(st.none(), st.integers(-5, 200_000), st.just(9223372036854775807)), st.booleans())
pod_events = st.builds(
    lambda n, claims, node, phase, uid, ns: ("pod", n, claims, node, phase, uid, ns), st.integers(0, 3),
    st.lists(st.integers(0, 3), max_size=2), st.sampled_from(["n1", ""]),
    st.sampled_from(["Running", "Succeeded"]), st.booleans(), st.sampled_from(["ns", "other"]))
rule_events = st.builds(
    lambda n, effect, sel: ("rule", n, effect, sel), st.integers(0, 2),
    st.sampled_from(["NoExecute", "None", "NoSchedule"]),
    st.one_of(st.none(), st.just({}), st.builds(lambda d: {"device": d}, st.sampled_from(DEVICES)),
              st.just({"pool": "p"})))
delete_events = st.builds(lambda kind, n: ("delete", kind, n),
                          st.sampled_from(["ResourceClaim", "Pod", "DeviceTaintRule", "ResourceSlice"]),
                          st.integers(0, 3))
events = st.lists(st.one_of(slice_events, claim_events, pod_events, rule_events, delete_events),
                  min_size=1, max_size=14)


def to_object(event: tuple[Any, ...], rv: int) -> dict[str, Any]:
    kind = event[0]
    if kind == "slice":
        _, gen, devs = event
        return slice_("s", "p", [{"name": d, "taints": [{"key": "k", "effect": e, "timeAdded": T0} for e in ts]}
                                 for d, ts in devs], gen)
    if kind == "claim":
        _, n, devs, pods, secs, fake = event
        return claim(f"c{n}", devs, [(f"p{i}", "wrong" if fake else f"uid-p{i}") for i in pods], secs, str(rv))
    if kind == "pod":
        _, n, claims, node, phase, uid, ns = event
        return pod(f"p{n}", [f"c{i}" for i in claims], node=node, phase=phase,
                   uid=None if uid else "replacement", rv=str(rv), namespace=ns)
    _, n, effect, sel = event
    return rule(f"r{n}", effect, sel, str(rv))


def delete(event: tuple[Any, ...]) -> dict[str, Any]:
    _, kind, n = event
    if kind == "ResourceSlice":
        return {"kind": kind, "metadata": {"name": "s"}}
    prefix = {"ResourceClaim": "c", "Pod": "p", "DeviceTaintRule": "r"}[kind]
    return {"kind": kind, "metadata": {"name": f"{prefix}{n}", "namespace": "" if kind == "DeviceTaintRule" else "ns"}}


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events)
def test_the_index_agrees_with_a_full_plan_after_every_event(sequence: list[tuple[Any, ...]]) -> None:
    tracker = new_tracker()
    index = live_index(tracker)
    for rv, event in enumerate(sequence, start=2):
        if event[0] == "delete":
            tracker.apply({"type": "DELETED", "object": delete(event)})
        else:
            tracker.apply({"type": "MODIFIED", "object": to_object(event, rv)})
        assert_same_as_full_plan(tracker, index)


def test_batched_changes_agree_too() -> None:
    tracker = new_tracker()
    index = live_index(tracker)
    with tracker.batch():
        tracker.apply({"type": "ADDED", "object": slice_("s", "p", [
            {"name": "d0", "taints": [{"key": "k", "effect": "NoExecute", "timeAdded": T0}]}, {"name": "d1"}])})
        tracker.apply({"type": "ADDED", "object": claim("c0", ["d0"], [("p0", "uid-p0")])})
        tracker.apply({"type": "ADDED", "object": claim("c1", ["d1"], [("p1", "uid-p1")])})
        tracker.apply({"type": "ADDED", "object": pod("p0", ["c0"])})
        tracker.apply({"type": "ADDED", "object": pod("p1", ["c1"])})
        tracker.apply({"type": "ADDED", "object": rule("r", "NoExecute", {"device": "d1"})})
    assert sorted(str(k) for k in index.pods) == ["ns/p0", "ns/p1"]
    assert_same_as_full_plan(tracker, index)


# -- work per change --------------------------------------------------------------------------

def big_cluster(claims: int) -> tuple[Tracker, EvictionIndex]:
    tracker = new_tracker()
    names = [f"d{i}" for i in range(claims)]
    objects: list[dict[str, Any]] = [slice_("s", "p", [
        {"name": n, "taints": [{"key": "k", "effect": "NoExecute", "timeAdded": T0}] if i % 2 else []}
        for i, n in enumerate(names)])]
    for i, n in enumerate(names):
        objects.append(claim(f"c{i}", [n], [(f"p{i}", f"uid-p{i}")], seconds=3600 * (i % 5)))
        objects.append(pod(f"p{i}", [f"c{i}"]))
    objects.append(rule("maint", "NoExecute", {"device": "d0"}))
    tracker.apply_all({"type": "ADDED", "object": o} for o in objects)
    return tracker, live_index(tracker)


def test_a_pod_status_update_costs_one_pod_and_no_claim() -> None:
    tracker, index = big_cluster(1000)
    before = index.stats.snapshot()
    tracker.apply({"type": "MODIFIED", "object": pod("p7", ["c7"], rv="2")})
    after = index.stats.snapshot()
    assert after["updates"] - before["updates"] == 1
    assert after["claims_evaluated"] == before["claims_evaluated"]
    assert after["pods_evaluated"] - before["pods_evaluated"] == 1
    assert after["rule_recounts"] == before["rule_recounts"]
    assert_same_as_full_plan(tracker, index)


def test_a_claim_update_costs_that_claim_and_its_pods() -> None:
    tracker, index = big_cluster(1000)
    before = index.stats.snapshot()
    tracker.apply({"type": "MODIFIED", "object": claim("c9", ["d9"], [("p9", "uid-p9")], seconds=0, rv="2")})
    after = index.stats.snapshot()
    assert after["claims_evaluated"] - before["claims_evaluated"] == 1
    assert after["pods_evaluated"] - before["pods_evaluated"] == 1
    assert index.pods[next(k for k in index.pods if k.name == "p9")].when == datetime(2026, 1, 1, tzinfo=UTC)
    assert_same_as_full_plan(tracker, index)


def test_a_rule_on_one_device_costs_that_devices_claims() -> None:
    tracker, index = big_cluster(1000)
    before = index.stats.snapshot()
    tracker.apply({"type": "ADDED", "object": rule("one", "NoExecute", {"device": "d4"})})
    after = index.stats.snapshot()
    assert after["claims_evaluated"] - before["claims_evaluated"] == 1
    assert after["pods_evaluated"] - before["pods_evaluated"] == 1
    assert after["rule_recounts"] - before["rule_recounts"] == 1  # the new rule, counted once
    # the status write of a rule (same selector) recounts nothing
    tracker.apply({"type": "MODIFIED", "object": rule("one", "NoExecute", {"device": "d4"}, rv="9")})
    assert index.stats.rule_recounts == after["rule_recounts"]
    assert index.counts("one") == rule_status.RuleCounts(1, 1, 1, 1)
    assert_same_as_full_plan(tracker, index)


def test_due_pods_pop_once_in_time_order() -> None:
    tracker, index = big_cluster(20)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    first = index.next_due()
    assert first == start
    due_now = index.pop_due(start)
    assert {p.pod.name for p in due_now} == {f"p{i}" for i in range(20) if i % 2 and i % 5 == 0} | {"p0"}
    assert index.pop_due(start) == []  # popped once
    assert index.next_due() == start + timedelta(hours=1)
    later = index.pop_due(start + timedelta(hours=2))
    assert {p.when for p in later} == {start + timedelta(hours=1), start + timedelta(hours=2)}
    # a toleration that grows moves the pod to its new time; the old entry is dropped
    tracker.apply({"type": "MODIFIED", "object": claim("c3", ["d3"], [("p3", "uid-p3")], seconds=86400, rv="5")})
    assert index.next_due() == start + timedelta(hours=3)  # p13
    rest = index.pop_due(start + timedelta(days=1))
    assert sorted(p.pod.name for p in rest) == ["p13", "p19", "p3", "p9"]
    assert index.next_due() is None
