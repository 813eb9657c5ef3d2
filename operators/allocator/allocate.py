"""The pure entry point: claims + node + devices in, an outcome out (nothing written).

Outcomes are values, never exceptions: `allocated`, `unsatisfiable` (no solution;
`explain` says why per request), `error` (upstream would return an error: a CEL
runtime or compile error, a missing DeviceClass, `All` over an incomplete pool, more
than 32 results) and `too-complex` (the time budget ran out; nothing is allocated).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from operators.allocator.capacity import NO_SHARES, Shares
from operators.allocator.explain import ClaimExplain, explain, reason_from
from operators.allocator.features import DEFAULT_GATES, FeatureGates, check_claims, gated_inventory
from operators.allocator.inventory import Inventory, NodeInfo
from operators.allocator.requests import AllocationError, NodeFailure
from operators.allocator.results import allocation_to_api, build_allocation
from operators.allocator.search import Search, TooComplex
from operators.model import AllocationResult, DeviceClass, DeviceID, ResourceClaim
from operators.tracker import Tracker

Status = Literal["allocated", "unsatisfiable", "error", "too-complex"]
DEFAULT_BUDGET_S = 10.0


@dataclass(frozen=True, slots=True)
class AllocationOutcome:
    """`allocations[i]` belongs to `claims[i]` (empty unless allocated)."""

    status: Status
    allocations: tuple[AllocationResult, ...] = ()
    reason: str | None = None
    explain: tuple[ClaimExplain, ...] = ()
    steps: int = 0
    # The error is only that invalid pools target this node (nothing else fits), or from
    # 1.38 that an `All` request met a pool being updated or invalid here: upstream
    # tries the other nodes and reports it only when no node fits.
    invalid_pools: bool = False

    @property
    def allocated(self) -> bool:
        return self.status == "allocated"

    def allocation_api(self, index: int) -> dict[str, Any]:
        """`status.allocation` for claim `index`, as the API writes it."""
        return allocation_to_api(self.allocations[index])


def in_use_from_tracker(tracker: Tracker) -> frozenset[DeviceID]:
    """Devices other claims hold whole; admin-access allocations hold nothing, shares
    (KEP-5075) hold capacity, not the device (upstream)."""
    return frozenset(i for i in tracker.allocated_device_ids()
                     if any(not a.admin_access and not a.share_id for a in tracker.allocations(i)))


def shares_from_tracker(tracker: Tracker, devices: Iterable[DeviceID] | None = None) -> Shares:
    """What allocated claims' shares consume, per device (of DEVICES, or all)."""
    out = Shares()
    for i in tracker.allocated_device_ids() if devices is None else devices:
        for a in tracker.allocations(i):
            if a.share_id and not a.admin_access:
                out.add(i, a.consumed)
    return out


def in_use_from_claims(claims: Iterable[ResourceClaim]) -> frozenset[DeviceID]:
    """The same from allocated claims alone (offline use)."""
    return frozenset(
        r.id for c in claims if c.allocation is not None
        for r in c.allocation.results if not r.admin_access and not r.share_id)


def allocate(
    claims: Sequence[ResourceClaim],
    node: NodeInfo | None,
    inventory: Inventory,
    classes: Mapping[str, DeviceClass],
    in_use: Collection[DeviceID],
    budget_s: float = DEFAULT_BUDGET_S,
    *,
    with_explain: bool = True,
    shares: Shares = NO_SHARES,
    features: FeatureGates = DEFAULT_GATES,
) -> AllocationOutcome:
    """Allocate all `claims` (one pod's) together on `node`, all or nothing.

    `node` None: only devices available on all nodes qualify (upstream's nil node).
    `in_use`: devices allocated to other claims (see `in_use_from_tracker`);
    `shares`: what other claims' shares of multi-allocatable devices consume;
    `features`: the feature gates (a claim needing one that is off is an error).
    """
    deadline = time.monotonic() + budget_s
    cls = dict(classes)
    search: Search | None = None
    inventory = gated_inventory(inventory, features)
    try:
        check_claims(claims, features)
        search = Search(claims, node, inventory, cls, in_use, deadline, shares,
                        fractional_ranges=features.fractional_capacity_range,
                        semantics=features.semantics)
        found = search.run()
    except TooComplex:
        steps = search.steps if search is not None else 0
        return AllocationOutcome(
            "too-complex", reason=f"allocation too complex: no result within {budget_s:g}s "
            f"({steps} steps)", steps=steps)
    except AllocationError as e:
        why = explain(claims, node, inventory, cls, in_use) if with_explain else ()
        return AllocationOutcome("error", reason=str(e), explain=why,
                                 steps=search.steps if search is not None else 0,
                                 invalid_pools=isinstance(e, NodeFailure))
    except RecursionError:
        return AllocationOutcome("too-complex", reason="allocation too complex: search too deep")
    if not found:
        invalid = [p.problem for p, t in search.pools if not p.incomplete and p.unusable(t)]
        why = explain(claims, node, inventory, cls, in_use) if with_explain else ()
        if invalid:  # they might have held a fit: an error, as upstream reports it
            return AllocationOutcome(
                "error", reason="invalid resource pools were encountered: " + "; ".join(invalid),
                explain=why, steps=search.steps, invalid_pools=True)
        return AllocationOutcome("unsatisfiable", reason=reason_from(why) if why else
                                 "cannot allocate all claims", explain=why, steps=search.steps)
    allocations = []
    try:
        for ci, claim in enumerate(claims):
            used = [alts[search.chosen.get((ci, ri), 0)] if alts[0].sub_index >= 0 else alts[0]
                    for ri, alts in enumerate(search.plan[ci])]
            allocations.append(build_allocation(claim, search.picks[ci], used,
                                                node.name if node is not None else None))
    except AllocationError as e:
        return AllocationOutcome("error", reason=str(e), steps=search.steps)
    return AllocationOutcome("allocated", tuple(allocations), steps=search.steps)
