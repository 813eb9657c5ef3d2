"""`draco devices`: the unified device view upstream never built (a KEP-5027 non-goal).

One row per device: what its driver published, what ResourceSlicePatches changed, which
taints (from slices, draco's DeviceTaintRules and upstream's `resource.k8s.io` ones) it
carries, where it can be used, what partitions consume of their pool's counter sets
(with each counter's value, allocated and left), and which devices draco leaves alone
because they use fields it does not support. Against a cluster, `cluster` says what the API
server does about device taints itself and who evicts for which taints.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from operators.admission.reservation import held_reservations
from operators.admission.workload import KUEUE_GROUP, KUEUE_VERSION
from operators.cli.output import emit, render_table
from operators.cli.state import add_source_options, load_state, rfc3339, tracker_errors
from operators.cli.upstream_taints import add_mode_option, add_upstream, describe
from operators.model import Device, DeviceTaint
from operators.model.quantity import Quantity
from operators.tracker import Tracker
from operators.tracker.gangs import GangKey, GangMembers, gang_overlay
from operators.tracker.views import DeviceView, PoolStatus


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "devices",
        help="the device view: attributes, capacity, taints, and the patches and rules that shaped them",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_source_options(parser, formats=("table", "wide", "json", "yaml"))
    add_mode_option(parser)
    parser.set_defaults(func=run)


def _taint_record(t: DeviceTaint) -> dict[str, Any]:
    return {"key": t.key, "value": t.value, "effect": t.effect,
            "timeAdded": rfc3339(t.time_added), "source": t.source}


def device_record(view: DeviceView) -> dict[str, Any]:
    placement = view.placement
    return {
        "driver": view.driver,
        "pool": view.pool,
        "device": view.name,
        "slice": view.device.slice_name if view.device is not None else None,
        "node": placement.node_name or None,
        "nodeSelector": placement.node_selector.to_api() if placement.node_selector else None,
        "attributes": {name: view.attributes[name].to_api() for name in sorted(view.attributes)},
        "capacity": {name: {"value": view.capacity[name]} for name in sorted(view.capacity)},
        "taints": [_taint_record(t) for t in view.taints],
        "patchedBy": list(view.patched_by),
        **_device_extras(view.device),
    }


def _device_extras(device: Device | None) -> dict[str, Any]:
    """What a partition consumes, binding conditions, and fields draco does not model
    (such a device is never allocated by draco; the record says which field). Each key
    only where it applies, so the records of plain devices keep their shape."""
    out: dict[str, Any] = {}
    if device is None:
        return out
    if device.consumes_counters:
        out["consumesCounters"] = [
            {"counterSet": c.counter_set, "counters": {n: str(q) for n, q in sorted(c.counters.items())}}
            for c in device.consumes_counters]
    if device.unsupported:
        out["unsupported"] = list(device.unsupported)
    if device.binding_conditions or device.binding_failure_conditions:
        out["bindingConditions"] = list(device.binding_conditions)
        out["bindingFailureConditions"] = list(device.binding_failure_conditions)
    return out


def counter_records(tracker: Tracker) -> list[dict[str, Any]]:
    """Per counter of every pool's counter sets: its value, what the allocated devices
    of the pool consume (admin access consumes nothing, as upstream), and what is left.
    A negative `left` means the driver shrank a counter under allocated partitions:
    upstream then allocates none of the pool's partitions."""
    out: list[dict[str, Any]] = []
    for pool in sorted(tracker.pools(), key=lambda p: p.id):
        slices = [s for n in pool.slices if (s := tracker.resource_slice(n)) is not None]
        sets = [(cs, s.name) for s in slices for cs in s.shared_counters]
        if not sets:
            continue
        used: dict[tuple[str, str], Fraction] = {}
        for s in slices:
            for d in s.devices:
                if d.consumes_counters and tracker.is_allocated(d.id):
                    for cc in d.consumes_counters:
                        for n, q in cc.counters.items():
                            used[(cc.counter_set, n)] = used.get((cc.counter_set, n), Fraction(0)) + q.value
        for cs, slice_name in sorted(sets, key=lambda x: x[0].name):
            for n, q in sorted(cs.counters.items()):
                consumed = used.get((cs.name, n), Fraction(0))
                out.append({"driver": pool.id.driver, "pool": pool.id.pool, "slice": slice_name,
                            "counterSet": cs.name, "counter": n, "value": str(q),
                            "allocated": str(Quantity(consumed, q.format)),
                            "left": str(Quantity(q.value - consumed, q.format))})
    return out


def duplicate_records(tracker: Tracker, pool: PoolStatus) -> list[dict[str, Any]]:
    """Devices of an invalid pool that repeat a name already shown: the tracker keeps
    one device per name, but a person fixing the pool needs to see every copy. They are
    shown as published (no patches or rules apply to a device upstream cannot use)."""
    shown: set[str] = set()
    out: list[dict[str, Any]] = []
    for slice_name in sorted(pool.slices):
        published = tracker.resource_slice(slice_name)
        if published is None:
            continue
        for device in published.devices:
            if device.name not in shown:
                shown.add(device.name)
                continue
            placement = device.placement
            out.append({
                "driver": device.driver, "pool": device.pool, "device": device.name,
                "slice": slice_name,
                "node": placement.node_name or None,
                "nodeSelector": placement.node_selector.to_api() if placement.node_selector else None,
                "attributes": {n: device.attributes[n].to_api() for n in sorted(device.attributes)},
                "capacity": {n: {"value": device.capacity[n]} for n in sorted(device.capacity)},
                "taints": [_taint_record(t) for t in device.taints],
                "patchedBy": [],
            })
    return out


def overlay_errors(tracker: Tracker) -> list[dict[str, str]]:
    """Error records overlays keep (faulty patch CEL, say) beside the parse errors."""
    records: list[dict[str, str]] = []
    for overlay in tracker.overlays:
        report = getattr(overlay, "error_records", None)
        if callable(report):
            records.extend(report())
    return records


def gang_holdings(tracker: Tracker) -> dict[str, dict[str, Any]]:
    """Per gang (`Kind NS/NAME`): its minCount (None when the gang object is missing or
    unreadable), its members, and the devices its members' claims hold; claims reserved
    for a PodGroup (KEP-5729) count for that PodGroup."""
    gangs = gang_overlay(tracker)
    members = GangMembers()
    members.rescan(tracker)
    held: dict[GangKey, set[str]] = {}
    for key, pods in members.pods.items():
        devices = held.setdefault(key, set())
        for pkey in pods:
            pod = tracker.pod(pkey)
            for ckey in pod.claim_keys() if pod is not None else ():
                devices.update(str(d) for d in tracker.claim_devices(ckey))
    for claim in tracker.claims():
        for ref in claim.reserved_for:
            if ref.resource == "podgroups" and ref.api_group == "scheduling.k8s.io":
                key = ("PodGroup", claim.namespace, ref.name)
                held.setdefault(key, set()).update(str(d) for d in tracker.claim_devices(claim.meta.key))
    out: dict[str, dict[str, Any]] = {}
    for key in sorted(set(held) | (set(gangs.gangs) if gangs is not None else set())):
        gang = gangs.gang(*key) if gangs is not None else None
        out[f"{key[0]} {key[1]}/{key[2]}"] = {
            "minCount": gang.min_count if gang is not None else None,
            "members": sorted(f"{k.namespace}/{k.name}" for k in members.pods.get(key, ())),
            "devices": sorted(held.get(key, ())),
        }
    return out


# Kueue Workloads: the view names the Workload draco's devices check keeps a device for
# (`draco run --admission-check`; the reservation annotation on the Workload), as the
# device's `workload` and in `workloads`, added only where a reservation keeps devices.


def workload_reservations(objects: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per Kueue Workload (`NS/NAME`) whose devices draco's check keeps: when, the
    devices (`driver/pool/device`), how many pods they are for, and the check's message.
    Only reservations the controller honours (valid for the Workload's admission, the
    Workload not over): a stale annotation keeps nothing and is not shown."""
    out: dict[str, dict[str, Any]] = {}
    for wl, r in held_reservations(objects):
        pods = sum(len(p) for p in r.allocations.values() if isinstance(p, Mapping))
        out[f"{wl.namespace}/{wl.name}"] = {
            "reservedAt": r.reserved_at, "devices": sorted(str(d) for d in r.devices), "pods": pods,
            "message": r.message}
    return out


def device_document(tracker: Tracker, workloads: Iterable[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """WORKLOADS: Kueue Workload objects, whose reservations the document shows."""
    records = [device_record(v) for v in tracker.devices()]
    gangs = gang_holdings(tracker)
    by_device = {d: name for name, g in gangs.items() for d in g["devices"]}
    reserved = workload_reservations(workloads)
    for_workload = {d: name for name, w in reserved.items() for d in w["devices"]}
    for r in records:
        device_id = f"{r['driver']}/{r['pool']}/{r['device']}"
        gang = by_device.get(device_id)
        if gang is not None:
            r["gang"] = gang  # held for a gang's member: its devices go together
        workload = for_workload.get(device_id)
        if workload is not None:
            r["workload"] = workload  # kept for a Kueue Workload by draco's devices check
    for pool in tracker.pools():
        if not pool.valid:
            records += duplicate_records(tracker, pool)
    records.sort(key=lambda r: (r["driver"], r["pool"], r["device"], r["slice"] or ""))
    pools = [
        {
            "driver": p.id.driver,
            "pool": p.id.pool,
            "complete": p.usable,
            "reason": None if p.usable else (p.reason or None),
        }
        for p in sorted(tracker.pools(), key=lambda p: p.id)
    ]
    # the view reads Workloads itself (their reservations); the tracker does not track them
    errors = [e for e in tracker_errors(tracker) if not e["object"].startswith("Workload/")]
    errors += overlay_errors(tracker)
    doc: dict[str, Any] = {"devices": records, "pools": pools}
    counters = counter_records(tracker)
    if counters:  # only clusters with partitionable devices have them
        doc["counters"] = counters
    if gangs:  # only clusters with gangs have them
        doc["gangs"] = gangs
    if reserved:  # only clusters where draco's devices check keeps devices have them
        doc["workloads"] = reserved
    doc["errors"] = sorted(errors, key=lambda r: (r["object"], r["message"]))
    return doc


def api_value(value: Any) -> str:
    """An attribute value as kubectl prints it: `true`, not Python's `True`."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _short_name(name: str, driver: str) -> str:
    domain, _, short = name.rpartition("/")
    return short if domain == driver else name


def _short_attrs(record: dict[str, Any]) -> str:
    return ",".join(f"{_short_name(name, record['driver'])}={api_value(next(iter(value.values())))}"
                    for name, value in record["attributes"].items())


def _taints(record: dict[str, Any]) -> str:
    return ",".join(f"{_short_name(t['key'], record['driver'])}{'=' + t['value'] if t['value'] else ''}"
                    f":{t['effect']}" for t in record["taints"])


def table(doc: dict[str, Any], wide: bool = False) -> str:
    """kubectl-style: the default fits a terminal (patches counted); `-o wide` names
    the patches and adds attributes and capacity, which can be long."""
    headers = ["driver", "pool", "device", "node", "taints"]
    headers += ["patched by", "attributes", "capacity", "consumes"] if wide else ["patches"]
    with_health = any("health" in d for d in doc["devices"])
    if with_health:
        headers.append("health")
    with_workload = any("workload" in d for d in doc["devices"])
    if with_workload:
        headers.append("reserved for")
    rows = []
    for d in doc["devices"]:
        row = [d["driver"], d["pool"], d["device"],
               d["node"] or ("<selector>" if d["nodeSelector"] else "<all>"), _taints(d)]
        if not wide:
            row.append(len(d["patchedBy"]))
        else:
            row += [",".join(d["patchedBy"]), _short_attrs(d),
                    ",".join(f"{_short_name(k, d['driver'])}={v['value']}" for k, v in d["capacity"].items()),
                    ";".join(f"{c['counterSet']}:" + ",".join(f"{n}={v}" for n, v in c["counters"].items())
                             for c in d.get("consumesCounters", []))]
        if with_health:
            row.append(",".join(f"{h['policy']}:{h['state']}" for h in d.get("health", [])))
        if with_workload:
            row.append(d.get("workload", ""))
        rows.append(row)
    out = render_table(headers, rows) if rows else "No devices.\n"
    if doc.get("counters"):
        out += "\nCounter sets:\n" + render_table(
            ["driver", "pool", "counter set", "counter", "value", "allocated", "left"],
            [[c["driver"], c["pool"], c["counterSet"], c["counter"], c["value"], c["allocated"],
              c["left"]] for c in doc["counters"]])
    unsupported = [d for d in doc["devices"] if d.get("unsupported")]
    if unsupported:
        out += "\nNot allocated by draco (fields it does not support):\n" + "".join(
            f"  {d['driver']}/{d['pool']}/{d['device']}: {', '.join(d['unsupported'])}\n"
            for d in unsupported)
    if doc.get("gangs"):
        out += "\nGangs:\n" + render_table(
            ["gang", "min", "members", "devices held"],
            [[name, "-" if g["minCount"] is None else g["minCount"], len(g["members"]),
              len(g["devices"])] for name, g in doc["gangs"].items()])
    if doc.get("workloads"):
        out += "\nReserved for Kueue Workloads (draco's devices check):\n" + render_table(
            ["workload", "pods", "devices", "reserved at"],
            [[name, w["pods"], len(w["devices"]), w["reservedAt"]] for name, w in doc["workloads"].items()])
    bad_pools = [p for p in doc["pools"] if not p["complete"]]
    if bad_pools:
        out += "\nIncomplete pools:\n" + "".join(
            f"  {p['driver']}/{p['pool']}: {p['reason']}\n" for p in bad_pools
        )
    if doc["errors"]:
        out += "\nErrors:\n" + "".join(f"  {e['object']}: {e['message']}\n" for e in doc["errors"])
    if doc.get("cluster"):
        out += describe(doc["cluster"])
    return out


def cluster_workloads() -> list[dict[str, Any]]:
    """Kueue's Workloads of the live cluster, for their reservations; none (quietly)
    where Kueue is not installed or they cannot be listed: the device view stands
    without them."""
    import json

    from operators.cli.inputs import kube_api

    api = kube_api()
    method, url, headers, _, _ = api.param_serialize(
        "GET", f"/apis/{KUEUE_GROUP}/{KUEUE_VERSION}/workloads", header_params={"Accept": "application/json"},
        auth_settings=["BearerToken"])
    try:
        resp = api.call_api(method, url, header_params=headers)
        resp.read()
        if resp.status >= 400:
            return []
        items = json.loads(resp.data or b"{}").get("items") or []
    except Exception:  # noqa: BLE001 - no Kueue (404), no permission, a bad answer: no reservations
        return []
    return [{"kind": "Workload", **item} for item in items if isinstance(item, dict)]


def run(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime

    from operators.cli import health

    tracker, objects = load_state(args)
    cluster = add_upstream(args, tracker, objects)
    workloads = objects if args.sources else cluster_workloads()
    doc = device_document(tracker, workloads)
    # each device's health signals and the rule they caused, where policies exist
    policies = objects if args.sources else objects + health.cluster_policies(quiet=True)
    by_device = health.by_device(policies, datetime.now(UTC))
    if by_device:
        for record in doc["devices"]:
            record["health"] = by_device.get((record["driver"], record["pool"], record["device"]), [])
    if cluster is not None:
        doc["cluster"] = cluster  # only against a cluster: files say nothing about servers
    if args.output == "wide":
        emit(doc, "table", lambda d: table(d, wide=True))
    else:
        emit(doc, args.output, table)
    return 0
