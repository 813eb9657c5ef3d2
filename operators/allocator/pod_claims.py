"""What a gated pod needs from the allocator, read from the tracker alone (no I/O).

A pod is the allocator's while it carries draco's gate, is not bound, not being deleted
and not finished. While another controller's gate is on it too (`model.gates`: any gate
but draco's and those draco may act beside) it waits for that controller (`GateWait`),
whatever its claims: that is how kube-scheduler treats gates. Its claims are those of `spec.resourceClaims`: a `resourceClaimName`,
or the claim the resource-claim controller generated from a template, which the pod
names in `status.resourceClaimStatuses` once it exists. Until every claim exists the
pod waits, silently (as kube-scheduler does: generation usually takes milliseconds,
and the narrowing controller reports pods that stay gated too long).

Each existing claim is one of:
- allocated and reserved for the pod: nothing to do;
- allocated, not reserved for the pod: the pod is appended to `status.reservedFor`
  (its allocation also constrains the node the other claims may use);
- not allocated: allocated together with the pod's other unallocated claims.
A claim being deleted, or allocated with `reservedFor` already full (256 entries,
upstream's limit), makes the pod unschedulable, as upstream reports it. A claim reserved
for the pod whose devices failed to bind (KEP-5007: a failure condition, or the binding
timeout) is to be released (`Release`) and allocated again.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime

from operators.model import NamespacedName, NodeSelectorRequirement, Pod, ResourceClaim
from operators.model.binding import BINDING_TIMEOUT_S, binding
from operators.model.gates import DRACO_GATE, other_gates, waiting_for
from operators.tracker import Tracker

GATE = DRACO_GATE
RESERVED_FOR_MAX = 256  # resource.k8s.io/v1 ResourceClaimReservedForMaxSize


@dataclass(frozen=True, slots=True)
class NotOurs:
    why: str


@dataclass(frozen=True, slots=True)
class Waiting:
    uid: str
    why: str


@dataclass(frozen=True, slots=True)
class GateWait(Waiting):
    """Another controller's gate is still on the pod: nothing is allocated, preempted or
    placed for it until only draco's gate (and those it may act beside) remain."""

    gates: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Done:
    """Every claim allocated and reserved for the pod: the narrowing controller's turn.
    `deadline`: when a device still waiting for its binding conditions times out."""

    uid: str
    deadline: datetime | None = None


@dataclass(frozen=True, slots=True)
class Release:
    """KEP-5007: claims reserved for the pod whose devices failed to bind (a failure
    condition, or the binding timeout): to be released, as kube-scheduler releases
    them, and allocated again."""

    uid: str
    claims: tuple[tuple[ResourceClaim, str], ...]  # (claim, why)


@dataclass(frozen=True, slots=True)
class Blocked:
    uid: str
    message: str


@dataclass(frozen=True, slots=True)
class Work:
    uid: str
    pod: Pod
    pending: tuple[ResourceClaim, ...]  # to allocate (all together)
    reserve: tuple[ResourceClaim, ...]  # allocated, to reserve for the pod
    allocated: tuple[ResourceClaim, ...]  # allocated already (reserved or not)
    generated: frozenset[str]  # names of the claims generated from templates


PodWork = NotOurs | Waiting | Done | Release | Blocked | Work


def pod_work(tracker: Tracker, key: NamespacedName, gate: str = GATE, now: datetime | None = None,
             binding_timeout: float = BINDING_TIMEOUT_S, beside: Collection[str] = ()) -> PodWork:
    """NOW (the wall clock; None: bindings never time out) judges binding conditions;
    BESIDE names the other gates draco may act beside."""
    pod = tracker.pod(key)
    if pod is None:
        return NotOurs("gone")
    why = pod.not_held(gate)
    if why is None and pod.terminal:
        # Unlike the narrowing controller: devices allocated to a pod that will not run
        # again would be kept from every other pod.
        why = "finished"
    if why is not None:
        return NotOurs(why)
    uid = pod.meta.uid
    others = other_gates(pod.scheduling_gates, gate, beside)
    if others:
        return GateWait(uid, waiting_for(others), others)
    pending: list[ResourceClaim] = []
    reserve: list[ResourceClaim] = []
    allocated: list[ResourceClaim] = []
    generated: set[str] = set()
    seen: set[str] = set()
    failed: list[tuple[ResourceClaim, str]] = []
    deadline: datetime | None = None
    for pc in pod.resource_claims:
        name = pod.claim_name(pc)
        if name is None:
            return Waiting(uid, f"the claim for {pc.name!r} is not generated from template "
                                f"{pc.resource_claim_template_name} yet")
        if not pc.resource_claim_name:
            generated.add(name)
        if name in seen:
            continue
        seen.add(name)
        claim = tracker.claim(NamespacedName(key.namespace, name))
        if claim is None:
            return Waiting(uid, f"claim {name} does not exist yet")
        if claim.meta.deleting:
            return Blocked(uid, f"claim {name} is being deleted")
        if claim.allocation is None:
            pending.append(claim)
            continue
        allocated.append(claim)
        if claim.reserved_for_pod(uid, pod.pod_group):
            state = binding(claim, now, binding_timeout)
            if state.failed:
                failed.append((claim, state.failed))
            elif state.deadline is not None and (deadline is None or state.deadline < deadline):
                deadline = state.deadline
            continue
        if len(claim.reserved_for) >= RESERVED_FOR_MAX:
            return Blocked(uid, f"claim {name} is already reserved for {RESERVED_FOR_MAX} "
                                "consumers, the most the API allows")
        reserve.append(claim)
    if failed:
        return Release(uid, tuple(failed))
    if not pending and not reserve:
        return Done(uid, deadline)
    return Work(uid, pod, tuple(pending), tuple(reserve), tuple(allocated), frozenset(generated))


def node_misfit(pod: Pod, name: str, labels: Mapping[str, str] | None,
                allocated: tuple[ResourceClaim, ...]) -> str | None:
    """Why the pod may not run on the node, if it may not: "selector" (its nodeSelector
    or required node affinity, kube-scheduler's NodeAffinity filter) or "claim" (the
    node selector of one of its allocated claims, the DynamicResources filter), checked
    in that order as kube-scheduler runs those filters. Taints and cordons are
    `nodes.candidate_nodes`'s."""
    lab = labels or {}
    if any(lab.get(k) != v for k, v in pod.node_selector.items()):
        return "selector"
    if pod.required_node_affinity is not None and not pod.required_node_affinity.matches(name, lab):
        return "selector"
    for claim in allocated:
        sel = claim.allocation.node_selector if claim.allocation is not None else None
        if sel is not None and not sel.matches(name, lab):
            return "claim"
    return None


def _requirement_text(r: NodeSelectorRequirement) -> str:
    if r.operator in ("Exists", "DoesNotExist"):
        return f"{r.key} {r.operator}"
    return f"{r.key} {r.operator} ({','.join(r.values)})"


def node_choice(pod: Pod, limit: int = 240) -> str | None:
    """The node choice the pod carries (its nodeSelector, its required node affinity), in
    words for a condition or an Event; None when it carries none. Whoever set it (a user,
    Kueue's topology ungater) chose those nodes: draco's devices must be found there."""
    parts = []
    if pod.node_selector:
        parts.append("nodeSelector " + ",".join(f"{k}={v}" for k, v in sorted(pod.node_selector.items())))
    if pod.required_node_affinity is not None and pod.required_node_affinity.terms:
        terms = [" and ".join(_requirement_text(r) for r in (*t.match_expressions, *t.match_fields))
                 or "(empty term)" for t in pod.required_node_affinity.terms]
        parts.append("required node affinity " + " or ".join(terms))
    if not parts:
        return None
    text = "; ".join(parts)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def node_fits(pod: Pod, name: str, labels: Mapping[str, str] | None,
              allocated: tuple[ResourceClaim, ...]) -> bool:
    """Whether the pod may run on the node: its nodeSelector and required node affinity,
    and every existing allocation's node selector (what kube-scheduler checks too)."""
    return node_misfit(pod, name, labels, allocated) is None


__all__ = ["GATE", "RESERVED_FOR_MAX", "Blocked", "Done", "GateWait", "NotOurs", "PodWork", "Release", "Waiting", "Work",
           "node_choice", "node_fits", "node_misfit", "pod_work"]
