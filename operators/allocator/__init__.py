"""The claim allocator's pure part: upstream's structured allocator over draco's view.

    inventory = inventory_from_tracker(tracker)        # or inventory_from_slices(slices)
    outcome = allocate(claims, NodeInfo("node-1", labels) | None, inventory,
                       classes_by_name, in_use_from_tracker(tracker), budget_s=10.0)
    outcome.status        "allocated" | "unsatisfiable" | "error" | "too-complex"
    outcome.allocations   one model.AllocationResult per claim; allocation_api(i) -> dict
    outcome.reason        one line for Events and the CLI; outcome.explain per request

Modules, bottom-up: inventory (pools in search order), requests (what claims ask,
validated as upstream), search (the backtracking), results (status.allocation),
explain (why not), allocate (the entry point). No kopf, no I/O.
"""

from operators.allocator.allocate import (
    DEFAULT_BUDGET_S,
    AllocationOutcome,
    Status,
    allocate,
    in_use_from_claims,
    in_use_from_tracker,
    shares_from_tracker,
)
from operators.allocator.capacity import Shares, shares_from_claims
from operators.allocator.explain import ClaimExplain, RequestExplain
from operators.allocator.inventory import (
    Candidate,
    Inventory,
    NodeInfo,
    PoolCandidates,
    SliceCandidates,
    inventory_from_slices,
    inventory_from_tracker,
)
from operators.allocator.requests import ALLOCATION_RESULTS_MAX_SIZE
from operators.allocator.results import allocation_to_api

__all__ = [
    "ALLOCATION_RESULTS_MAX_SIZE",
    "DEFAULT_BUDGET_S",
    "AllocationOutcome",
    "Candidate",
    "ClaimExplain",
    "Inventory",
    "NodeInfo",
    "PoolCandidates",
    "RequestExplain",
    "SliceCandidates",
    "Status",
    "allocate",
    "allocation_to_api",
    "in_use_from_claims",
    "in_use_from_tracker",
    "shares_from_claims",
    "shares_from_tracker",
    "Shares",
    "inventory_from_slices",
    "inventory_from_tracker",
]
