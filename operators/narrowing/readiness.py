"""Is a gated pod ready to be narrowed? Read from the tracker alone, no I/O.

A pod is draco's to narrow while it carries draco's gate, is not bound and not being
deleted. It is ready once every claim it uses (named in `spec.resourceClaims`, generated
from a template and named in `status.resourceClaimStatuses`, or its extended-resource
claim) exists, is allocated and lists the pod's UID in `status.reservedFor` — whoever
allocated and reserved it (draco's allocator or any other) — and, for devices allocated
with binding conditions (KEP-5007), the driver reports every one True in the claim's
`status.devices`. Until then it waits, and `Waiting.missing` says for each claim what is
lacking, in words an Event can carry. A binding failure condition, or binding conditions
still open `binding_timeout` seconds after `allocationTimestamp`, is `BindingFailed`.

The narrowing inputs come from the allocations: each claim's `nodeSelector` (None: the
devices are reachable from every node) in the pod's claim order, and the one node they
pin, if any, through a single-term `matchFields metadata.name In [node]` (what upstream
writes for node-local devices), used only when the exact narrowing needs a chosen node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from operators.model import NamespacedName, Pod, ResourceClaim
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
    binding_deadline: datetime | None = None  # when the first of those times out

    @property
    def message(self) -> str:
        return "; ".join(self.missing)


@dataclass(frozen=True, slots=True)
class BindingFailed:
    """A claim's device reported a binding failure condition, or its binding conditions
    did not all turn True within the binding timeout (KEP-5007): the allocation is to be
    released and the pod decided again, as kube-scheduler does."""

    uid: str
    claims: tuple[tuple[str, str], ...]  # (claim name, why)

    @property
    def message(self) -> str:
        return "; ".join(f"claim {c}: {why}" for c, why in self.claims)


@dataclass(frozen=True, slots=True)
class NotOurs:
    """Gone, not gated by draco, bound or being deleted: left alone."""

    why: str


Readiness = Ready | Waiting | BindingFailed | NotOurs

# kube-scheduler's DynamicResources default bindingTimeout (plugin args; 1.36+).
BINDING_TIMEOUT_S = 600.0


def readiness(tracker: Tracker, key: NamespacedName, gate: str = DRACO_GATE,
              now: datetime | None = None, binding_timeout: float = BINDING_TIMEOUT_S) -> Readiness:
    """NOW (None: binding conditions never time out) is the wall clock."""
    pod = tracker.pod(key)
    if pod is None:
        return NotOurs("gone")
    why = pod.not_held(gate)  # a finished pod still counts here, unlike in the allocator
    if why is not None:
        return NotOurs(why)
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
    binding: list[str] = []
    failed: list[tuple[str, str]] = []
    deadline: datetime | None = None
    for name in names:
        claim = tracker.claim(NamespacedName(pod.namespace, name))
        if claim is None:
            missing.append(f"claim {name} does not exist")
            continue
        if claim.allocation is None:
            missing.append(f"claim {name} is not allocated")
            continue
        if not claim.reserved_for_pod(pod.meta.uid):
            missing.append(f"claim {name} is allocated but not reserved for this pod")
            continue
        waits, why, timeout_at = _binding(claim, now, binding_timeout)
        if why:
            failed.append((name, why))
            continue
        if waits:
            binding.extend(waits)
            missing.append(f"claim {name}: " + "; ".join(waits))
            if timeout_at is not None and (deadline is None or timeout_at < deadline):
                deadline = timeout_at
            continue
        ns = claim.allocation.node_selector
        selectors.append(None if ns is None else ns.to_api())
    if failed:
        return BindingFailed(pod.meta.uid, tuple(failed))
    if missing:
        return Waiting(pod.meta.uid, tuple(missing), tuple(binding), deadline)
    return Ready(pod.meta.uid, tuple(names), tuple(selectors), pinned_node(selectors))


def _binding(claim: ResourceClaim, now: datetime | None, timeout: float,
             ) -> tuple[list[str], str, datetime | None]:
    """KEP-5007, as kube-scheduler's PreBind judges a claim: per result with binding
    conditions, in result order, the device's status entry (found by driver, pool and
    device, whatever the share) must exist, show no failure condition True and every
    binding condition True. Returns what the devices wait for, why the claim failed
    ("" if not), and when its binding times out."""
    assert claim.allocation is not None
    waits: list[str] = []
    pending = False
    for r in claim.allocation.results:
        if not r.binding_conditions:
            continue
        status = claim.device_status(r.driver, r.pool, r.device)
        if status is not None:
            bad = next((c for c in r.binding_failure_conditions if status.condition(c) == "True"), None)
            if bad is not None:
                return [], f"device {r.id} reports binding failure condition {bad}", None
            open_ = [c for c in r.binding_conditions if status.condition(c) != "True"]
        else:
            open_ = list(r.binding_conditions)
        if open_:
            pending = True
            waits.append(f"device {r.id} waits for binding condition{'s' if len(open_) > 1 else ''} "
                         f"{', '.join(open_)}")
    stamp = claim.allocation.allocation_timestamp
    timeout_at = stamp + timedelta(seconds=timeout) if pending and stamp is not None else None
    if timeout_at is not None and now is not None and now > timeout_at:
        return [], (f"binding conditions not met within {timeout:g}s of the allocation "
                    f"({'; '.join(waits)})"), None
    return waits, "", timeout_at


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


__all__ = ["BINDING_TIMEOUT_S", "BindingFailed", "NotOurs", "Readiness", "Ready", "Waiting",
           "pinned_node", "readiness"]
