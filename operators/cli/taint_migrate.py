"""`draco taint --migrate`: move draco's DeviceTaintRules to upstream's own (1.37+).

For each draco rule, in name order: create upstream's DeviceTaintRule of the same name
(same selector and taint, `timeAdded` kept, so tolerationSeconds count from the same
moment), wait until upstream's controller has taken it over (it wrote the rule's
`EvictionInProgress` condition), then delete draco's rule (uid precondition). While
both exist, `draco run` (auto) leaves the pods to upstream: same taint, same time.

A rule is left in place, with a message, when upstream refuses it (an effect it does
not know, found by a server-side dry run), when an upstream rule of that name exists
with another spec, or when upstream's controller does not take it over in time.
Leaving rules is a result, not a failure (exit 0); a cluster without upstream's
DeviceTaintRule is bad input (exit 1).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from operators.cli.inputs import InputError

DRACO_RULES = "/apis/resource.draco.dev/v1alpha1/devicetaintrules"
UPSTREAM_VERSIONS = ("v1", "v1beta2", "v1alpha3")
CONDITION = "EvictionInProgress"
# What the chart's guard policy (upstreamRuleGuard) wants on an upstream rule that selects every device.
ALL_DEVICES = "resource.draco.dev/all-devices"

Call = Callable[[str, str, Any], tuple[int, Any]]


def upstream_version(call: Call) -> str | None:
    """The newest served version of upstream's DeviceTaintRule (None: not served)."""
    for version in UPSTREAM_VERSIONS:
        status, body = call("GET", f"/apis/resource.k8s.io/{version}", None)
        if status == 200 and isinstance(body, dict) and any(
                isinstance(r, dict) and r.get("name") == "devicetaintrules" for r in body.get("resources") or []):
            return version
    return None


def upstream_rule(rule: dict[str, Any], version: str) -> dict[str, Any]:
    """Upstream's rule for draco's: same name, selector (driver, pool, device) and taint;
    timeAdded kept (the rule's creation when draco's controller never stamped one)."""
    meta = rule.get("metadata") or {}
    spec = rule.get("spec") or {}
    taint = dict(spec.get("taint") or {})
    if not taint.get("timeAdded") and meta.get("creationTimestamp"):
        taint["timeAdded"] = meta["creationTimestamp"]
    out_meta: dict[str, Any] = {"name": meta.get("name")}
    if meta.get("labels"):
        out_meta["labels"] = dict(meta["labels"])
    out_meta["annotations"] = {"resource.draco.dev/migrated-from": f"devicetaintrules.resource.draco.dev/"
                                                                   f"{meta.get('name')}"}
    out_spec: dict[str, Any] = {"taint": {k: taint[k] for k in ("key", "value", "effect", "timeAdded")
                                          if taint.get(k) not in (None, "")}}
    if spec.get("deviceSelector") is not None:
        out_spec["deviceSelector"] = _upstream_selector(spec.get("deviceSelector"))
        if (spec.get("deviceSelector") or {}).get("all") is True:
            # upstream's empty selector is every device; the guard policy wants it said
            out_meta["annotations"][ALL_DEVICES] = "true"
    return {"apiVersion": f"resource.k8s.io/{version}", "kind": "DeviceTaintRule",
            "metadata": out_meta, "spec": out_spec}


def _upstream_selector(selector: Any) -> dict[str, Any] | None:
    """A selector as upstream's rule has it: `all: true` is upstream's empty selector."""
    if not isinstance(selector, dict):
        return None
    return {k: v for k, v in selector.items() if k in ("driver", "pool", "device")}


def _message(body: Any, status: int) -> str:
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return str(body["message"])
    return f"HTTP {status}"


def _same_spec(a: dict[str, Any], b: dict[str, Any]) -> bool:
    sa, sb = a.get("spec") or {}, b.get("spec") or {}
    ta, tb = dict(sa.get("taint") or {}), dict(sb.get("taint") or {})
    return (_upstream_selector(sa.get("deviceSelector")) == _upstream_selector(sb.get("deviceSelector"))
            and all(ta.get(k) == tb.get(k) for k in ("key", "value", "effect", "timeAdded")))


def _has_condition(body: Any) -> bool:
    conds = ((body or {}).get("status") or {}).get("conditions") or [] if isinstance(body, dict) else []
    return any(isinstance(c, dict) and c.get("type") == CONDITION for c in conds)


def migrate(call: Call, *, dry_run: bool, timeout: float, poll: float = 0.5,
            out: Callable[[str], Any] = sys.stdout.write) -> dict[str, str]:
    """Migrate every draco rule; returns {name: outcome} (migrated, or why it was left)."""
    version = upstream_version(call)
    if version is None:
        raise InputError("the cluster does not serve upstream's DeviceTaintRule (resource.k8s.io v1, v1beta2 "
                         "or v1alpha3): migrating needs Kubernetes 1.37, or 1.36 with the DRADeviceTaintRules "
                         "gate and the resource.k8s.io/v1beta2 API enabled")
    base = f"/apis/resource.k8s.io/{version}/devicetaintrules"
    status, body = call("GET", DRACO_RULES, None)
    if status >= 300:
        raise InputError(f"cannot list draco's DeviceTaintRules: {_message(body, status)}")
    rules = sorted((r for r in (body or {}).get("items") or [] if isinstance(r, dict)),
                   key=lambda r: str((r.get("metadata") or {}).get("name")))
    outcome: dict[str, str] = {}
    for rule in rules:
        name = str((rule.get("metadata") or {}).get("name"))
        target = upstream_rule(rule, version)
        outcome[name] = _one(call, base, rule, target, dry_run=dry_run, timeout=timeout, poll=poll)
        out(f"devicetaintrule.resource.draco.dev/{name}: {outcome[name]}\n")
    if not rules:
        out("no draco DeviceTaintRules to migrate\n")
    return outcome


def _one(call: Call, base: str, rule: dict[str, Any], target: dict[str, Any], *, dry_run: bool,
         timeout: float, poll: float) -> str:
    name = target["metadata"]["name"]
    status, existing = call("GET", f"{base}/{name}", None)
    if status == 200 and not _same_spec(existing, target):
        return (f"left: devicetaintrules.resource.k8s.io/{name} exists with another selector or taint; "
                "rename or delete one of them")
    if status != 200:
        status, body = call("POST", f"{base}?dryRun=All", target)
        if status >= 300:
            return f"left: upstream refuses it ({_message(body, status)})"
        if dry_run:
            return f"would be migrated to devicetaintrules.resource.k8s.io/{name} (dry run)"
        status, body = call("POST", base, target)
        if status >= 300 and status != 409:
            return f"left: cannot create devicetaintrules.resource.k8s.io/{name} ({_message(body, status)})"
    elif dry_run:
        return f"would be migrated: devicetaintrules.resource.k8s.io/{name} exists already (dry run)"
    deadline = time.monotonic() + timeout
    while True:
        status, body = call("GET", f"{base}/{name}", None)
        if status == 200 and _has_condition(body):
            break
        if time.monotonic() >= deadline:
            return (f"left: upstream's controller did not take over devicetaintrules.resource.k8s.io/{name} "
                    f"within {timeout:g}s (no {CONDITION} condition; is kube-controller-manager's "
                    "device-taint-eviction controller running?); both rules stay")
        time.sleep(poll)
    uid = (rule.get("metadata") or {}).get("uid")
    options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
    if uid:
        options["preconditions"] = {"uid": uid}
    status, body = call("DELETE", f"{DRACO_RULES}/{name}", options)
    if status >= 300 and status != 404:
        return f"left: taken over upstream, but cannot delete draco's rule ({_message(body, status)})"
    return f"migrated to devicetaintrules.resource.k8s.io/{name}"
