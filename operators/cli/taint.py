"""`draco taint`: `kubectl taint nodes` for devices, through DeviceTaintRules.

    draco taint driver=gpu.example.com,pool=node-a,device=gpu-0 example.com/maint=planned:NoExecute
    draco taint pool=node-a example.com/maint:NoExecute-          # remove
    draco taint "" example.com/drain:NoExecute --all             # every device (deviceSelector {all: true})
    draco taint --migrate [--dry-run]                              # to upstream's rules (1.37+)

Before a NoExecute rule is created, the preview says which devices, pods and namespaces
it hits, and draco asks for confirmation unless --yes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from datetime import UTC, datetime
from typing import Any

import yaml

from operators.apiserver.validation.names import dns_subdomain, label_value, qualified_name
from operators.cli.inputs import (
    CLUSTER_SOURCES,
    ClusterError,
    InputError,
    UsageError,
    connection_problem,
    kube_api,
    load_cluster_objects,
    load_objects,
)
from operators.cli.state import build_tracker
from operators.eviction.decisions import plan
from operators.tracker.taint_rules import parse_device_taint_rule

EFFECTS = ("None", "NoSchedule", "NoExecute")
RULES_PATH = "/apis/resource.draco.dev/v1alpha1/devicetaintrules"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "taint", help="taint devices (create or remove a DeviceTaintRule), with a preview",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("selector", metavar="SELECTOR", nargs="?",
                        help="driver=…,pool=…,device=… (any subset; '' with --all for every device)")
    parser.add_argument("taint", metavar="KEY[=VALUE]:EFFECT[-]", nargs="?",
                        help="the taint; a trailing '-' removes rules with this selector, key and effect")
    parser.add_argument("--migrate", action="store_true",
                        help="move every draco DeviceTaintRule to upstream's resource.k8s.io DeviceTaintRule "
                             "(same selector, taint and timeAdded), deleting draco's once upstream's "
                             "controller has taken it over")
    parser.add_argument("--migrate-timeout", type=float, default=60.0, metavar="SECONDS",
                        help="how long --migrate waits for upstream's controller per rule (default 60)")
    parser.add_argument("--name", help="rule name (default: derived from selector and taint)")
    parser.add_argument("--all", "--all-devices", dest="all_devices", action="store_true",
                        help="taint every device of the cluster: the rule says deviceSelector {all: true} "
                             "(an empty selector is refused without it)")
    parser.add_argument("--dry-run", action="store_true", help="print the rule and the preview, change nothing")
    parser.add_argument("--yes", "-y", action="store_true", help="do not ask before creating a NoExecute rule")
    parser.add_argument("--from", dest="sources", action="append", default=[], metavar="FILE",
                        help="compute the preview from FILE instead of the cluster (implies --dry-run)")
    parser.set_defaults(func=run)


def parse_selector(text: str) -> dict[str, Any]:
    selector: dict[str, Any] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        key, sep, value = part.partition("=")
        if not sep or key not in ("driver", "pool", "device") or not value:
            raise UsageError(f"bad selector {part!r}: use driver=…, pool=… and/or device=…")
        if key in selector:
            raise UsageError(f"selector names {key} twice")
        selector[key] = value
    return selector


def parse_taint(text: str) -> tuple[str, str, str, bool]:
    """KEY[=VALUE]:EFFECT[-] -> (key, value, effect, remove)."""
    remove = text.endswith("-")
    body = text[:-1] if remove else text
    key_value, sep, effect = body.rpartition(":")
    if not sep or not key_value:
        raise UsageError(f"bad taint {text!r}: use KEY[=VALUE]:EFFECT, e.g. example.com/maint:NoExecute")
    if effect not in EFFECTS:
        raise UsageError(f"unknown effect {effect!r}: use one of {', '.join(EFFECTS)}")
    key, _, value = key_value.partition("=")
    problems = qualified_name(key, "key") + label_value(value, "value")
    if problems:
        raise UsageError(f"bad taint {text!r}: {problems[0]['field']}: {_plain(problems[0]['message'])}")
    return key, value, effect, remove


def check_name(name: str) -> str:
    problems = dns_subdomain(name, "--name")
    if problems:
        raise UsageError(f"bad --name {name!r}: {_plain(problems[0]['message'])}")
    return name


def _plain(message: str) -> str:
    """The API's wording without its `Invalid value: "…":` prefix (the caller quotes the value)."""
    return message.split('": ', 1)[1] if message.startswith("Invalid value: ") and '": ' in message else message


def default_name(selector: dict[str, Any], key: str, effect: str) -> str:
    base = selector.get("device") or selector.get("pool") or selector.get("driver") or "all-devices"
    short = key.rpartition("/")[2]
    digest = hashlib.sha256(json.dumps([selector, key, effect], sort_keys=True).encode()).hexdigest()[:6]
    name = re.sub(r"[^a-z0-9.-]+", "-", f"{base}-{short}-{effect}".lower()).strip("-.")
    return f"{name[:50]}-{digest}"


def rule_object(name: str, selector: dict[str, Any], key: str, value: str, effect: str) -> dict[str, Any]:
    taint: dict[str, Any] = {"key": key, "effect": effect}
    if value:
        taint["value"] = value
    return {"apiVersion": "resource.draco.dev/v1alpha1", "kind": "DeviceTaintRule",
            "metadata": {"name": name}, "spec": {"deviceSelector": selector, "taint": taint}}


def preview(objects: list[dict[str, Any]], rule: dict[str, Any]) -> dict[str, Any]:
    """What the rule would do with effect NoExecute: devices, pods, namespaces."""
    now = datetime.now(UTC)
    simulated = json.loads(json.dumps(rule))
    simulated["metadata"]["creationTimestamp"] = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    simulated["spec"]["taint"]["effect"] = "None"
    others = [o for o in objects if not (o.get("kind") == "DeviceTaintRule"
                                         and _obj(o.get("metadata")).get("name") == rule["metadata"]["name"])]
    tracker = build_tracker([*others, simulated], clock=lambda: now)
    parsed = parse_device_taint_rule(simulated)
    devices = sorted(str(v.id) for v in tracker.devices(include_unpublished=True) if parsed.matches(v.id))
    pods = plan(tracker, simulate=parsed.name).pending_for_rule(parsed.name)
    return {"devices": devices, "pods": sorted(str(p.pod) for p in pods),
            "namespaces": sorted({p.pod.namespace for p in pods})}


def _call(api: Any, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    try:
        verb, url, headers, payload, _ = api.param_serialize(
            method, path, header_params={"Accept": "application/json", "Content-Type": "application/json"},
            body=body, auth_settings=["BearerToken"])
        resp = api.call_api(verb, url, header_params=headers, body=payload)
        resp.read()
    except Exception as exc:  # noqa: BLE001 - a connection problem, named in one line
        raise ClusterError(f"cannot reach the cluster at {api.configuration.host}: "
                           f"{connection_problem(exc)}") from exc
    try:
        return resp.status, json.loads(resp.data or b"null")
    except ValueError:
        return resp.status, None


def _message(body: Any, status: int) -> str:
    """The API's Status message, never a Python repr of the answer."""
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return str(body["message"])
    return f"HTTP {status}"


def run(args: argparse.Namespace) -> int:
    if args.migrate:
        if args.selector is not None or args.taint is not None or args.sources:
            raise UsageError("--migrate takes no selector, taint or --from: it moves every draco rule")
        from operators.cli.taint_migrate import migrate

        api = kube_api()
        migrate(lambda method, path, body: _call(api, method, path, body), dry_run=args.dry_run,
                timeout=max(args.migrate_timeout, 0.0))
        return 0
    if args.selector is None or args.taint is None:
        raise UsageError("give a SELECTOR and a taint KEY[=VALUE]:EFFECT[-] (or --migrate)")
    selector = parse_selector(args.selector)
    key, value, effect, remove = parse_taint(args.taint)
    if not selector and not args.all_devices:
        raise UsageError("an empty selector taints every device of the cluster (upstream once evicted "
                         "every DRA pod this way); add --all if that is what you want")
    if selector and args.all_devices:
        raise UsageError(f"--all selects every device: give the selector '' instead of {args.selector!r}")
    if args.all_devices:
        selector = {"all": True}
    dry_run = args.dry_run or bool(args.sources)
    if remove:
        return _remove(selector, key, effect, args.name, dry_run, args.sources)
    name = check_name(args.name) if args.name else default_name(selector, key, effect)
    rule = rule_object(name, selector, key, value, effect)
    if args.sources:
        objects = load_objects(args.sources)
    else:
        objects, _ = load_cluster_objects(CLUSTER_SOURCES)
    seen = preview(objects, rule)
    sys.stdout.write(yaml.safe_dump(rule, sort_keys=False))
    verb = "evicts" if effect == "NoExecute" else "would evict with NoExecute"
    sys.stdout.write(f"# selects {len(seen['devices'])} device(s); {verb} {len(seen['pods'])} pod(s) "
                     f"in {len(seen['namespaces'])} namespace(s)\n")
    for pod in seen["pods"]:
        sys.stdout.write(f"#   {pod}\n")
    if dry_run:
        return 0
    if effect == "NoExecute" and seen["pods"] and not args.yes:
        if not sys.stdin.isatty():
            raise InputError("refusing to evict pods without confirmation: re-run with --yes")
        answer = input(f"Create {name} and evict {len(seen['pods'])} pod(s)? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            sys.stderr.write("aborted\n")
            return 1
    status, body = _call(kube_api(), "POST", RULES_PATH, rule)
    if status >= 300:
        raise InputError(f"cannot create DeviceTaintRule {name}: {_message(body, status)}")
    sys.stdout.write(f"devicetaintrule.resource.draco.dev/{name} created\n")
    return 0


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _matching_rules(rules: list[Any], selector: dict[str, Any], key: str, effect: str,
                    name: str | None) -> list[str]:
    # `--all` also removes a rule stored with the empty selector of before `all` existed
    same = [selector, {}] if selector == {"all": True} else [selector]
    out = []
    for r in rules:
        if not isinstance(r, dict) or r.get("kind", "DeviceTaintRule") != "DeviceTaintRule":
            continue
        meta = _obj(r.get("metadata"))
        spec = _obj(r.get("spec"))
        taint = _obj(spec.get("taint"))
        rule_name = meta.get("name")
        if (isinstance(rule_name, str) and (name is None or rule_name == name)
                and spec.get("deviceSelector") in same
                and taint.get("key") == key and taint.get("effect") == effect):
            out.append(rule_name)
    return out


def _remove(selector: dict[str, Any], key: str, effect: str, name: str | None, dry_run: bool,
            sources: list[str]) -> int:
    """Delete the matching rules; with --from the files stand for the cluster (a dry run)."""
    if sources:
        rules: list[Any] = load_objects(sources)
        api = None
    else:
        api = kube_api()
        status, body = _call(api, "GET", RULES_PATH)
        if status >= 300:
            raise InputError(f"cannot list DeviceTaintRules: {_message(body, status)}")
        items = body.get("items") if isinstance(body, dict) else None
        rules = items if isinstance(items, list) else []
    matches = _matching_rules(rules, selector, key, effect, name)
    if not matches:
        where = ", ".join(f"{k}={v}" for k, v in selector.items()) or "every device"
        raise InputError(f"no DeviceTaintRule with selector {where} and taint {key}:{effect}"
                         + (f" named {name}" if name else ""))
    for rule_name in matches:
        if not dry_run and api is not None:
            status, body = _call(api, "DELETE", f"{RULES_PATH}/{rule_name}")
            if status >= 300 and status != 404:
                raise InputError(f"cannot delete DeviceTaintRule {rule_name}: {_message(body, status)}")
        sys.stdout.write(f"devicetaintrule.resource.draco.dev/{rule_name} deleted"
                         f"{' (dry run)' if dry_run else ''}\n")
    return 0
