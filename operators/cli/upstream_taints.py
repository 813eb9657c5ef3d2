"""Upstream's own device taints in the view commands (`draco devices`, `evictions`, `allocate`).

Upstream's DeviceTaintRules (`resource.k8s.io`) are a taint source beside draco's: read
from `--from` files (told apart from draco's rules by apiVersion) or listed from the
cluster at the version it serves. Against a cluster, the commands also report what
discovery found (does the API server keep device taints, which DeviceTaintRule
version it serves) and so who evicts for slice taints under `--slice-taints`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from operators.cli.inputs import ClusterError, connection_problem, kube_api
from operators.cli.output import warn
from operators.eviction.decisions import SLICE_TAINT_MODES, Ownership, ownership_for
from operators.tracker import Tracker
from operators.tracker.taint_rules import UPSTREAM_KIND, ensure_upstream_overlay, is_upstream


def add_mode_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--slice-taints", choices=SLICE_TAINT_MODES, default="auto",
                        help="as `draco run --slice-taints`: who evicts for slice taints and upstream's "
                             "rules (auto: what discovery finds; with --from files, draco)")


async def _discover(probe: bool) -> Any:
    from operators.kube.client import KubeClient
    from operators.kube.discovery import discover

    client = KubeClient(retries=1, timeout=15.0)
    try:
        return await discover(client, probe=probe)
    finally:
        await client.close()


def discover_cluster(*, probe: bool = True) -> Any:
    """The cluster's Capabilities (operators.kube.discovery), or a ClusterError.
    Without `probe` nothing is written, not even a dry run (the version decides)."""
    try:
        return asyncio.run(_discover(probe))
    except Exception as exc:  # noqa: BLE001 - connection problems, named in one line
        raise ClusterError(f"cannot ask the cluster what it does about device taints: "
                           f"{connection_problem(exc)}") from exc


def _list_rules(version: str) -> list[dict[str, Any]]:
    api = kube_api()
    path = f"/apis/resource.k8s.io/{version}/devicetaintrules"
    verb, url, headers, _, _ = api.param_serialize(
        "GET", path, header_params={"Accept": "application/json"}, auth_settings=["BearerToken"])
    try:
        resp = api.call_api(verb, url, header_params=headers)
        resp.read()
    except Exception as exc:  # noqa: BLE001 - a refused list is a warning, the view still shows
        warn(f"cannot list {path}: {connection_problem(exc)}")
        return []
    if resp.status >= 400:
        warn(f"cannot list {path}: HTTP {resp.status}")
        return []
    items = (json.loads(resp.data or b"{}") or {}).get("items") or []
    return [{"kind": "DeviceTaintRule", "apiVersion": f"resource.k8s.io/{version}", **i}
            for i in items if isinstance(i, dict)]


def add_upstream(args: argparse.Namespace, tracker: Tracker,
                 objects: list[dict[str, Any]], *, probe: bool = True) -> dict[str, Any] | None:
    """Feed upstream's rules into `tracker`; returns the cluster record (None for files).
    Without `probe` the cluster sees only reads (`draco allocate` must not write)."""
    ensure_upstream_overlay(tracker)
    mode = getattr(args, "slice_taints", "auto")
    if args.sources:
        rules = [o for o in objects if isinstance(o, dict)
                 and o.get("kind") in ("DeviceTaintRule", UPSTREAM_KIND) and is_upstream(o)]
        record = None
    else:
        caps = discover_cluster(probe=probe)
        rules = _list_rules(caps.rule_version) if caps.rule_version else []
        ownership = ownership_for(mode, caps.upstream_evicts, caps.server_version)
        record = {**caps.to_record(), "sliceTaints": mode,
                  "sliceTaintsEvictedBy": "upstream" if ownership.slice_taints else "draco",
                  "upstreamRulesEvictedBy": "upstream" if ownership.upstream_rules else "draco",
                  "extendedResourcePodsEvictedBy": "upstream" if ownership.extended_claims and
                  ownership.slice_taints else "draco"}
    with tracker.batch():
        for obj in rules:
            tracker.apply({"type": "ADDED", "object": obj})
    return record


def ownership_of(args: argparse.Namespace, record: dict[str, Any] | None) -> Ownership:
    """Who evicts for what; with files (no discovery) `auto` means draco."""
    return ownership_for(getattr(args, "slice_taints", "auto"), bool(record and record["upstreamEvicts"]),
                         record.get("serverVersion") if record else None)


def describe(record: dict[str, Any]) -> str:
    """The cluster record as a few lines under a table."""
    kept = "keeps" if record["keepsDeviceTaints"] else "drops"
    how = "a dry-run probe" if record["detectedBy"] == "probe" else "its version (the probe was refused)"
    versions = ", ".join(f"resource.k8s.io/{v}" for v in record["deviceTaintRuleVersions"]) or "none"
    server = record["serverVersion"] or "unknown version"
    kind = "draco's embedded server" if record["embedded"] else "API server"
    return (f"\nCluster: {kind} {server} {kept} device taints (by {how}); upstream DeviceTaintRule: {versions}.\n"
            f"  slice taints evicted by {record['sliceTaintsEvictedBy']}, upstream rules by "
            f"{record['upstreamRulesEvictedBy']} (--slice-taints={record['sliceTaints']}); "
            "draco's own rules by draco.\n")
