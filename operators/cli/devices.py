"""`draco devices`: the unified device view upstream never built (a KEP-5027 non-goal).

One row per device: what its driver published, what ResourceSlicePatches changed, which
taints (from slices and DeviceTaintRules) it carries, and where it can be used.
"""

from __future__ import annotations

import argparse
from typing import Any

from operators.cli.output import emit, render_table
from operators.cli.state import add_source_options, load_state, rfc3339, tracker_errors
from operators.tracker import Tracker
from operators.tracker.views import DeviceView


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "devices",
        help="the device view: attributes, capacity, taints, and the patches and rules that shaped them",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_source_options(parser)
    parser.set_defaults(func=run)


def device_record(view: DeviceView) -> dict[str, Any]:
    placement = view.placement
    return {
        "driver": view.driver,
        "pool": view.pool,
        "device": view.name,
        "node": placement.node_name or None,
        "nodeSelector": placement.node_selector.to_api() if placement.node_selector else None,
        "attributes": {name: view.attributes[name].to_api() for name in sorted(view.attributes)},
        "capacity": {name: {"value": view.capacity[name]} for name in sorted(view.capacity)},
        "taints": [
            {
                "key": t.key,
                "value": t.value,
                "effect": t.effect,
                "timeAdded": rfc3339(t.time_added),
                "source": t.source,
            }
            for t in view.taints
        ],
        "patchedBy": list(view.patched_by),
    }


def overlay_errors(tracker: Tracker) -> list[dict[str, str]]:
    """Error records overlays keep (faulty patch CEL, say) beside the parse errors."""
    records: list[dict[str, str]] = []
    for overlay in tracker.overlays:
        report = getattr(overlay, "error_records", None)
        if callable(report):
            records.extend(report())
    return records


def device_document(tracker: Tracker) -> dict[str, Any]:
    views = sorted(tracker.devices(), key=lambda v: v.id)
    pools = [
        {
            "driver": p.id.driver,
            "pool": p.id.pool,
            "complete": p.usable,
            "reason": None if p.usable else (p.reason or None),
        }
        for p in sorted(tracker.pools(), key=lambda p: p.id)
    ]
    errors = tracker_errors(tracker) + overlay_errors(tracker)
    return {
        "devices": [device_record(v) for v in views],
        "pools": pools,
        "errors": sorted(errors, key=lambda r: (r["object"], r["message"])),
    }


def _short_attrs(record: dict[str, Any]) -> str:
    parts = []
    for name, value in record["attributes"].items():
        domain, _, short = name.rpartition("/")
        label = short if domain == record["driver"] else name
        parts.append(f"{label}={next(iter(value.values()))}")
    return ",".join(parts)


def table(doc: dict[str, Any]) -> str:
    rows = [
        (
            d["driver"], d["pool"], d["device"],
            d["node"] or ("<selector>" if d["nodeSelector"] else "<all>"),
            _short_attrs(d),
            ",".join(f"{k.rpartition('/')[2]}={v['value']}" for k, v in d["capacity"].items()),
            ",".join(f"{t['key']}{'=' + t['value'] if t['value'] else ''}:{t['effect']}"
                     for t in d["taints"]),
            ",".join(d["patchedBy"]),
        )
        for d in doc["devices"]
    ]
    out = render_table(
        ("driver", "pool", "device", "node", "attributes", "capacity", "taints", "patched by"), rows
    )
    bad_pools = [p for p in doc["pools"] if not p["complete"]]
    if bad_pools:
        out += "\nIncomplete pools:\n" + "".join(
            f"  {p['driver']}/{p['pool']}: {p['reason']}\n" for p in bad_pools
        )
    if doc["errors"]:
        out += "\nErrors:\n" + "".join(f"  {e['object']}: {e['message']}\n" for e in doc["errors"])
    return out


def run(args: argparse.Namespace) -> int:
    tracker, _ = load_state(args)
    emit(device_document(tracker), args.output, table)
    return 0
