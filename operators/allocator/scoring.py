"""KEP-4816 node scoring, as kube-scheduler's DynamicResources plugin scores.

Raw score of a node: for every `firstAvailable` request of the pod's claims, the
subrequest the node's allocation chose at position `i` (0-based) earns
`8 - i` (8 being the API's limit on subrequests); `exactly` requests earn nothing.
Normalization is upstream's default one, not the KEP's prose: the highest raw score
among the feasible nodes becomes 100 and every other score `100 * raw // highest`
(integer division, so distinct raw scores may tie); when the highest is 0 every
node keeps 0.

Choosing: the highest normalized score wins; ties go to the candidate tried first.
kube-scheduler breaks ties at random; draco is deterministic instead, trying "no
node" first (an allocation that holds on every node) and then nodes by name, so that
two runs over the same objects always agree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

from operators.model import AllocationResult, ResourceClaim

# resource.k8s.io/v1 FirstAvailableDeviceRequestMaxSize.
FIRST_AVAILABLE_MAX_SIZE = 8
MAX_NODE_SCORE = 100

K = TypeVar("K")


def claim_score(claim: ResourceClaim, allocation: AllocationResult) -> int:
    """The claim's share of the raw score: chosen subrequests by rank."""
    chosen = {r.request for r in allocation.results if "/" in r.request}
    score = 0
    for request in claim.requests:
        for rank, sub in enumerate(request.first_available):
            if f"{request.name}/{sub.name}" in chosen:
                score += FIRST_AVAILABLE_MAX_SIZE - rank
    return score


def raw_score(claims: Sequence[ResourceClaim], allocations: Sequence[AllocationResult]) -> int:
    return sum(claim_score(c, a) for c, a in zip(claims, allocations, strict=True))


def rank_bound(ranks: Sequence[int | None]) -> int:
    """The best raw score reachable when each `firstAvailable` request can at best use
    the subrequest of the given rank (None: none of them)."""
    return sum(FIRST_AVAILABLE_MAX_SIZE - r for r in ranks if r is not None)


def normalize(scores: Mapping[K, int]) -> dict[K, int]:
    """Upstream's default normalization to [0, 100] (not reversed)."""
    highest = max(scores.values(), default=0)
    if highest <= 0:
        return dict(scores)
    return {k: MAX_NODE_SCORE * v // highest for k, v in scores.items()}


def pick(order: Sequence[K], scores: Mapping[K, int]) -> K | None:
    """The winner among the scored candidates: highest normalized score, ties to the
    earliest in `order` (the order candidates were tried)."""
    normalized = normalize(scores)
    best: K | None = None
    best_score = -1
    for k in order:
        if k in normalized and normalized[k] > best_score:
            best, best_score = k, normalized[k]
    return best
