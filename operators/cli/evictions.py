"""`draco evictions`: which pods device taints evict now or later, and each rule's condition.

The condition is the one a freshly started controller would first compute at `--now`
(so no pods count as already evicted); `null` means the grace period after the rule's
creation or effect change still holds a False condition back.

Upstream's own DeviceTaintRules (`resource.k8s.io`) count like draco's in which pods
go; `upstreamRules` reports what they select and the condition upstream's controller
wrote (draco never writes it). `evictedBy` names, per pod, the controller that evicts
it under `--slice-taints`: draco, or `upstream` (kube-controller-manager) where
upstream evicts for the pod's taints no later than draco would.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta
from typing import Any

from operators.cli.options import seconds
from operators.cli.output import emit, render_table, warn
from operators.cli.state import (
    add_source_options,
    error_record,
    load_state,
    parse_rfc3339,
    rfc3339,
    tracker_errors,
)
from operators.cli.upstream_taints import add_mode_option, add_upstream, describe, ownership_of
from operators.eviction import status as rule_status
from operators.eviction.decisions import DRACO_ALONE, EvictionPlan, Ownership, plan
from operators.model import ObjectRef
from operators.tracker import Tracker
from operators.tracker.taint_rules import DeviceTaintRule, UpstreamTaintRuleOverlay


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "evictions", help="which pods the taints evict now or later, and each rule's condition",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_source_options(parser, formats=("table", "json", "yaml"))
    parser.add_argument("--now", type=parse_rfc3339, default=None, metavar="RFC3339",
                        help="evaluate at this time instead of the current time")
    parser.add_argument("--grace-period", type=seconds, default=rule_status.DEFAULT_GRACE.total_seconds(),
                        metavar="SECONDS", help="grace period after a rule's creation or effect change "
                                                "before its condition may become False (default 5)")
    add_mode_option(parser)
    parser.set_defaults(func=run)


def effect_since(rule: DeviceTaintRule) -> datetime | None:
    """When the rule's effect last changed, as far as a file tells: its creation, or a
    later timeAdded (upstream stamps timeAdded when the effect changes)."""
    created = rule.meta.creation_timestamp
    if rule.time_added is not None and (created is None or rule.time_added > created):
        return rule.time_added
    return created


def upstream_rules(tracker: Tracker, current: EvictionPlan) -> dict[str, Any]:
    """Upstream's rules: what they select and the condition upstream's controller wrote."""
    out: dict[str, Any] = {}
    overlay = next((o for o in tracker.overlays if isinstance(o, UpstreamTaintRuleOverlay)), None)
    if overlay is None:
        return out
    for name in sorted(overlay.rules):
        rule = overlay.rules[name]
        counts = rule_status.count(tracker, rule, current)
        pending = [p for p in current.pods.values() if rule.source in p.reasons]
        cond = rule.condition(rule_status.CONDITION) or {}
        out[name] = {
            "source": rule.source, "effect": rule.effect,
            "affectedDevices": counts.affected_devices, "allocatedDevices": counts.allocated_devices,
            "podsToEvict": len(pending), "namespaces": len({p.pod.namespace for p in pending}),
            "EvictionInProgress": cond.get("status"), "reason": cond.get("reason"),
            "message": cond.get("message"),
        }
    return out


def document(tracker: Tracker, now: datetime, grace: timedelta = rule_status.DEFAULT_GRACE,
             ownership: Ownership = DRACO_ALONE) -> dict[str, Any]:
    current = plan(tracker, ownership=ownership)
    for err in current.errors:
        warn(str(err))
    errors = {(r["object"], r["message"]): r for r in tracker_errors(tracker)}
    for err in current.errors:
        rec = error_record(err.ref, f"{err.path}: {err.message}" if err.path else err.message)
        errors[(rec["object"], rec["message"])] = rec
    for claim in tracker.claims():
        for path, problem in claim.toleration_problems():
            ref = ObjectRef("ResourceClaim", claim.namespace, claim.name)
            rec = error_record(ref, f"{path}: {problem}")
            errors.setdefault((rec["object"], rec["message"]), rec)
    rules: dict[str, Any] = {}
    for rule in rule_status.rules(tracker):
        cond = rule_status.compute(tracker, rule, now, effect_since=effect_since(rule), grace=grace,
                                   current=current)
        rules[rule.name] = {
            "EvictionInProgress": cond.status, "reason": cond.reason,
            "affectedDevices": cond.counts.affected_devices,
            "allocatedDevices": cond.counts.allocated_devices,
            "podsToEvict": cond.counts.pending_pods, "namespaces": cond.counts.namespaces,
            "message": cond.message,
        }
    return {
        "evict": [str(p.pod) for p in current.due(now)],
        "later": [{"pod": str(p.pod), "at": rfc3339(p.when)} for p in current.later(now)],
        "evictedBy": {str(p.pod): "upstream" if p.deferred_at(now) else "draco"
                      for p in sorted(current.pods.values(), key=lambda p: p.pod)},
        "rules": rules,
        "upstreamRules": upstream_rules(tracker, current),
        "errors": [errors[k] for k in sorted(errors)],
    }


def table(doc: dict[str, Any]) -> str:
    by = doc.get("evictedBy") or {}
    rows: list[tuple[Any, ...]] = [(p, "now", by.get(p, "draco")) for p in doc["evict"]]
    rows += [(item["pod"], item["at"], by.get(item["pod"], "draco")) for item in doc["later"]]
    out = render_table(("pod", "evict at", "by"), rows) if rows else "No pods to evict.\n"
    if doc["rules"]:
        out += "\n" + render_table(
            ("rule", "eviction in progress", "reason", "devices", "allocated", "pods", "namespaces"),
            [(name, r["EvictionInProgress"] or "(grace period)", r["reason"], r["affectedDevices"],
              r["allocatedDevices"], r["podsToEvict"], r["namespaces"]) for name, r in doc["rules"].items()],
        )
    if doc.get("upstreamRules"):
        out += "\n" + render_table(
            ("upstream rule", "effect", "eviction in progress", "reason", "devices", "allocated", "pods"),
            [(r["source"], r["effect"], r["EvictionInProgress"] or "-", r["reason"] or "-", r["affectedDevices"],
              r["allocatedDevices"], r["podsToEvict"]) for r in doc["upstreamRules"].values()])
    if doc["errors"]:
        out += "\nErrors:\n" + "".join(f"  {e['object']}: {e['message']}\n" for e in doc["errors"])
    if doc.get("cluster"):
        out += describe(doc["cluster"])
    return out


def run(args: argparse.Namespace) -> int:
    now = args.now or datetime.now(UTC)
    tracker, objects = load_state(args, clock=lambda: now)
    cluster = add_upstream(args, tracker, objects)
    doc = document(tracker, now, timedelta(seconds=args.grace_period), ownership_of(args, cluster))
    if cluster is not None:
        doc["cluster"] = cluster
    emit(doc, args.output, table)
    return 0
