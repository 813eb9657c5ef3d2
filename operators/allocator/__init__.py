"""The structured allocator: upstream's allocator over draco's view. Claims, a node and
the devices in; an outcome out. Pure: no controller, no kopf, no I/O.

    inventory = inventory_from_tracker(tracker)        # or inventory_from_slices(slices)
    outcome = allocate(claims, NodeInfo("node-1", labels) | None, inventory,
                       classes_by_name, in_use_from_tracker(tracker), budget_s=10.0)
    outcome.status        "allocated" | "unsatisfiable" | "error" | "too-complex"
    outcome.allocations   one model.AllocationResult per claim; allocation_api(i) -> dict
    outcome.reason        one line for Events and the CLI; outcome.explain per request

Modules, bottom-up: inventory (pools in search order), requests (what claims ask,
validated as upstream), counters and capacity (KEP-4815 counters, KEP-5075 shares),
search (the backtracking), results (status.allocation), explain (why not), features
(feature gates), allocate (the entry point), scoring and nodes (KEP-4816 node choice),
pod_claims (what a gated pod needs, read from the tracker) and reserved (in use plus set
aside). Gang placement (`operators.gangs`), victim selection (`operators.preemption`)
and the controller (`operators.allocator_controller`) build on it; it imports none of
them.
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
