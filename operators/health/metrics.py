"""Prometheus metrics of the health controller: each DeviceHealthPolicy's devices per
pool and state, and whether its `maxUnavailable` cap holds devices back.

Published once per pass from the pass's decision, so they say what the policy's status
says, per pool rather than as one list. A policy's series are replaced as a whole each
pass (a pool that no longer has devices in a state loses its series) and removed when
the policy goes or turns invalid: their number follows the policies and their pools.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterable

from prometheus_client import Gauge

from operators.health.decisions import Decision
from operators.health.policy import HealthPolicy
from operators.model import DeviceID

STATES = ("selected", "tainted", "held_back", "pending", "recovering")

DEVICES = Gauge(
    "draco_health_devices",
    "Devices of a DeviceHealthPolicy per pool, by state: selected (the policy watches them), "
    "tainted (its DeviceTaintRule holds them, recovering ones included), held_back (a signal, "
    "but maxUnavailable allows no more taints), pending (a signal, waiting out `for`), "
    "recovering (tainted, no signal, waiting out `clearAfter`).",
    ["policy", "driver", "pool", "state"],
)
THROTTLED = Gauge(
    "draco_health_policy_throttled",
    "1 while the DeviceHealthPolicy's Throttled condition is True: maxUnavailable holds "
    "devices with a signal back from being tainted.",
    ["policy", "driver"],
)
_published: dict[str, set[tuple[str, str, str, str]]] = {}  # policy -> its DEVICES label sets
_throttled: dict[str, str] = {}  # policy -> the driver label of its THROTTLED series


def publish(policy: HealthPolicy, selected: Iterable[DeviceID], decision: Decision) -> None:
    """The policy's series for this pass's DECISION over the SELECTED devices."""
    counts: Counter[tuple[str, str, str]] = Counter()
    by_state: dict[str, Iterable[DeviceID]] = {
        "selected": selected, "tainted": decision.taint, "held_back": decision.held_back,
        "pending": decision.pending, "recovering": decision.recovering}
    pools: set[tuple[str, str]] = set()
    for state, devices in by_state.items():
        for dev in devices:
            counts[(dev.driver, dev.pool, state)] += 1
            pools.add((dev.driver, dev.pool))
    labels = {(policy.name, driver, pool, state) for driver, pool in pools for state in STATES}
    for stale in _published.get(policy.name, set()) - labels:
        with contextlib.suppress(KeyError):
            DEVICES.remove(*stale)
    for name, driver, pool, state in labels:
        DEVICES.labels(policy=name, driver=driver, pool=pool, state=state).set(counts[(driver, pool, state)])
    _published[policy.name] = labels
    if _throttled.get(policy.name, policy.driver) != policy.driver:
        _forget_throttled(policy.name)
    _throttled[policy.name] = policy.driver
    THROTTLED.labels(policy=policy.name, driver=policy.driver).set(int(decision.throttled))


def keep_only(policies: Iterable[str]) -> None:
    """Remove the series of every policy not in POLICIES (deleted, or invalid now)."""
    keep = set(policies)
    for name in set(_published) - keep:
        for labels in _published.pop(name):
            with contextlib.suppress(KeyError):
                DEVICES.remove(*labels)
    for name in set(_throttled) - keep:
        _forget_throttled(name)


def _forget_throttled(name: str) -> None:
    driver = _throttled.pop(name, None)
    if driver is not None:
        with contextlib.suppress(KeyError):
            THROTTLED.remove(name, driver)


__all__ = ["DEVICES", "STATES", "THROTTLED", "keep_only", "publish"]
