"""Turning a found solution into `status.allocation`, as upstream writes it.

Config: each DeviceClass's config is added once, naming every request that used the
class; claim config is added once when it names none or at least one allocated request
or subrequest (a config naming two allocated requests appears once: kube-scheduler 1.37
writes it so, tests/e2e/test_allocator_differential.py); a config naming as many
requests as the claim has gets its `requests` cleared ("all").
Node selector: the first node-local device pins the node by name; otherwise the
single-term selectors of the devices are merged into one term; none means anywhere.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from types import MappingProxyType
from typing import Any

from operators.allocator.capacity import status_name
from operators.allocator.requests import AllocationError, Wanted
from operators.allocator.search import Pick
from operators.model import (
    AllocationResult,
    DeviceAllocationConfiguration,
    DeviceRequestAllocationResult,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    ResourceClaim,
)


def _contains(reqs: list[NodeSelectorRequirement], r: NodeSelectorRequirement) -> bool:
    values = set(r.values)
    return any(e.key == r.key and e.operator == r.operator and set(e.values) == values
               for e in reqs)


def node_selector_for(picks: Sequence[Pick], node: str | None = None) -> NodeSelector | None:
    """NODE: the node the decision was made for (a `bindsToNode` device pins it)."""
    fields: list[NodeSelectorRequirement] = []
    exprs: list[NodeSelectorRequirement] = []
    for p in picks:
        placement = p.device.placement
        pinned = placement.node_name or (node if p.device.binds_to_node else None)
        if pinned:
            return NodeSelector((NodeSelectorTerm(match_fields=(
                NodeSelectorRequirement("metadata.name", "In", (pinned,)),)),))
        sel = placement.node_selector
        if sel is None or not sel.terms:
            continue
        if len(sel.terms) > 1:
            raise AllocationError(
                f"unsupported ResourceSlice.NodeSelector with {len(sel.terms)} terms")
        term = sel.terms[0]
        for r in term.match_fields:
            if not _contains(fields, r):
                fields.append(r)
        for r in term.match_expressions:
            if not _contains(exprs, r):
                exprs.append(r)
    if not fields and not exprs:
        return None
    return NodeSelector((NodeSelectorTerm(match_expressions=tuple(exprs),
                                          match_fields=tuple(fields)),))


_SHARE_IDS = uuid.UUID("6c1f7a52-4f63-4d52-9a51-0e3f1c4d2b7e")


def share_id(owner: str, index: int, p: Pick) -> str:
    """A share's ID (KEP-5075: a lowercase UUID, unique among the device's shares).
    Upstream draws a random one; draco derives it from the claim's UID and the result,
    so that `draco allocate` answers the same twice and no two claims' shares collide."""
    return str(uuid.uuid5(_SHARE_IDS, f"{owner}/{index}/{p.wanted.name}/{p.device.id}"))


def build_allocation(claim: ResourceClaim, picks: Sequence[Pick],
                     used: Sequence[Wanted], node: str | None = None) -> AllocationResult:
    """`used`: the Wanted of each request, in request order (the chosen subrequest)."""
    owner = claim.meta.uid or f"{claim.namespace}/{claim.name}"
    results = tuple(
        DeviceRequestAllocationResult(
            request=p.wanted.name, driver=p.device.id.driver, pool=p.device.id.pool,
            device=p.device.id.device, admin_access=p.wanted.admin_access,
            tolerations=p.wanted.spec.tolerations,
            share_id=share_id(owner, i, p) if p.consumed is not None else None,
            consumed_capacity=MappingProxyType(dict(sorted(  # sorted, as the API prints maps
                (status_name(n, p.device), q) for n, q in p.consumed.items())))
            if p.consumed else MappingProxyType({}),
            binding_conditions=p.device.binding_conditions,
            binding_failure_conditions=p.device.binding_failure_conditions)
        for i, p in enumerate(picks))
    config: list[tuple[str, list[str], Any]] = []
    class_ranges: dict[str, tuple[int, int]] = {}
    for w in used:
        cls = w.device_class
        if cls.name in class_ranges:
            start, end = class_ranges[cls.name]
            for i in range(start, end):
                config[i][1].append(w.name)
            continue
        start = len(config)
        for c in cls.config:
            config.append(("FromClass", [w.name], c.opaque))
        class_ranges[cls.name] = (start, len(config))
    for cc in claim.config:
        if not cc.requests:
            config.append(("FromClaim", list(cc.requests), cc.opaque))
            continue
        if any(w.base in cc.requests or (w.sub and w.name in cc.requests) for w in used):
            config.append(("FromClaim", list(cc.requests), cc.opaque))
    def covers_all(reqs: list[str]) -> bool:
        # every request of the claim is named, itself or by the subrequest it got
        return all(w.base in reqs or (bool(w.sub) and w.name in reqs) for w in used)

    out = tuple(
        DeviceAllocationConfiguration(
            source=src, requests=() if reqs and covers_all(reqs) else tuple(reqs), opaque=opaque)
        for src, reqs, opaque in config)
    return AllocationResult(results=results, config=out, node_selector=node_selector_for(picks, node))


def config_to_api(a: AllocationResult) -> list[dict[str, Any]]:
    """`status.allocation.devices.config` entries, as the API writes them."""
    config = []
    for c in a.config:
        entry: dict[str, Any] = {"source": c.source}
        if c.requests:
            entry["requests"] = list(c.requests)
        if c.opaque is not None:
            entry["opaque"] = c.opaque.to_api()
        config.append(entry)
    return config


def allocation_to_api(a: AllocationResult) -> dict[str, Any]:
    """`status.allocation` as the API writes it (no allocationTimestamp: the writer sets it)."""
    results = []
    for r in a.results:
        item: dict[str, Any] = {"request": r.request, "driver": r.driver, "pool": r.pool,
                                "device": r.device}
        if r.admin_access:
            item["adminAccess"] = True
        if r.tolerations:
            item["tolerations"] = [t.to_api() for t in r.tolerations]
        if r.share_id:
            item["shareID"] = r.share_id
        if r.consumed_capacity:
            item["consumedCapacity"] = {n: str(q) for n, q in r.consumed_capacity.items()}
        if r.binding_conditions:  # KEP-5007: the pod waits until the driver says ready
            item["bindingConditions"] = list(r.binding_conditions)
            item["bindingFailureConditions"] = list(r.binding_failure_conditions)
        results.append(item)
    config = config_to_api(a)
    devices: dict[str, Any] = {"results": results}
    if config:
        devices["config"] = config
    out: dict[str, Any] = {"devices": devices}
    if a.node_selector is not None:
        out["nodeSelector"] = a.node_selector.to_api()
    return out
