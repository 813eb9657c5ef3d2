"""Why a claim could not be allocated, per request: the funnel a user reads when a pod
stays pending.

Each request (each subrequest of a `firstAvailable` list) is examined on its own, over
the devices reachable from the node, with the search's checks in the search's order:
devices of incomplete or invalid pools, devices with fields draco does not model
(naming them), devices in use (before any CEL), the class's
selectors, the request's selectors, partitions whose shared counters the allocated
devices used up (naming the counter), untolerated taints, and devices lacking an
attribute a `matchAttribute` constraint of the request needs. What survives is
`available`; when every request has enough, the failure lies in how the requests
compete for devices or in constraint values that disagree.

When no node fits, `no_node_fits` says first how the candidate nodes fell away (none
to try; nodes kube-scheduler would not put the pod on: cordoned or with a taint it does
not tolerate, named, then those outside the pod's node selector or affinity or an allocated
claim's node selector, counted; the whole cluster short of devices; nodes reaching no devices or
too few; nodes searched without a fit), then what the explain over the whole cluster
shows.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from operators.allocator.counters import Ledger
from operators.allocator.inventory import Inventory, NodeInfo, placement_matches
from operators.allocator.requests import (
    AllocationError,
    Wanted,
    extra_tolerations,
    wanted_for_claim,
)
from operators.allocator.search import selectors_match, taint_blocks
from operators.model import DeviceClass, DeviceID, ResourceClaim
from operators.model.nodes import NodeTaint

MAX_CEL_ERRORS = 5
MAX_NAMED = 3  # exhausted counters named per request
NAMED_NODES = 3  # refused nodes named in a reason; the rest are counted


@dataclass(frozen=True, slots=True)
class RequestExplain:
    request: str  # `main` or `main/sub`
    device_class: str
    needed: int | None  # None: All mode
    devices: int = 0  # reachable from the node
    incomplete_pool: int = 0
    in_use: int = 0
    class_matched: int = 0
    selectors_kept: int = 0
    tainted: int = 0
    constraint_dropped: int = 0
    available: int = 0
    cel_errors: tuple[str, ...] = ()
    unsupported: int = 0  # devices with fields draco does not model
    unsupported_fields: tuple[str, ...] = ()
    counters_exhausted: int = 0  # partitions whose counters are used up
    exhausted_counters: tuple[str, ...] = ()  # `pool set/counter`, first few

    @property
    def short(self) -> bool:
        """Too few devices for this request alone."""
        return self.available == 0 if self.needed is None else self.available < self.needed

    def summary(self) -> str:
        need = "all" if self.needed is None else str(self.needed)
        parts = [f"request {self.request}: {self.available} available, {need} needed"]
        parts.append(f"class {self.device_class} matched {self.class_matched} of {self.devices}")
        parts.append(f"selectors kept {self.selectors_kept}")
        for n, what in ((self.tainted, "tainted"), (self.in_use, "in use"),
                        (self.incomplete_pool, "in incomplete pools"),
                        (self.constraint_dropped, "lacking a constraint attribute")):
            if n:
                parts.append(f"{n} {what}")
        if self.counters_exhausted:
            parts.append(f"{self.counters_exhausted} with exhausted counters "
                         f"({', '.join(self.exhausted_counters)})")
        if self.unsupported:
            parts.append(f"{self.unsupported} using fields draco does not support "
                         f"({', '.join(self.unsupported_fields)})")
        if self.cel_errors:
            parts.append(f"CEL error: {self.cel_errors[0]}")
        return "; ".join(parts)

    def to_api(self) -> dict[str, Any]:
        return {
            "request": self.request, "deviceClass": self.device_class,
            "needed": "All" if self.needed is None else self.needed,
            "devices": self.devices, "incompletePool": self.incomplete_pool,
            "inUse": self.in_use, "classMatched": self.class_matched,
            "selectorsKept": self.selectors_kept, "tainted": self.tainted,
            "constraintDropped": self.constraint_dropped, "available": self.available,
            "celErrors": list(self.cel_errors),
            "countersExhausted": self.counters_exhausted,
            "exhaustedCounters": list(self.exhausted_counters),
            "unsupported": self.unsupported, "unsupportedFields": list(self.unsupported_fields),
        }


@dataclass(frozen=True, slots=True)
class ClaimExplain:
    claim: str  # ns/name
    requests: tuple[RequestExplain, ...] = ()
    problems: tuple[str, ...] = ()  # unreadable tolerations annotation, missing class

    def to_api(self) -> dict[str, Any]:
        return {"claim": self.claim, "requests": [r.to_api() for r in self.requests],
                "problems": list(self.problems)}


def _explain_one(w: Wanted, claim: ResourceClaim, inventory: Inventory,
                 node: NodeInfo | None, in_use: Collection[DeviceID]) -> RequestExplain:
    counts = dict.fromkeys(("devices", "incomplete", "in_use", "class", "kept", "tainted",
                            "constraint", "available", "unsupported", "counters"), 0)
    errors: dict[str, None] = {}
    unsupported_fields: dict[str, None] = {}
    exhausted: dict[str, None] = {}
    ledger = Ledger(inventory, in_use)
    needs = [a for c in claim.constraints
             if (a := c.match_attribute or c.distinct_attribute)
             and (not c.requests or w.base in c.requests or (w.sub and w.name in c.requests))]
    label = f"{claim.namespace}/{claim.name}"
    for pool in inventory:
        targeting = pool.targeting(node)
        unusable = pool.unusable(targeting)
        for sl in targeting:
            for d in sl.devices:
                if sl.per_device and not placement_matches(d.placement, node):
                    continue
                counts["devices"] += 1
                if unusable:
                    counts["incomplete"] += 1
                    continue
                if d.unsupported:
                    counts["unsupported"] += 1
                    unsupported_fields.update(dict.fromkeys(d.unsupported))
                    continue
                if not w.admin_access and d.id in in_use:
                    counts["in_use"] += 1
                    continue
                try:
                    if not selectors_match(w.device_class.selectors, d,
                                           f"class {w.device_class.name}"):
                        continue
                    counts["class"] += 1
                    if not selectors_match(w.spec.selectors, d, f"claim {label}"):
                        continue
                except AllocationError as e:
                    if len(errors) < MAX_CEL_ERRORS:
                        errors[str(e)] = None
                    continue
                counts["kept"] += 1
                over = ledger.take(d)
                if over is not None:
                    counts["counters"] += 1
                    if len(exhausted) < MAX_NAMED:
                        exhausted[f"{pool.id} {over}"] = None
                    continue
                ledger.release(d)
                if taint_blocks(d.taints, w.tolerations):
                    counts["tainted"] += 1
                    continue
                if any(a not in d.attributes for a in needs):
                    counts["constraint"] += 1
                    continue
                counts["available"] += 1
    return RequestExplain(
        request=w.name, device_class=w.device_class.name,
        needed=None if w.all_mode else w.count, devices=counts["devices"],
        incomplete_pool=counts["incomplete"], in_use=counts["in_use"],
        class_matched=counts["class"], selectors_kept=counts["kept"],
        tainted=counts["tainted"], constraint_dropped=counts["constraint"],
        available=counts["available"], cel_errors=tuple(errors),
        unsupported=counts["unsupported"], unsupported_fields=tuple(unsupported_fields),
        counters_exhausted=counts["counters"], exhausted_counters=tuple(exhausted))


def explain(claims: Sequence[ResourceClaim], node: NodeInfo | None, inventory: Inventory,
            classes: Mapping[str, DeviceClass],
            in_use: Collection[DeviceID]) -> tuple[ClaimExplain, ...]:
    out = []
    for ci, claim in enumerate(claims):
        label = f"{claim.namespace}/{claim.name}"
        problems: list[str] = []
        _, tol_problem = extra_tolerations(claim)
        if tol_problem:
            problems.append(f"tolerations annotation ignored: {tol_problem}")
        try:
            plan = wanted_for_claim(ci, claim, classes)
        except AllocationError as e:
            out.append(ClaimExplain(label, (), (*problems, str(e))))
            continue
        reqs = tuple(_explain_one(w, claim, inventory, node, in_use)
                     for alts in plan for w in alts)
        out.append(ClaimExplain(label, reqs, tuple(problems)))
    return tuple(out)


def _first_shortfall(explained: Sequence[ClaimExplain]) -> str | None:
    """The first claim problem or request that cannot be met even on its own."""
    for ce in explained:
        for p in ce.problems:
            return f"claim {ce.claim}: {p}"
        by_parent: dict[str, list[RequestExplain]] = {}
        for r in ce.requests:
            by_parent.setdefault(r.request.partition("/")[0], []).append(r)
        for alts in by_parent.values():
            if all(r.short for r in alts):
                return f"claim {ce.claim}: cannot allocate: " + alts[0].summary()
    return None


def reason_from(explained: Sequence[ClaimExplain]) -> str:
    """One sentence for an Event or a CLI column: the first request that cannot be met,
    or that the requests can each be met but not together."""
    return _first_shortfall(explained) or (
        "cannot allocate: each request has enough matching devices on its own, but "
        "not together (devices shared between requests or claims, or constraint "
        "values that disagree)")


@dataclass(frozen=True, slots=True)
class RefusedNode:
    """A node kube-scheduler would never put the pod on, so no device there is allocated
    for it: cordoned or with an untolerated taint (NodeUnschedulable, TaintToleration),
    outside the pod's nodeSelector or required node affinity (NodeAffinity), or outside
    the node selector of one of the pod's allocated claims (DynamicResources)."""

    name: str
    taint: NodeTaint | None = None  # the untolerated taint; None (and not excluded): cordoned
    excluded: str = ""  # "selector": the pod's node selector or affinity; "claim": an allocated claim's
    pod: str = ""  # NS/NAME of the pod that refused it, when several pods share the claims

    @property
    def cordoned(self) -> bool:
        return self.taint is None and not self.excluded


@dataclass(frozen=True, slots=True)
class NodeFunnel:
    """How the candidate nodes fell away in a search that found no node."""

    nodes: int  # the candidate nodes (those the pod may use), refused ones included
    cluster_short: bool = False  # all devices together are too few: no node was looked at
    unreached: int = 0  # nodes that reach none of the devices
    too_few: int = 0  # nodes reaching too few free, matching, tolerated devices for a request
    searched: int = 0  # nodes searched in full without a fit
    refused: tuple[RefusedNode, ...] = ()  # cordoned, or with a taint the pod does not tolerate

    def summary(self) -> str:
        if self.nodes == 0:
            return ("no node to try (none known, or none that the pod's node selector, "
                    "node affinity and already allocated claims allow)")
        nodes = _counted(self.nodes, "node", "nodes")
        refused = self._refused()
        if self.cluster_short:
            tail = "the whole cluster has too few devices for a request"
            return f"no node fits ({nodes}: {', '.join(refused)}; {tail})" if refused \
                else f"no node fits ({nodes}; {tail})"
        parts = refused + [_counted(n, singular, plural) for n, singular, plural in (
            (self.unreached, "reaches no devices", "reach no devices"),
            (self.too_few, "reaches too few free, matching, tolerated devices for a request",
             "reach too few free, matching, tolerated devices for a request"),
            (self.searched, "searched without a fit", "searched without a fit")) if n]
        return f"no node fits ({nodes}: {', '.join(parts)})" if parts else f"no node fits ({nodes})"

    def _refused(self) -> list[str]:
        """The nodes kube-scheduler's filters rule out, in the words `kubectl` uses."""
        parts = []
        tainted = [r for r in self.refused if r.taint is not None]
        if tainted:
            shown = ", ".join(f"{r.taint} on {r.name}" for r in tainted[:NAMED_NODES])
            more = f", and {len(tainted) - NAMED_NODES} more" if len(tainted) > NAMED_NODES else ""
            parts.append(_counted(len(tainted), "has a taint the pod does not tolerate",
                                  "have a taint the pod does not tolerate") + f" ({shown}{more})")
        cordoned = [r.name for r in self.refused if r.cordoned]
        if cordoned:
            shown = ", ".join(cordoned[:NAMED_NODES])
            more = f", and {len(cordoned) - NAMED_NODES} more" if len(cordoned) > NAMED_NODES else ""
            parts.append(_counted(len(cordoned), "is cordoned", "are cordoned")
                         + f" (spec.unschedulable: {shown}{more})")
        for kind, words in (("selector", "excluded by {} node selector or affinity"),
                            ("claim", "excluded by the node selector of {} allocated claims")):
            by_pod: dict[str, int] = {}
            for r in self.refused:
                if r.excluded == kind:
                    by_pod[r.pod] = by_pod.get(r.pod, 0) + 1
            for pod, n in by_pod.items():
                parts.append(f"{n} " + words.format(f"pod {pod}'s" if pod else "the pod's"))
        return parts


def _counted(n: int, singular: str, plural: str) -> str:
    return f"{n} {singular if n == 1 else plural}"


def no_node_fits(funnel: NodeFunnel, explained: Sequence[ClaimExplain] | None) -> str:
    """The reason when no candidate node fits; `explained` is the explain over the whole
    cluster (None when the caller skipped it)."""
    where = funnel.summary()
    if explained is None:
        return f"cannot allocate: {where}"
    shortfall = _first_shortfall(explained)
    if shortfall is not None:
        return f"{where}: {shortfall}"
    if funnel.searched:  # what the searches met: competition or constraints
        return f"{where}: {reason_from(explained)}"
    if funnel.too_few:
        which = "no single node that takes the pod" if funnel.refused else "no single node"
        return (f"{where}; the cluster as a whole has enough devices for every request, "
                f"but {which} reaches them")
    return where
