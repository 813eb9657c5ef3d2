"""`draco evictions`: which pods device taints evict now or later, and each rule's condition.

The condition is the one a freshly started controller would first compute at `--now`
(so no pods count as already evicted); `null` means the grace period after the rule's
creation or effect change still holds a False condition back.
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
from operators.eviction import status as rule_status
from operators.eviction.decisions import plan
from operators.model import ObjectRef
from operators.tracker import Tracker
from operators.tracker.taint_rules import DeviceTaintRule


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
    parser.set_defaults(func=run)


def effect_since(rule: DeviceTaintRule) -> datetime | None:
    """When the rule's effect last changed, as far as a file tells: its creation, or a
    later timeAdded (upstream stamps timeAdded when the effect changes)."""
    created = rule.meta.creation_timestamp
    if rule.time_added is not None and (created is None or rule.time_added > created):
        return rule.time_added
    return created


def document(tracker: Tracker, now: datetime, grace: timedelta = rule_status.DEFAULT_GRACE) -> dict[str, Any]:
    current = plan(tracker)
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
        "rules": rules,
        "errors": [errors[k] for k in sorted(errors)],
    }


def table(doc: dict[str, Any]) -> str:
    rows: list[tuple[Any, ...]] = [(p, "now") for p in doc["evict"]]
    rows += [(item["pod"], item["at"]) for item in doc["later"]]
    out = render_table(("pod", "evict at"), rows) if rows else "No pods to evict.\n"
    if doc["rules"]:
        out += "\n" + render_table(
            ("rule", "eviction in progress", "reason", "devices", "allocated", "pods", "namespaces"),
            [(name, r["EvictionInProgress"] or "(grace period)", r["reason"], r["affectedDevices"],
              r["allocatedDevices"], r["podsToEvict"], r["namespaces"]) for name, r in doc["rules"].items()],
        )
    if doc["errors"]:
        out += "\nErrors:\n" + "".join(f"  {e['object']}: {e['message']}\n" for e in doc["errors"])
    return out


def run(args: argparse.Namespace) -> int:
    now = args.now or datetime.now(UTC)
    tracker, _ = load_state(args, clock=lambda: now)
    emit(document(tracker, now, timedelta(seconds=args.grace_period)), args.output, table)
    return 0
