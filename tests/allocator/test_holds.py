"""Holds: devices promised to claims being written. A written hold that is never seen
back is released after the ttl, never before; the allocator's wake-up for it is never
late; shares are held until released."""

from __future__ import annotations

from operators.allocator_controller.holds import Holds
from operators.model import DeviceID, NamespacedName
from operators.model.quantity import Quantity


def key(name: str) -> NamespacedName:
    return NamespacedName("ns", name)


def dev(name: str) -> DeviceID:
    return DeviceID("gpu.example.com", "pool", name)


def test_a_written_hold_expires_after_the_ttl_and_not_before() -> None:
    holds = Holds(ttl=60)
    holds.hold(key("a"), "u-a", [dev("gpu-0")])
    holds.hold(key("b"), "u-b", [dev("gpu-1")])
    holds.hold(key("c"), "u-c", [dev("gpu-2")])  # never written: only its caller releases it
    holds.written(key("a"), 100)
    holds.written(key("b"), 130)
    assert holds.next_expiry() == 160
    assert holds.expire(160) == []  # at the ttl exactly: still held
    assert holds.expire(160.5) == [key("a")]
    assert not holds.holds_device(dev("gpu-0")) and holds.holds_device(dev("gpu-1"))
    assert holds.next_expiry() == 190
    assert holds.expire(190.5) == [key("b")]
    assert holds.next_expiry() is None and holds.expire(10_000) == []
    assert holds.holds_device(dev("gpu-2"))


def test_a_hold_released_early_leaves_the_wake_up_early_never_late() -> None:
    holds = Holds(ttl=60)
    for i, name in enumerate("abc"):
        holds.hold(key(name), f"u-{name}", [dev(f"gpu-{i}")])
        holds.written(key(name), 100 + 10 * i)
    holds.release(key("a"))  # seen back allocated
    due = holds.next_expiry()
    assert due is not None and due <= 170  # b's expiry, or earlier
    assert holds.expire(due + 0.01) == ([key("b")] if due == 170 else [])
    assert holds.expire(170.5) == [key("b")]
    assert holds.next_expiry() == 180


def test_shares_are_held_until_their_claim_is_released() -> None:
    holds = Holds()
    share = (dev("gpu-0"), (("memory", Quantity.parse("4Gi")),))
    holds.hold(key("a"), "u-a", [], shares=[share])
    holds.hold(key("b"), "u-b", [dev("gpu-1")])
    assert list(holds.shares()) == [share]
    holds.hold(key("a"), "u-a2", [dev("gpu-2")])  # decided again, whole this time
    assert list(holds.shares()) == []
    holds.hold(key("c"), "u-c", [], shares=[share])
    holds.release(key("c"))
    assert list(holds.shares()) == []
