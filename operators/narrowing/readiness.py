"""Is a gated pod ready to be narrowed? Read from the tracker alone, no I/O.

A pod is draco's to narrow while it carries draco's gate, is not bound and not being
deleted, and no other controller's gate is on it (`model.gates`: every gate but draco's
and those draco may act beside): narrowing while, say, Kueue's topology gate is still on
could pin the pod to a node Kueue's ungater then contradicts with its nodeSelector. Such
a pod is left alone (`NotOurs`); the allocator tells it what it waits for. It is ready once every claim it uses (named in `spec.resourceClaims`, generated
from a template and named in `status.resourceClaimStatuses`, or its extended-resource
claim) exists, is allocated and lists the pod's UID in `status.reservedFor` — whoever
allocated and reserved it (draco's allocator or any other) — and, for devices allocated
with binding conditions (KEP-5007), the driver reports every one True in the claim's
`status.devices`. Until then it waits, and `Waiting.missing` says for each claim what is
lacking, in words an Event can carry. A failed binding (`operators.model.binding`) is
waited out too: the allocator releases such a claim and allocates it again.

The narrowing inputs come from the allocations: each claim's `nodeSelector` (None: the
devices are reachable from every node) in the pod's claim order, and the one node they
pin, if any, through a single-term `matchFields metadata.name In [node]` (what upstream
writes for node-local devices), used only when the exact narrowing needs a chosen node.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from operators.model import NamespacedName, Pod
from operators.model.binding import binding
from operators.model.gates import other_gates, waiting_for
from operators.narrowing.narrow import DRACO_GATE
from operators.tracker import Tracker


@dataclass(frozen=True, slots=True)
class Ready:
    uid: str
    claims: tuple[str, ...]
    selectors: tuple[Mapping[str, Any] | None, ...]
    pinned_node: str | None


@dataclass(frozen=True, slots=True)
class Waiting:
    uid: str
    missing: tuple[str, ...]  # one sentence per claim that is not ready
    binding: tuple[str, ...] = ()  # of those, the devices waiting for binding conditions

    @property
    def message(self) -> str:
        return "; ".join(self.missing)


@dataclass(frozen=True, slots=True)
class NotOurs:
    """Gone, not gated by draco, bound or being deleted: left alone."""

    why: str


Readiness = Ready | Waiting | NotOurs


def readiness(tracker: Tracker, key: NamespacedName, gate: str = DRACO_GATE,
              beside: Collection[str] = ()) -> Readiness:
    """BESIDE names the other gates draco may act beside."""
    pod = tracker.pod(key)
    if pod is None:
        return NotOurs("gone")
    why = pod.not_held(gate)  # a finished pod still counts here, unlike in the allocator
    if why is not None:
        return NotOurs(why)
    others = other_gates(pod.scheduling_gates, gate, beside)
    if others:
        return NotOurs(waiting_for(others))
    missing: list[str] = []
    names: list[str] = []
    for pc in pod.resource_claims:
        name = pod.claim_name(pc)
        if name is None:
            missing.append(f"the claim for entry {pc.name!r} (template "
                           f"{pc.resource_claim_template_name}) is not created yet")
        else:
            names.append(name)
    for name in _extra_claims(pod, names):
        names.append(name)
    selectors: list[Mapping[str, Any] | None] = []
    binding_waits: list[str] = []
    for name in names:
        claim = tracker.claim(NamespacedName(pod.namespace, name))
        if claim is None:
            missing.append(f"claim {name} does not exist")
            continue
        if claim.allocation is None:
            missing.append(f"claim {name} is not allocated")
            continue
        if not claim.reserved_for_pod(pod.meta.uid, pod.pod_group):
            missing.append(f"claim {name} is allocated but not reserved for this pod")
            continue
        state = binding(claim, None)  # the allocator releases a failed or timed-out one
        if state.failed:
            missing.append(f"claim {name}: {state.failed}; draco's allocator releases it")
            continue
        if state.waits:
            binding_waits.extend(state.waits)
            missing.append(f"claim {name}: " + "; ".join(state.waits))
            continue
        ns = claim.allocation.node_selector
        selectors.append(None if ns is None else ns.to_api())
    if missing:
        return Waiting(pod.meta.uid, tuple(missing), tuple(binding_waits))
    return Ready(pod.meta.uid, tuple(names), tuple(selectors), pinned_node(selectors))


def _extra_claims(pod: Pod, known: Sequence[str]) -> list[str]:
    """Claims beyond spec.resourceClaims (the extended-resource claim), not yet listed."""
    return [n for n in pod.claim_names() if n not in known]


def pinned_node(selectors: Sequence[Mapping[str, Any] | None]) -> str | None:
    """The first node an allocation pins by name (one term, `metadata.name In [node]`)."""
    for sel in selectors:
        terms = (sel or {}).get("nodeSelectorTerms") or []
        if len(terms) != 1:
            continue
        for req in terms[0].get("matchFields") or []:
            values = req.get("values") or []
            if req.get("key") == "metadata.name" and req.get("operator") == "In" and len(values) == 1:
                return str(values[0])
    return None


__all__ = ["NotOurs", "Readiness", "Ready", "Waiting", "pinned_node", "readiness"]
