"""The order the joint search visits a gang's members and their nodes: most constrained
first.

A depth-first search finds a tight placement quickly when it decides the hard choices
first: a member that fits on 1 node before one that fits on 17, a member asking for 2
devices before one asking for 1, and for each member its tightest node first (the
fewest spare matching devices), so that small members fill the gaps large ones leave
instead of breaking up the nodes large ones need. Order never changes the verdict (the
search is exhaustive either way), only how soon it is reached and which of several
placements comes first.

A node where a member's requests cannot be met even by counting over the devices free
before the gang is dropped from its list: the gang only ever takes devices, so the
count can only fall, and the search would skip the node every time.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING

from operators.allocator.inventory import Candidate, NodeInfo
from operators.allocator.nodes import Matcher, NodeIndex
from operators.allocator.requests import Wanted, wanted_for_claim
from operators.allocator.search import taint_blocks
from operators.model import DeviceClass, DeviceID

if TYPE_CHECKING:
    from operators.gangs.gang import Member

Plan = Sequence[Sequence[Wanted]]  # per request of a member, its alternatives


def _spare(alts: Sequence[Wanted], devices: Sequence[Candidate], matcher: Matcher,
           in_use: Collection[DeviceID]) -> int | None:
    """The most free matching devices left over by any alternative that fits by count
    (None: none does). All-mode and admin access are the search's to judge: 0."""
    best: int | None = None
    for w in alts:
        if w.all_mode or w.admin_access:
            return 0
        ids, _ = matcher.matching(w)
        free = sum(1 for d in devices if d.id in ids and d.id not in in_use
                   and not taint_blocks(d.taints, w.tolerations))
        if free >= w.count and (best is None or free - w.count > best):
            best = free - w.count
    return best


def tightest_nodes(plan: Plan, allowed: Sequence[NodeInfo],
                   devices_of: Callable[[NodeInfo], Sequence[Candidate]], matcher: Matcher,
                   in_use: Collection[DeviceID]) -> list[NodeInfo]:
    """ALLOWED without the nodes where the member fits nowhere by count, tightest first
    (the least spare devices over its requests), then in the given order."""
    ranked: list[tuple[int, int, NodeInfo]] = []
    for i, node in enumerate(allowed):
        devices = devices_of(node)
        total = 0
        for alts in plan:
            spare = _spare(alts, devices, matcher, in_use)
            if spare is None:
                break
            total += spare
        else:
            ranked.append((total, i, node))
    ranked.sort(key=lambda t: (t[0], t[1]))
    return [node for _, _, node in ranked]


def size(plan: Plan) -> int:
    """The fewest devices the member asks for (All-mode requests count as one)."""
    return sum(1 if any(w.all_mode for w in alts) else min(w.count for w in alts) for alts in plan)


def constrained_first(shapes: Sequence[object], node_counts: Sequence[int],
                      sizes: Sequence[int]) -> list[int]:
    """The members' indices, fewest usable nodes first, then the largest ask; members of
    one shape stay together (the search's symmetry cut compares neighbours), in their
    given order."""
    first: dict[object, int] = {}
    group = []
    for i, shape in enumerate(shapes):
        group.append(first.setdefault(shape, i) if shape is not None else i)
    return sorted(range(len(shapes)),
                  key=lambda i: (node_counts[i], -sizes[i], group[i], i))


def search_order(core: Sequence[Member], extras: Sequence[Member],
                 nodes: Mapping[str, Sequence[NodeInfo]], domain_nodes: Collection[str] | None,
                 admit: Callable[[Candidate], bool] | None, index: NodeIndex,
                 classes: Mapping[str, DeviceClass], in_use: Collection[DeviceID],
                 shape: Callable[[Member], object]) -> tuple[list[Member], dict[str, list[NodeInfo]]]:
    """The members in the search's order (the core most constrained first, then the
    extras in name order) and each one's nodes in the domain (DOMAIN_NODES, None:
    all), tightest first. SHAPE: members with equal shapes are interchangeable (None:
    unique). Raises AllocationError for a claim that cannot be read."""
    devices: dict[str, tuple[Candidate, ...]] = {}

    def devices_of(node: NodeInfo) -> tuple[Candidate, ...]:
        found = devices.get(node.name)
        if found is None:
            found = index.view(node)[1]
            if admit is not None:
                found = tuple(d for d in found if admit(d))
            devices[node.name] = found
        return found

    lists: dict[str, list[NodeInfo]] = {}
    sizes: dict[str, int] = {}
    by_shape: dict[object, tuple[list[NodeInfo], int]] = {}
    shapes = {m.label: shape(m) for m in [*core, *extras]}
    for m in [*core, *extras]:
        known = by_shape.get(shapes[m.label]) if shapes[m.label] is not None else None
        if known is None:
            plan = [alts for ci, c in enumerate(m.pending) for alts in wanted_for_claim(ci, c, classes)]
            allowed = [n for n in nodes[m.label] if domain_nodes is None or n.name in domain_nodes]
            known = (tightest_nodes(plan, allowed, devices_of, index.matcher, in_use), size(plan))
            if shapes[m.label] is not None:
                by_shape[shapes[m.label]] = known
        lists[m.label], sizes[m.label] = known
    order = constrained_first([shapes[m.label] for m in core], [len(lists[m.label]) for m in core],
                              [sizes[m.label] for m in core])
    return [core[i] for i in order] + list(extras), lists


__all__ = ["constrained_first", "search_order", "size", "tightest_nodes"]
