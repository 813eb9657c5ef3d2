"""`draco health`: what each DeviceHealthPolicy does now, as the health controller would.

    draco health --from cluster.yaml --from policies.yaml [--now RFC3339] [-o json]
    draco health                                        # the current cluster

For each policy: the devices it selects, and each device with a signal or a rule of
the policy, with its state (Tainted, Pending until `for` ends, HeldBack by
`maxUnavailable`, Recovering until `clearAfter` ends) and the signal. A slice taint's
`timeAdded` counts as when its signal started, so `for` is judged as the controller
would after watching since then; other signals count from `--now`. Rules of the policy
found among the objects count as written; nothing is written here.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from operators.cli.inputs import kube_api
from operators.cli.output import emit, render_table, warn
from operators.cli.state import (
    add_source_options,
    build_tracker,
    parse_rfc3339,
    rfc3339,
    source_objects,
)
from operators.health.controller import status_of
from operators.health.decisions import decide
from operators.health.policy import KIND, parse_health_policy
from operators.health.signals import observe, pod_health
from operators.model import DeviceID, ModelError
from operators.tracker.taint_rules import TaintRuleOverlay

POLICIES = "/apis/resource.draco.dev/v1alpha1/devicehealthpolicies"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "health", help="what each DeviceHealthPolicy taints, holds back or clears now",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_source_options(parser, formats=("table", "json", "yaml"))
    parser.add_argument("--now", type=parse_rfc3339, default=None, metavar="RFC3339",
                        help="evaluate at this time instead of the current time")
    parser.set_defaults(func=run)


def cluster_policies(quiet: bool = False) -> list[dict[str, Any]]:
    api = kube_api()
    method, url, headers, _, _ = api.param_serialize("GET", POLICIES, header_params={"Accept": "application/json"},
                                                     auth_settings=["BearerToken"])
    try:
        resp = api.call_api(method, url, header_params=headers)
        resp.read()
    except Exception as exc:  # noqa: BLE001 - the CRD may not be installed: say so, show the rest
        if not quiet:
            warn(f"cannot list DeviceHealthPolicies: {exc}")
        return []
    import json

    return [{"kind": KIND, **item} for item in json.loads(resp.data).get("items", [])]


def preview(objects: list[dict[str, Any]], now: datetime) -> dict[str, Any]:
    """The document `draco health` prints, from plain objects."""
    policies = [o for o in objects if isinstance(o, dict) and o.get("kind") == KIND]
    tracker = build_tracker([o for o in objects if not (isinstance(o, dict) and o.get("kind") == KIND)])
    rules = next((dict(o.rules) for o in tracker.overlays if isinstance(o, TaintRuleOverlay)), {})
    views = list(tracker.devices())
    health = pod_health(tracker.pods())
    out: dict[str, Any] = {"policies": {}, "errors": []}
    for body in sorted(policies, key=lambda o: str((o.get("metadata") or {}).get("name"))):
        try:
            policy = parse_health_policy(body)
        except ModelError as err:
            out["errors"].append(str(err))
            continue
        ruled = {}
        for rule in rules.values():
            sel = rule.selector
            if rule.meta.controller_uid == policy.meta.uid and policy.meta.uid and sel is not None \
                    and sel.driver and sel.pool and sel.device:
                ruled[DeviceID(sel.driver, sel.pool, sel.device)] = rule.value
        seen = observe(policy, views, health)
        for dev in seen.unknown:
            seen.active.pop(dev, None)
        decision = decide(policy, seen.selected, seen.active, seen.siblings, ruled, {}, now)
        status = status_of(policy, decision, 0, seen.problems, {}, now)
        status.pop("recovered")
        status.pop("observedGeneration")
        status["create"] = sorted("/".join(d) for d in decision.taint if d not in ruled)
        status["delete"] = sorted("/".join(d) for d in decision.untaint)
        out["policies"][policy.name] = status
    return out


def by_device(objects: list[dict[str, Any]], now: datetime) -> dict[tuple[str, str, str], list[dict[str, Any]]]:
    """For `draco devices`: each device's health under each policy (signal, state, rule)."""
    out: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    if not any(isinstance(o, dict) and o.get("kind") == KIND for o in objects):
        return out
    for name, status in preview(objects, now)["policies"].items():
        for d in status["devices"]:
            entry = {"policy": name, "state": d["state"], "signal": d.get("signal")}
            if d.get("rule") and d["state"] in ("Tainted", "Recovering"):
                entry["rule"] = d["rule"]
            out.setdefault((d["driver"], d["pool"], d["device"]), []).append(entry)
    return out


def table(doc: dict[str, Any]) -> str:
    rows = []
    for name, status in doc["policies"].items():
        for d in status["devices"]:
            rows.append([name, f"{d['driver']}/{d['pool']}/{d['device']}", d["state"], d.get("signal"),
                         d.get("until")])
    text = render_table(["policy", "device", "state", "signal", "until"], rows)
    for name, status in doc["policies"].items():
        cond = status["conditions"][0]
        text += (f"\n{name}: {status['selected']} selected, {status['tainted']} tainted, "
                 f"{status['pending']} pending, {status['heldBack']} held back, {status['recovering']} "
                 f"recovering; Throttled={cond['status']}: {cond['message']}")
        for problem in status["problems"]:
            text += f"\n  problem: {problem}"
    for error in doc["errors"]:
        text += f"\nleft out: {error}"
    return text + "\n"


def run(args: argparse.Namespace) -> int:
    now = args.now or datetime.now(UTC)
    objects = source_objects(args)
    if not args.sources:
        objects += cluster_policies()
    doc = preview(objects, now)
    doc["now"] = rfc3339(now)
    emit(doc, args.output, table)
    return 0
