"""Choosing the node for a pod's claims: try candidates, allocate on one, score, pick.

Candidates, in the order they are tried: "no node" (only devices available on every
node; its allocation holds wherever the pod lands), then the nodes by name. Each
candidate gets a full `allocate` of all the pod's claims together; the feasible ones
are scored and picked as `scoring` describes (ties to the earliest tried).

Nodes that kube-scheduler's NodeUnschedulable, TaintToleration or NodeAffinity filter,
or an allocated claim's node selector, rules out for the pod (`candidate_nodes`) are no
candidates: kube-scheduler never allocates devices for a node it filtered out. When every node the pod may use is ruled out, "no node" is not
tried either (upstream allocates only for a node that passed its filters), and the
reason names those nodes.

What keeps this fast on 1,000+ nodes without changing the answer:
- each node is searched over only the pools it can reach (an index by node name, with
  selector and allNodes pools added), which the search would otherwise filter;
- per distinct selector set, which devices of the whole inventory match is computed
  once (`Matcher`) and reused across claims and nodes;
- a node where some request has fewer reachable, free, matching, tolerated devices
  than it needs is skipped without a search (a device whose CEL errs counts as a
  match, so the search that reports the error still runs where it could);
- an upper bound on each node's score (the best subrequest rank each request could
  still use there) skips nodes that cannot beat the best found so far, and the search
  stops as soon as a node reaches the best score any node could reach. Skipped nodes
  could only tie or lose, and ties go to the node tried earlier, so the pick is the
  one an exhaustive scoring would make.
Not done upstream's way: kube-scheduler may stop filtering after enough feasible
nodes (percentageOfNodesToScore) and breaks ties at random; draco is exhaustive in
effect and deterministic.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from operators.allocator.allocate import AllocationOutcome, allocate
from operators.allocator.capacity import NO_SHARES, Shares
from operators.allocator.explain import NodeFunnel, RefusedNode, explain, no_node_fits
from operators.allocator.features import DEFAULT_GATES, FeatureGates
from operators.allocator.inventory import (
    Candidate,
    Inventory,
    NodeInfo,
    PoolCandidates,
    SliceCandidates,
    placement_matches,
)
from operators.allocator.pod_claims import node_misfit
from operators.allocator.requests import AllocationError, Wanted, wanted_for_claim
from operators.allocator.scoring import normalize, pick, rank_bound, raw_score
from operators.allocator.search import selectors_match, taint_blocks
from operators.model import DeviceClass, DeviceID, NodePlacement, Pod, ResourceClaim
from operators.model.fields import thaw
from operators.model.nodes import PodToleration, cordoned, untolerated_taint


@dataclass(frozen=True, slots=True)
class Placement:
    """The pod's verdict: `node` is None for "no node" (or when nothing fits)."""

    outcome: AllocationOutcome
    node: str | None = None
    tried: int = 0
    scores: Mapping[str | None, int] = field(default_factory=dict)  # normalized
    examined: int = 0  # candidate nodes looked at before the search stopped

    @property
    def allocated(self) -> bool:
        return self.outcome.allocated


class Matcher:
    """Which devices of an inventory each selector set matches, computed once per set."""

    def __init__(self, inventory: Inventory) -> None:
        self.devices: list[Candidate] = [d for p in inventory for s in p.slices for d in s.devices
                                         if not d.unsupported]
        self._matches: dict[tuple[Any, ...], tuple[frozenset[DeviceID], tuple[Candidate, ...]]] = {}
        # per matched tuple (by id): where the last free device was found, so that the
        # next whole-inventory check starts there instead of walking every taken device
        self.hints: dict[int, int] = {}

    def matching(self, w: Wanted) -> tuple[frozenset[DeviceID], tuple[Candidate, ...]]:
        """The ids of the matching devices, and those devices in inventory order."""
        key = (w.device_class.name, w.device_class.selectors, w.spec.selectors)
        found = self._matches.get(key)
        if found is None:
            devices = []
            for d in self.devices:
                try:
                    ok = (selectors_match(w.device_class.selectors, d, "")
                          and selectors_match(w.spec.selectors, d, ""))
                except AllocationError:
                    ok = True  # let the search meet the error where it would
                if ok:
                    devices.append(d)
            found = self._matches[key] = (frozenset(d.id for d in devices), tuple(devices))
        return found


class NodeIndex:
    """The inventory split by where its pools are reachable, plus the node list."""

    def __init__(self, inventory: Inventory, nodes: Sequence[NodeInfo]) -> None:
        self.inventory = inventory
        self.nodes = sorted(nodes, key=lambda n: n.name)
        self.matcher = Matcher(inventory)
        self._by_name: dict[str, set[int]] = {}
        self._everywhere: set[int] = set()
        self._other: set[int] = set()  # node selectors, per-device placement
        for i, pool in enumerate(inventory):
            for sl in pool.slices:
                places = [d.placement for d in sl.devices] if sl.per_device else [sl.placement]
                for pl in places:
                    if pl.node_name:
                        self._by_name.setdefault(pl.node_name, set()).add(i)
                    elif pl.all_nodes and not sl.per_device:
                        self._everywhere.add(i)
                    else:
                        self._other.add(i)
        self._cache: dict[str | None, tuple[Inventory, tuple[Candidate, ...]]] = {}
        # candidate_nodes' answer per pod shape (tolerations, node selector, affinity),
        # valid as long as this index (its nodes) is: 2,000 nodes filtered per pod cost
        # more than the allocation itself
        self.filtered: dict[Any, tuple[list[NodeInfo], list[RefusedNode]]] = {}

    def with_nodes(self, nodes: Sequence[NodeInfo], changed: set[str]) -> NodeIndex:
        """This index for another node list, where only the nodes named in `changed` are
        new, gone or different: the inventory's split and the views of the other nodes
        are kept (a node's labels or taints changing must not rebuild the index of
        16,000 devices; kwok and kube-controller-manager rewrite a label on every
        heartbeat), and the per-pod-shape candidate lists start over."""
        twin = copy.copy(self)
        twin.nodes = sorted(nodes, key=lambda n: n.name)
        twin._cache = {k: v for k, v in self._cache.items() if k is None or k not in changed}
        twin.filtered = {}
        return twin

    def view(self, node: NodeInfo | None) -> tuple[Inventory, tuple[Candidate, ...]]:
        """The pools the node reaches (in search order) and its reachable devices."""
        key = None if node is None else node.name
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        indices = set(self._everywhere) | set(self._other)
        if node is not None:
            indices |= self._by_name.get(node.name, set())
        pools: list[PoolCandidates] = []
        devices: list[Candidate] = []
        for i in sorted(indices):
            targeting = self.inventory[i].targeting(node)
            if not targeting:
                continue
            pools.append(self.inventory[i])
            devices.extend(_reachable(targeting, node))
        result = (tuple(pools), tuple(devices))
        self._cache[key] = result
        return result


def _reachable(targeting: tuple[SliceCandidates, ...], node: NodeInfo | None) -> list[Candidate]:
    return [d for sl in targeting for d in sl.devices
            if not sl.per_device or placement_matches(d.placement, node)]


def enough(w: Wanted, devices: Collection[Candidate] | None, matcher: Matcher,
            in_use: Collection[DeviceID]) -> bool:
    """Whether `devices` (None: the whole inventory) hold enough free, tolerated devices
    that the request's selectors match."""
    if w.all_mode:
        return True  # the search decides (All over nothing, incomplete pools: its errors)
    matching, matched = matcher.matching(w)
    need = w.count
    if len(matching) < need:
        return False
    if devices is None:  # the whole inventory, from where the last such check succeeded
        start = matcher.hints.get(id(matched), 0) % len(matched) if matched else 0
        for i in range(len(matched)):
            d = matched[(start + i) % len(matched)]
            if (w.admin_access or d.id not in in_use) and not taint_blocks(d.taints, w.tolerations):
                need -= 1
                if need <= 0:
                    matcher.hints[id(matched)] = (start + i) % len(matched)
                    return True
        return False
    for d in devices:
        if d.id in matching and (w.admin_access or d.id not in in_use) \
                and not taint_blocks(d.taints, w.tolerations):
            need -= 1
            if need <= 0:
                return True
    return need <= 0


def _ranks(plan: Sequence[Sequence[Sequence[Wanted]]], devices: Collection[Candidate] | None,
           matcher: Matcher, in_use: Collection[DeviceID]) -> list[int | None] | None:
    """Per `firstAvailable` request the first subrequest that could be met on these
    devices; None overall when some request cannot be met at all."""
    ranks: list[int | None] = []
    for per_claim in plan:
        for alts in per_claim:
            first = next((k for k, w in enumerate(alts) if enough(w, devices, matcher, in_use)),
                         None)
            if first is None:
                return None
            if alts[0].sub_index >= 0:
                ranks.append(first)
    return ranks


def _cluster_wide(inventory: Inventory) -> Inventory:
    """Every device reachable once, whatever its node: the frame for an explain that
    covers all candidates."""
    everywhere = NodePlacement(all_nodes=True)
    return tuple(
        PoolCandidates(p.id, p.incomplete, False, p.problem, tuple(
            SliceCandidates(s.name, everywhere, False, s.devices) for s in p.slices),
            p.counter_sets, p.consumers, p.counter_problem)
        for p in inventory)


def _filtered(node: NodeInfo, tolerations: Sequence[PodToleration]) -> RefusedNode | None:
    """NodeUnschedulable (a cordon) first, then TaintToleration (the first untolerated
    NoSchedule or NoExecute taint), kube-scheduler's order."""
    if cordoned(node, tolerations):
        return RefusedNode(node.name)
    taint = untolerated_taint(node, tolerations)
    return None if taint is None else RefusedNode(node.name, taint)


@dataclass(frozen=True, slots=True)
class PodFit:
    """A pod that will use the claims being allocated, with its claims that are allocated
    already (their node selectors bind it too)."""

    pod: Pod
    allocated: tuple[ResourceClaim, ...] = ()
    label: str = ""  # NS/NAME, named in reasons when several pods share the claims


def filter_shape(pod: Pod) -> Any:
    """What `candidate_nodes` reads of a pod without allocated claims, hashable: pods of
    one shape (most of a workload's) are filtered once per node index."""
    affinity = json.dumps(thaw(pod.affinity), sort_keys=True) if pod.affinity else ""
    return (pod.tolerations, tuple(sorted(pod.node_selector.items())), affinity)


def candidate_nodes(nodes: Iterable[NodeInfo], pods: Sequence[PodFit],
                    ) -> tuple[list[NodeInfo], list[RefusedNode]]:
    """The nodes on which every pod may run, and why the others are ruled out: per node
    and pod, a cordon, then an untolerated taint, then the pod's nodeSelector or required
    node affinity, then an allocated claim's node selector (kube-scheduler's filter order:
    NodeUnschedulable, TaintToleration, NodeAffinity, DynamicResources); the first pod,
    in the given order, that refuses a node is the one named."""
    allowed: list[NodeInfo] = []
    refused: list[RefusedNode] = []
    for node in nodes:
        why: RefusedNode | None = None
        for fit in pods:
            why = _filtered(node, fit.pod.tolerations)
            if why is None:
                misfit = node_misfit(fit.pod, node.name, node.labels, fit.allocated)
                why = None if misfit is None else RefusedNode(node.name, excluded=misfit)
            if why is not None:
                why = replace(why, pod=fit.label)
                break
        if why is None:
            allowed.append(node)
        else:
            refused.append(why)
    return allowed, refused


# kube-scheduler's minFeasibleNodesToFind: clusters up to this size are filtered whole.
FILTER_ALL_NODES = 100


def place(
    claims: Sequence[ResourceClaim],
    index: NodeIndex,
    classes: Mapping[str, DeviceClass],
    in_use: Collection[DeviceID],
    budget_s: float,
    *,
    only: NodeInfo | None = None,
    with_explain: bool = True,
    refused: Sequence[RefusedNode] = (),
    start: int = 0,
    shares: Shares = NO_SHARES,
    features: FeatureGates = DEFAULT_GATES,
) -> Placement:
    """Allocate the pod's `claims` on the best candidate; `only`: try that node alone.

    `refused`: the nodes `candidate_nodes` ruled out for the pod (not in
    `index.nodes`); they count in the reason when nothing fits, and when they are all
    the nodes there are, "no node" is not tried either. `start`: the node the search
    begins with (kube-scheduler too starts each search where the last one stopped, so
    that full nodes at the front are not walked again for every pod); the CLI starts
    at 0 and so answers the same every time.
    """
    deadline = time.monotonic() + budget_s
    # Problems independent of any node (missing class, > 32 results, bad constraints)
    # come first and are the verdict, as upstream fails the pod on them.
    checked = allocate(claims, None, (), classes, in_use, budget_s, with_explain=False,
                       features=features)
    if checked.status == "error":
        return Placement(checked)
    if only is not None:
        ruled_out = tuple(r for r in refused if r.name == only.name)
        if ruled_out:
            return Placement(AllocationOutcome("unsatisfiable", reason=no_node_fits(
                NodeFunnel(1, refused=ruled_out), None)))
    plan = [wanted_for_claim(ci, c, classes) for ci, c in enumerate(claims)]
    # kube-scheduler filters every node of a cluster of up to 100 and fails the pod with
    # an error if any node's filter errs; only `All` requests err node by node (a pool
    # incomplete there, a constraint a listed device breaks), so for them no node is
    # left unsearched.
    every_node = len(index.nodes) <= FILTER_ALL_NODES and any(
        w.all_mode for per_claim in plan for alts in per_claim for w in alts)
    candidates: list[NodeInfo | None]
    if only is not None:
        candidates = [only]
    elif refused and not index.nodes:
        candidates = []  # every node the pod may use refuses it: "no node" would not help
    else:
        first = start % len(index.nodes) if index.nodes else 0
        candidates = [None, *index.nodes[first:], *index.nodes[:first]]
    all_ranks = _ranks(plan, None, index.matcher, in_use)
    ceiling = rank_bound(all_ranks) if all_ranks is not None else 0
    raw: dict[str | None, int] = {}
    outcomes: dict[str | None, AllocationOutcome] = {}
    order: list[str | None] = []
    best = -1
    tried = 0
    unreached = too_few = searched = 0  # how the nodes fell away, for when none fits
    examined = 0
    searched_nodes: set[str] = set()
    invalid: AllocationOutcome | None = None
    for node in candidates:
        if all_ranks is None and only is None:
            break
        examined += 0 if node is None else 1
        pools, devices = index.view(node)
        if not pools and only is None and any(plan):
            unreached += 1 if node is not None else 0
            continue
        ranks = _ranks(plan, devices, index.matcher, in_use)
        if (ranks is None or rank_bound(ranks) <= best) and only is None:
            too_few += 1 if node is not None and ranks is None else 0
            continue
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return Placement(AllocationOutcome(
                "too-complex", reason=f"allocation too complex: no result within {budget_s:g}s "
                f"({tried} candidate nodes tried)"), tried=tried)
        tried += 1
        searched += 1 if node is not None else 0
        if node is not None:
            searched_nodes.add(node.name)
        out = allocate(claims, node, pools, classes, in_use, remaining, shares=shares,
                       with_explain=with_explain and only is not None, features=features)
        if out.invalid_pools and only is None:
            invalid = invalid or out  # the verdict only if no other node fits
            continue
        if out.status in ("error", "too-complex"):
            return Placement(out, None if node is None else node.name, tried)
        if not out.allocated:
            if only is not None:
                return Placement(out, None, tried)
            continue
        key = None if node is None else node.name
        raw[key] = raw_score(claims, out.allocations)
        outcomes[key] = out
        order.append(key)
        best = max(best, raw[key])
        if best >= ceiling:
            break
    if every_node and only is None:
        for node in index.nodes:
            if node.name in searched_nodes:
                continue
            pools, _ = index.view(node)
            if not pools:
                continue
            out = allocate(claims, node, pools, classes, in_use, max(deadline - time.monotonic(), 0.001),
                           shares=shares, with_explain=False, features=features)
            if out.status == "error" and not out.invalid_pools:
                return Placement(out, node.name, tried)
    if not outcomes and invalid is not None:
        return Placement(invalid, None, tried, examined=examined)
    if not outcomes:
        funnel = NodeFunnel(len(index.nodes) + len(refused), all_ranks is None, unreached, too_few,
                            searched, tuple(refused))
        return Placement(_nothing_fits(claims, index, classes, in_use, funnel, with_explain),
                         tried=tried, examined=examined)
    chosen = pick(order, raw)
    return Placement(outcomes[chosen], chosen, tried, normalize(raw), examined)


def _nothing_fits(claims: Sequence[ResourceClaim], index: NodeIndex,
                  classes: Mapping[str, DeviceClass], in_use: Collection[DeviceID],
                  funnel: NodeFunnel, with_explain: bool) -> AllocationOutcome:
    if not with_explain:
        return AllocationOutcome("unsatisfiable", reason=no_node_fits(funnel, None))
    why = explain(claims, None, _cluster_wide(index.inventory), dict(classes), in_use)
    return AllocationOutcome("unsatisfiable", reason=no_node_fits(funnel, why), explain=why)
