"""Allocations, claim/pod relations and subscriber notifications."""

from __future__ import annotations

from tracker_builders import DRIVER, claim_obj, ev, pod_obj, slice_obj

from operators.model import DeviceID, NamespacedName
from operators.tracker import Allocation, Change, Tracker


def key(name: str, ns: str = "ns") -> NamespacedName:
    return NamespacedName(ns, name)


D0, D1 = DeviceID(DRIVER, "pool", "d0"), DeviceID(DRIVER, "pool", "d1")


def make() -> Tracker:
    t = Tracker()
    t.apply(ev(slice_obj("s", "pool", ["d0", "d1", "d2"])))
    return t


def test_allocations_by_device_with_admin_access_marked() -> None:
    t = make()
    t.apply(ev(claim_obj("user", [(DRIVER, "pool", "d0")])))
    t.apply(ev(claim_obj("admin", [(DRIVER, "pool", "d0"), (DRIVER, "pool", "d1")], admin=True)))
    assert t.allocations(D0) == (
        Allocation(key("admin"), "gpu", True),
        Allocation(key("user"), "gpu", False),
    )
    assert t.is_allocated(D0)
    assert not t.is_allocated(D1)  # only admin access holds it
    assert t.is_allocated(D1, include_admin_access=True)
    assert sorted(t.allocated_device_ids()) == [D0, D1]
    assert t.claim_devices(key("admin")) == {D0, D1}


def test_reallocation_moves_the_device_index() -> None:
    t = make()
    t.apply(ev(claim_obj("c", [(DRIVER, "pool", "d0")])))
    before = t.stats.view_updates
    change = t.apply(ev(claim_obj("c", [(DRIVER, "pool", "d1")]), "MODIFIED"))
    assert change.allocations == {D0, D1} and change.claims == {key("c")}
    assert change.devices == frozenset()  # published device views do not depend on allocations
    assert t.stats.view_updates == before
    assert t.allocations(D0) == () and t.allocations(D1)[0].claim == key("c")
    change = t.apply(ev(claim_obj("c"), "MODIFIED"))  # deallocated
    assert change.allocations == {D1} and list(t.allocated_device_ids()) == []


def test_pod_claims_direct_template_and_extended() -> None:
    t = make()
    t.apply(
        ev(
            pod_obj(
                "p",
                claims=["shared"],
                templates={"gpu": "p-gpu-abc", "later": None},
                extended="p-ext",
            )
        )
    )
    assert t.claims_of_pod(key("p")) == (key("shared"), key("p-gpu-abc"), key("p-ext"))
    for c in ("shared", "p-gpu-abc", "p-ext"):
        assert t.pods_of_claim(key(c)) == (key("p"),)
    assert t.pods_of_claim(key("later")) == ()


def test_pods_of_claim_merge_reservations_and_references() -> None:
    t = make()
    t.apply(ev(claim_obj("c", [(DRIVER, "pool", "d0")], reserved_for=["reserved-only", "both"])))
    t.apply(ev(pod_obj("both", claims=["c"])))
    t.apply(ev(pod_obj("ref-only", claims=["c"])))
    t.apply(ev(pod_obj("elsewhere", namespace="other", claims=["c"])))
    assert t.pods_of_claim(key("c")) == (key("both"), key("ref-only"), key("reserved-only"))
    assert t.pods_of_claim(key("c", "other")) == (key("elsewhere", "other"),)
    t.apply(ev(pod_obj("ref-only", claims=[]), "MODIFIED"))
    t.apply(ev(pod_obj("both"), "DELETED"))
    assert t.pods_of_claim(key("c")) == (key("both"), key("reserved-only"))  # still reserved
    t.apply(ev(claim_obj("c"), "DELETED"))
    assert t.pods_of_claim(key("c")) == ()
    assert t.claims_of_pod(key("both")) == ()


def test_subscribers_hear_exactly_what_changed() -> None:
    t = make()
    seen: list[Change] = []
    unsubscribe = t.subscribe(seen.append)
    t.apply(ev(claim_obj("c", [(DRIVER, "pool", "d0")])))
    t.apply(ev(pod_obj("p", claims=["c"])))
    t.apply(ev(pod_obj("p", claims=["c"]), "MODIFIED"))  # identical: silent
    obj = slice_obj("s", "pool", ["d0", "d1", "d2"])
    obj["spec"]["devices"][2]["attributes"]["model"] = {"string": "A100"}
    t.apply(ev(obj, "MODIFIED"))
    assert [(c.claims, c.pods, c.allocations, c.devices) for c in seen] == [
        ({key("c")}, set(), {D0}, set()),
        (set(), {key("p")}, set(), set()),
        (set(), set(), set(), {DeviceID(DRIVER, "pool", "d2")}),
    ]
    unsubscribe()
    t.apply(ev(pod_obj("p"), "DELETED"))
    assert len(seen) == 3


def test_batch_coalesces_into_one_notification() -> None:
    t = Tracker()
    seen: list[Change] = []
    t.subscribe(seen.append)
    change = t.apply_all(
        [ev(slice_obj(f"s{i}", f"p{i}", ["d"])) for i in range(5)]
        + [ev(claim_obj("c", [(DRIVER, "p0", "d")]))]
    )
    assert len(seen) == 1 and t.stats.notifications == 1
    assert seen[0].devices == {DeviceID(DRIVER, f"p{i}", "d") for i in range(5)} == change.devices
    assert seen[0].claims == {key("c")}


def test_a_failing_subscriber_does_not_stop_others() -> None:
    t = Tracker()
    seen: list[Change] = []

    def broken(_: Change) -> None:
        raise RuntimeError("bug")

    t.subscribe(broken)
    t.subscribe(seen.append)
    t.apply(ev(slice_obj("s", "p", ["d"])))
    assert len(seen) == 1 and t.stats.subscriber_errors == 1


def test_bad_pod_update_drops_the_old_pod_and_its_relations() -> None:
    t = make()
    t.apply(ev(pod_obj("p", claims=["c"])))
    bad = pod_obj("p", claims=["c"])
    bad["spec"]["resourceClaims"][0] = {"name": "x"}
    change = t.apply(ev(bad, "MODIFIED"))
    assert (
        change.pods == {key("p")}
        and change.errors[0].path == "spec.resourceClaims[0].resourceClaimName"
    )
    assert t.pod(key("p")) is None and t.pods_of_claim(key("c")) == ()
