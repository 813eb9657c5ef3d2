"""`draco allocate`: what draco's allocator would allocate, and why not when it cannot.

Nothing is written. The device view is the controllers' (ResourceSlicePatches and
DeviceTaintRules included). Claims that already carry `status.allocation` count as
allocated and hold their devices.

Without --claim, every unallocated claim is allocated on its own, in input order, each
seeing the devices of the earlier ones as taken. With --claim (once per claim), the
named claims are allocated together, all or nothing, as one pod's claims are.

Candidates: with --node, that node alone; otherwise "no node" (devices available on
every node) and then every Node by name (without Node objects in the input, the nodes
the ResourceSlices name). The best KEP-4816 score wins (upstream's scoring and
normalization); ties go to the candidate tried first, so "no node" for claims that do
not depend on a node.

When Pods in the input use the claims, the candidates are the nodes the allocator
controller would consider for them, every one of those pods at once: not cordoned
(spec.unschedulable), no NoSchedule or NoExecute taint the pod does not tolerate, within
the pod's spec.nodeSelector and required node affinity, and accepted by the node
selector of each of the pod's other claims that is allocated (in the input, or earlier
in this run). When that leaves no node, the reason says how many each of these ruled
out (naming the pod when several share the claims). Without Node objects in the input
node labels are unknown, so a pod's label selectors match no node. Claims no Pod in the
input uses are placed as before, whatever the taints and selectors.

Gates: a claim that a pod still held by another controller's scheduling gate uses
(Kueue's `kueue.x-k8s.io/admission`, any gate but draco's and those given with
--act-beside-gates) is not allocated, as the allocator controller waits for such pods:
its record says `waiting` and names the pod and the gate; its devices stay free for the
claims after it.

Release: draco answers as the kube-scheduler of the cluster's release would with its
default gates (from the server's /version; 1.34 to 1.38), or of --kubernetes-version
(with --from files, where there is no server, 1.37 unless given). --feature-gates
change that release's defaults; a gate the release locks cannot be changed.

A claim that cannot be allocated is a result (`allocated: false` with the reason and,
where the search got that far, the explain per request), and the exit code is 0.
"""

from __future__ import annotations

import argparse
import copy
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from operators.allocator import (
    DEFAULT_BUDGET_S,
    NodeInfo,
    Shares,
    in_use_from_tracker,
    inventory_from_tracker,
    shares_from_tracker,
)
from operators.allocator.features import (
    DEFAULT_GATES,
    GATE_NAMES,
    FeatureGates,
    gated_inventory,
    parse_feature_gates,
)
from operators.allocator.nodes import NodeIndex, Placement, PodFit, candidate_nodes, place
from operators.allocator.releases import DEFAULT_RELEASE, Release, release_for_server
from operators.cli.allocate_gang import gang_document, gang_table
from operators.cli.allocate_preempt import preempt_document, preempt_table
from operators.cli.allocate_serve import serve
from operators.cli.allocate_workload import cluster_objects, workload_document, workload_table
from operators.cli.allocation_records import (
    allocated_record,
    failed_record,
    nodes_from,
    unreadable_record,
    waiting_record,
)
from operators.cli.inputs import UsageError
from operators.cli.options import gate_list, kubernetes_version
from operators.cli.output import emit, render_table, warn
from operators.cli.state import add_source_options, load_state, object_key
from operators.cli.upstream_taints import add_upstream
from operators.model import (
    AllocationResult,
    DeviceClass,
    DeviceID,
    NamespacedName,
    ObjectRef,
    ResourceClaim,
)
from operators.model.gates import DRACO_GATE, gate_setting, other_gates, waiting_for
from operators.tracker import Tracker


def claim_key(text: str) -> NamespacedName:
    """NAMESPACE/NAME, or NAME alone for a claim in "default" (where a --from file's
    claims without a namespace are, as `kubectl apply -f` would put them)."""
    key = object_key(text)
    if key is None:
        raise argparse.ArgumentTypeError(f"expected NAMESPACE/NAME (or NAME), not {text!r}")
    return key


claim_key.__name__ = "claim"


def namespaced_key(text: str) -> NamespacedName:
    """NAMESPACE/NAME of a namespaced object (a gang, a pod)."""
    ns, sep, name = text.partition("/")
    if not sep or not ns or not name or "/" in name:
        raise argparse.ArgumentTypeError(f"expected NAMESPACE/NAME, not {text!r}")
    return NamespacedName(ns, name)


namespaced_key.__name__ = "name"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "allocate", help="which devices draco would give to claims, and why not when it cannot",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_source_options(parser, formats=("table", "json"))
    parser.add_argument("--claim", dest="claims", action="append", default=[], type=claim_key,
                        metavar="NS/NAME|NAME", help="allocate this claim (repeat once per claim; "
                        "the named claims are allocated together, all or nothing)")
    parser.add_argument("--node", default=None, metavar="NAME", help="try only this node")
    parser.add_argument("--gang", default=None, type=namespaced_key, metavar="NS/NAME",
                        help="place this Gang (or PodGroup) instead: all its members' claims "
                        "jointly, all or nothing, in one topology domain")
    parser.add_argument("--preempt", default=None, type=namespaced_key, metavar="NS/NAME",
                        help="which running pods draco would evict so that this gated pod's "
                        "claims fit, and the devices it would nominate (nothing is evicted)")
    parser.add_argument("--workload", default=None, type=namespaced_key, metavar="NS/NAME",
                        help="what draco's Kueue admission check would answer for this Workload "
                        "(kueue.x-k8s.io/v1beta2): its pods' claims searched as one gang")
    parser.add_argument("--feature-gates", default="", type=feature_gates, metavar="NAME=BOOL,...",
                        help="allocator feature gates, as kube-scheduler spells them (default: "
                        "the release's defaults, see --kubernetes-version): "
                        + ", ".join(sorted(GATE_NAMES)))
    parser.add_argument("--kubernetes-version", default=None, type=kubernetes_version,
                        metavar="1.MINOR", help="allocate as this release's kube-scheduler "
                        "with default gates, 1.34 to 1.38 (default: the cluster's version; "
                        "with --from, 1.37)")
    parser.add_argument("--act-beside-gates", type=gate_list, default="", metavar="GATE,...",
                        help="other controllers' scheduling gates to allocate beside, as `draco run "
                        "--act-beside-gates` (default: none; claims of pods that carry any gate but "
                        "draco's are reported as waiting)")
    parser.add_argument("--serve", action="store_true",
                        help="answer allocation requests, one JSON object per line on stdin, "
                        "one answer per line on stdout (for programs; see the CLI guide)")
    parser.set_defaults(func=run)


def feature_gates(text: str) -> str:
    """The text, once it reads as gates (the release, known later, checks it again)."""
    try:
        parse_feature_gates(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    return text


def gates_for(release: Release, text: str) -> FeatureGates:
    """RELEASE's defaults with --feature-gates over them; a usage error for a gate the
    release does not know or locks."""
    try:
        return parse_feature_gates(text, release.gates, enforce_locks=True)
    except ValueError as exc:
        raise UsageError(f"--feature-gates: {exc}") from None


feature_gates.__name__ = "feature gates"


# -- inputs -------------------------------------------------------------------------------

def pods_using(tracker: Tracker, claims: Iterable[ResourceClaim],
               settled: Mapping[NamespacedName, AllocationResult]) -> list[PodFit]:
    """Each unfinished pod of the input that uses one of the claims, with its other claims
    that are allocated (in the input, or earlier in this run: `settled`); pods are named
    in reasons only when there are several."""
    pending = {NamespacedName(c.namespace, c.name) for c in claims}
    keys = sorted({k for key in pending for k in tracker.pods_of_claim(key)})
    fits: list[PodFit] = []
    for key in keys:
        pod = tracker.pod(key)
        if pod is None or pod.terminal:
            continue
        allocated: dict[NamespacedName, ResourceClaim] = {}
        for pc in pod.resource_claims:
            name = pod.claim_name(pc)
            ck = NamespacedName(key.namespace, name or "")
            claim = tracker.claim(ck) if name and ck not in pending else None
            if claim is None:
                continue
            if claim.allocation is None and ck in settled:
                claim = replace(claim, allocation=settled[ck])
            if claim.allocation is not None:
                allocated.setdefault(ck, claim)
        fits.append(PodFit(pod, tuple(allocated.values()), str(key)))
    if len(fits) == 1:
        fits[0] = replace(fits[0], label="")
    return fits


def gate_wait(tracker: Tracker, claims: Iterable[ResourceClaim], beside: Collection[str]) -> str | None:
    """Why the claims wait, when an unfinished, unbound pod that uses one of them still
    carries another controller's gate (the first such pod, by name); None otherwise."""
    keys = sorted({k for c in claims for k in tracker.pods_of_claim(NamespacedName(c.namespace, c.name))})
    for key in keys:
        pod = tracker.pod(key)
        if pod is None or pod.terminal or pod.node_name:
            continue
        others = other_gates(pod.scheduling_gates, DRACO_GATE, beside)
        if others:
            return (f"pod {key.namespace}/{key.name} is {waiting_for(others)}: another controller "
                    f"decides first; draco allocates once only its gate {DRACO_GATE} remains")
    return None


def claims_in_order(objects: Iterable[dict[str, Any]], tracker: Tracker,
                    unreadable: dict[str, str] | None = None) -> list[ResourceClaim]:
    """The readable claims, in input order; the others are warned about and, with
    UNREADABLE, recorded there (label -> why)."""
    seen: dict[NamespacedName, ResourceClaim] = {}
    for obj in objects:
        if obj.get("kind") != "ResourceClaim":
            continue
        md = obj.get("metadata") or {}
        key = NamespacedName(str(md.get("namespace") or ""), str(md.get("name") or ""))
        claim = tracker.claim(key)
        if claim is None:
            error = tracker.errors.get(ObjectRef("ResourceClaim", key.namespace, key.name))
            why = (f"{error.path}: {error.message}" if error.path else error.message) if error else \
                "cannot be read"
            warn(f"ResourceClaim {key} cannot be read ({why}); skipped")
            if unreadable is not None:
                unreadable[f"{key.namespace}/{key.name}"] = why
        elif key not in seen:
            seen[key] = claim
    return list(seen.values())


# -- records ------------------------------------------------------------------------------

def _pinned_node(allocation: AllocationResult) -> str | None:
    """The node an existing allocation names by metadata.name, if it names exactly one."""
    sel = allocation.node_selector
    if sel is None or len(sel.terms) != 1:
        return None
    term = sel.terms[0]
    if term.match_expressions or len(term.match_fields) != 1:
        return None
    r = term.match_fields[0]
    if r.key == "metadata.name" and r.operator == "In" and len(r.values) == 1:
        return r.values[0]
    return None


def _label(c: ResourceClaim) -> str:
    return f"{c.namespace}/{c.name}"


def _taken(allocation: AllocationResult) -> list[DeviceID]:
    return [r.id for r in allocation.results if not r.admin_access and not r.share_id]


# -- the command --------------------------------------------------------------------------

def _place(claims: Sequence[ResourceClaim], tracker: Tracker, index: NodeIndex,
           classes: Mapping[str, DeviceClass], in_use: set[DeviceID], shares: Shares,
           budget_s: float, only: NodeInfo | None,
           settled: Mapping[NamespacedName, AllocationResult],
           gates: FeatureGates) -> Placement:
    pods = pods_using(tracker, claims, settled)
    if not pods:
        return place(claims, index, classes, in_use, budget_s, only=only, shares=shares,
                     features=gates)
    allowed, refused = candidate_nodes(index.nodes, pods)  # the allocator controller's filter
    if only is not None:
        _, refused = candidate_nodes([only], pods)
    view = copy.copy(index)  # shares the per-node caches; only the candidate list differs
    view.nodes = allowed
    return place(claims, view, classes, in_use, budget_s, only=only, refused=refused,
                 shares=shares, features=gates)


def _record_placement(placed: Placement, pending: Sequence[ResourceClaim], out: dict[str, Any],
                      in_use: set[DeviceID], shares: Shares,
                      settled: dict[NamespacedName, AllocationResult]) -> None:
    for i, claim in enumerate(pending):
        if placed.allocated:
            allocation = placed.outcome.allocations[i]
            out[_label(claim)] = allocated_record(allocation, placed.node)
            in_use.update(_taken(allocation))
            for r in allocation.results:
                if r.share_id and not r.admin_access:
                    shares.add(r.id, r.consumed_capacity.items())
            settled[NamespacedName(claim.namespace, claim.name)] = allocation
        else:
            out[_label(claim)] = failed_record(placed.outcome, _label(claim))


def document(tracker: Tracker, objects: Sequence[dict[str, Any]], claims: Sequence[NamespacedName],
             node: str | None, budget_s: float,
             gates: FeatureGates = DEFAULT_GATES, beside: Collection[str] = ()) -> dict[str, Any]:
    unreadable: dict[str, str] = {}
    ordered = claims_in_order(objects, tracker, unreadable)
    by_key = {NamespacedName(c.namespace, c.name): c for c in ordered}
    missing = [str(k) for k in claims if k not in by_key]
    if missing:
        raise UsageError(f"no such ResourceClaim in the input: {', '.join(missing)}")
    nodes = nodes_from(objects, tracker)
    only: NodeInfo | None = None
    if node is not None:
        only = next((n for n in nodes if n.name == node), None)
        if only is None:
            warn(f"node {node} is not among the input's nodes; trying it without labels")
            only = NodeInfo(node)
    index = NodeIndex(gated_inventory(inventory_from_tracker(tracker), gates), nodes)
    classes = {c.name: c for c in tracker.device_classes()}
    in_use: set[DeviceID] = set(in_use_from_tracker(tracker))
    shares = shares_from_tracker(tracker)
    out: dict[str, Any] = {}
    selected = [by_key[k] for k in dict.fromkeys(claims)] if claims else ordered
    pending: list[ResourceClaim] = []
    settled: dict[NamespacedName, AllocationResult] = {}  # allocated in this run
    for claim in selected:
        if claim.allocation is not None:
            out[_label(claim)] = allocated_record(claim.allocation, _pinned_node(claim.allocation))
        elif claims:
            pending.append(claim)
            out[_label(claim)] = None  # keeps the input order
        elif (why := gate_wait(tracker, [claim], beside)) is not None:
            out[_label(claim)] = waiting_record(why)
        else:
            placed = _place([claim], tracker, index, classes, in_use, shares, budget_s, only,
                            settled, gates)
            _record_placement(placed, [claim], out, in_use, shares, settled)
    if pending and (why := gate_wait(tracker, pending, beside)) is not None:
        for claim in pending:
            out[_label(claim)] = waiting_record(why)
    elif pending:
        placed = _place(pending, tracker, index, classes, in_use, shares, budget_s, only, settled,
                        gates)
        _record_placement(placed, pending, out, in_use, shares, settled)
    if not claims:
        for label, why in unreadable.items():
            out.setdefault(label, unreadable_record(why))
    return {"claims": out}


def table(doc: dict[str, Any]) -> str:
    rows = []
    for label, rec in doc["claims"].items():
        devices = ", ".join(f"{r['request']}={r['pool']}/{r['device']}"
                            + (" (admin)" if r.get("adminAccess") else "") for r in rec["results"])
        rows.append((label, "yes" if rec["allocated"] else "no", rec["node"], devices,
                     rec["reason"]))
    if not rows:
        return "No claims to allocate.\n"
    return render_table(("claim", "allocated", "node", "devices", "reason"), rows)


def run(args: argparse.Namespace) -> int:
    release: Release | None = args.kubernetes_version
    if args.serve:
        if args.sources or args.claims or args.node or args.gang or args.preempt or args.workload:
            raise UsageError("--serve reads everything from its requests: it takes no --from, "
                             "--claim, --node, --gang or --preempt")
        return serve(gates_for(release or DEFAULT_RELEASE, args.feature_gates))
    tracker, objects = load_state(args)
    # upstream's rules taint devices too
    record = add_upstream(args, tracker, list(objects), probe=False)
    if release is None and record is not None:
        release, why = release_for_server(str(record.get("serverVersion") or ""))
        if why:
            warn(why)
    gates = gates_for(release or DEFAULT_RELEASE, args.feature_gates)
    if args.workload is not None:
        if args.claims or args.node or args.gang or args.preempt:
            raise UsageError("--workload decides for the whole Workload: it takes no --claim, "
                             "--node, --gang or --preempt")
        if not args.sources:
            objects = [*objects, *cluster_objects(args.workload)]
        emit(workload_document(tracker, objects, args.workload, DEFAULT_BUDGET_S, gates), args.output,
             workload_table)
        return 0
    if args.preempt is not None:
        if args.claims or args.node or args.gang:
            raise UsageError("--preempt decides for one pod: it takes no --claim, --node or --gang")
        emit(preempt_document(tracker, objects, args.preempt, DEFAULT_BUDGET_S, gates), args.output,
             preempt_table)
        return 0
    if args.gang is not None:
        if args.claims or args.node:
            raise UsageError("--gang places the whole gang: it takes no --claim or --node")
        emit(gang_document(tracker, objects, args.gang, DEFAULT_BUDGET_S, gates), args.output, gang_table)
        return 0
    emit(document(tracker, objects, args.claims, args.node, DEFAULT_BUDGET_S, gates,
                  gate_setting(args.act_beside_gates)), args.output, table)
    return 0
