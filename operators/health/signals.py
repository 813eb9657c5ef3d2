"""Where a policy's signals are read: the tracker's device view (slice taints, and the
patched attributes a CEL `device` signal sees) and pods' status (the kubelet's
`allocatedResourcesStatus`), turned into the plain maps `decisions.decide` takes.

A CEL expression that does not compile or fails on a device is no signal: it is a
problem of the policy, said in its status, and that device is left as it was (fail
closed: an expression draco cannot evaluate never taints or clears anything). One
failure is not a failure: reading an attribute the device does not have (`no such
key`) means the device does not report it, so the signal does not hold; a monitor that
deletes its ResourceSlicePatch on recovery clears the signal that way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from operators.cel import compile_selector
from operators.health.policy import DeviceSignal, HealthPolicy, PodHealthSignal, SliceTaintSignal
from operators.model import DeviceID, Pod
from operators.tracker.views import DeviceView

SLICE_SOURCE = "ResourceSlice/"
# The CEL runtime's error for an attribute (or capacity) the device does not have.
MISSING = "no such key"


@dataclass(frozen=True, slots=True)
class _CelView:
    """A device view as the CEL environment reads it (`device.driver`, attributes, capacity)."""

    view: DeviceView

    @property
    def driver(self) -> str:
        return self.view.id.driver

    @property
    def attributes(self) -> Mapping[str, Any]:
        return self.view.attributes

    @property
    def capacity(self) -> Mapping[str, str]:
        return self.view.capacity

    @property
    def allow_multiple_allocations(self) -> bool:
        return self.view.allow_multiple_allocations


@dataclass
class Observation:
    """One policy's view of the cluster now."""

    selected: list[DeviceID] = field(default_factory=list)
    active: dict[DeviceID, tuple[str, datetime | None]] = field(default_factory=dict)
    siblings: dict[DeviceID, frozenset[DeviceID]] = field(default_factory=dict)
    unknown: set[DeviceID] = field(default_factory=set)  # a signal could not be evaluated
    problems: list[str] = field(default_factory=list)


def _slice_signal(signal: SliceTaintSignal, view: DeviceView) -> tuple[str, datetime | None] | None:
    for taint in view.taints:
        if not taint.source.startswith(SLICE_SOURCE) or taint.key != signal.key:
            continue
        if signal.values and taint.value not in signal.values:
            continue
        if signal.effects and taint.effect not in signal.effects:
            continue
        return (f"{taint.key}={taint.value}" if taint.value else taint.key), taint.time_added
    return None


def pod_health(pods: Iterable[Pod]) -> dict[DeviceID, set[str]]:
    """Each device's health as kubelets report it in the status of the pods using it
    (KEP-4680, parsed into `Pod.device_health`)."""
    out: dict[DeviceID, set[str]] = {}
    for pod in pods:
        for device, health in pod.device_health:
            out.setdefault(device, set()).add(health)
    return out


def observe(policy: HealthPolicy, views: Iterable[DeviceView],
            health: Mapping[DeviceID, set[str]] | None = None) -> Observation:
    """What POLICY sees in VIEWS (and in pods' HEALTH, when known)."""
    out = Observation()
    compiled = {}
    for i, signal in enumerate(policy.signals):
        if isinstance(signal, DeviceSignal):
            sel = compile_selector(signal.cel)
            if sel.compile_error is not None:
                out.problems.append(f"signals[{i}].device.cel: {sel.compile_error}")
            else:
                compiled[i] = sel
    counter_sets: dict[tuple[str, str, str], set[DeviceID]] = {}
    published = []
    for view in views:
        if not view.published or not policy.selects(view.id):
            continue
        published.append(view)
        out.selected.append(view.id)
        assert view.device is not None
        for use in view.device.consumes_counters:
            counter_sets.setdefault((view.id.driver, view.id.pool, use.counter_set), set()).add(view.id)
    for members in counter_sets.values():
        for d in members:
            out.siblings[d] = out.siblings.get(d, frozenset()) | frozenset(members - {d})
    for view in published:
        for i, signal in enumerate(policy.signals):
            found: tuple[str, datetime | None] | None = None
            if isinstance(signal, SliceTaintSignal):
                found = _slice_signal(signal, view)
            elif isinstance(signal, PodHealthSignal):
                states = (health or {}).get(view.id, set())
                bad = sorted(states & set(signal.health))
                found = (f"pod health {bad[0]}", None) if bad else None
            elif i in compiled:
                result = compiled[i].evaluate(_CelView(view))
                if result.error is not None and result.error.startswith(MISSING):
                    pass  # the device does not report that attribute: no signal from it
                elif result.error is not None:
                    out.problems.append(f"signals[{i}].device.cel on {'/'.join(view.id)}: {result.error}")
                    out.unknown.add(view.id)
                elif result.matched:
                    found = (f"device signal {i}", None)
            if found is not None:
                out.active.setdefault(view.id, found)
    return out
