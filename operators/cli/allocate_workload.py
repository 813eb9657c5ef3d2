"""`draco allocate --workload NS/NAME`: what draco's devices check would answer Kueue.

The Workload (`kueue.x-k8s.io/v1beta2`) is read with the cluster (or from `--from`
files holding it, its ResourceClaimTemplates, Gangs, ResourceFlavors and the usual
devices, claims and nodes). Its pods (PodSets x templates) are searched as one gang,
in TAS's assignment, the Gang its pods' label names, or the cluster
(`operators.admission.decide`). Devices other Workloads' reservations keep
(their `resource.draco.dev/reservation` annotation) count as in use; a Workload that
carries a valid reservation of its own is answered from it, as the controller answers.

Output (`-o json`), exactly these keys:
  status         "ready" | "retry" | "rejected"
  message        what the check's message would say (what is short, or why never)
  members        PodSet -> pod index -> resourceClaims entry name -> allocation results
                 (`request`, `driver`, `pool`, `device`, ... as `--gang` prints them);
                 {} unless ready
  podSetUpdates  the check's podSetUpdates ([] unless ready)
Nothing is written; the exit code is 0 whatever the verdict.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from operators.admission.decide import decide, gang_from_objects
from operators.admission.reservation import Reservations, held_reservations, reservation_of
from operators.admission.workload import (
    KUEUE_GROUP,
    KUEUE_VERSION,
    Workload,
    WorkloadError,
    flavor_labels,
    parse_workload,
)
from operators.allocator import (
    DEFAULT_BUDGET_S,
    in_use_from_tracker,
    inventory_from_tracker,
    shares_from_tracker,
)
from operators.allocator.features import DEFAULT_GATES, FeatureGates, gated_inventory
from operators.allocator.nodes import NodeIndex
from operators.allocator.reserved import Reserved
from operators.cli.allocation_records import nodes_from
from operators.cli.inputs import ClusterError, UsageError, connection_problem, kube_api
from operators.cli.output import render_table, warn
from operators.model import NamespacedName
from operators.tracker import Tracker

KUEUE_KINDS = frozenset({"Workload", "AdmissionCheck", "ResourceFlavor", "ClusterQueue", "LocalQueue"})


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    md = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    assert isinstance(md, Mapping)
    return str(md.get("namespace") or ""), str(md.get("name") or "")


def find_workload(objects: Iterable[Mapping[str, Any]], key: NamespacedName) -> Workload:
    for obj in objects:
        if obj.get("kind") == "Workload" and _key(obj) == key:
            try:
                return parse_workload(obj)
            except WorkloadError as e:
                raise UsageError(f"Workload {key} {e}") from None
    raise UsageError(f"no Workload {key} in the input")


def other_reservations(objects: Iterable[Mapping[str, Any]], key: NamespacedName) -> Reservations:
    """The valid reservations of every other Workload of the input."""
    out = Reservations()
    for wl, r in held_reservations(objects):
        if (held := NamespacedName(wl.namespace, wl.name)) != key:
            out.hold(held, r)
    return out


def workload_document(tracker: Tracker, objects: Sequence[dict[str, Any]], key: NamespacedName,
                      budget_s: float = DEFAULT_BUDGET_S, gates: FeatureGates = DEFAULT_GATES) -> dict[str, Any]:
    """The devices check's verdict for the Workload, with GATES (the release `draco
    allocate` answers as)."""
    wl = find_workload(objects, key)
    own = reservation_of(wl)
    if own is not None and own.valid_for(wl):
        return {"status": "ready", "message": own.message, "members": own.members(),
                "podSetUpdates": list(own.pod_set_updates)}
    templates = {_key(o)[1]: o for o in objects
                 if o.get("kind") == "ResourceClaimTemplate" and _key(o)[0] == wl.namespace}
    flavors = flavor_labels([o for o in objects if o.get("kind") == "ResourceFlavor"])
    index = NodeIndex(gated_inventory(inventory_from_tracker(tracker), gates), nodes_from(objects, tracker))
    classes = {c.name: c for c in tracker.device_classes()}
    others = other_reservations(objects, key)
    in_use = Reserved(in_use_from_tracker(tracker), others.devices())
    d = decide(wl, index, classes, in_use, templates=templates, claims=tracker.claim,
               gangs=gang_from_objects(objects), flavor_nodes=flavors,
               shares=shares_from_tracker(tracker), budget_s=budget_s, features=gates)
    return {"status": d.status, "message": d.message,
            "members": d.members_json() if d.status == "ready" else {},
            "podSetUpdates": [dict(u) for u in d.pod_set_updates] if d.status == "ready" else []}


def workload_table(doc: Mapping[str, Any]) -> str:
    head = f"Workload: {doc['status']}\n  {doc['message']}"
    rows = []
    for pod_set, pods in doc["members"].items():
        for i, claims in pods.items():
            for entry, found in claims.items():
                devices = ", ".join(f"{r['request']}={r['pool']}/{r['device']}" for r in found)
                rows.append((pod_set, i, entry, devices))
    if not rows:
        return head + "\n"
    return head + "\n" + render_table(("podset", "pod", "claim", "devices"), rows)


def cluster_objects(key: NamespacedName) -> list[dict[str, Any]]:
    """What the live cluster adds for --workload: the Workloads (the one asked and the
    others' reservations), the namespace's ResourceClaimTemplates and Gangs, the
    ResourceFlavors. A kind the cluster does not serve is a warning (no Kueue: no
    Workload, which is then a usage error naming it)."""
    api = kube_api()
    kueue = f"/apis/{KUEUE_GROUP}/{KUEUE_VERSION}"
    lists = [("Workload", f"{kueue}/workloads", f"{KUEUE_GROUP}/{KUEUE_VERSION}"),
             ("ResourceFlavor", f"{kueue}/resourceflavors", f"{KUEUE_GROUP}/{KUEUE_VERSION}"),
             ("ResourceClaimTemplate", f"/apis/resource.k8s.io/v1/namespaces/{key.namespace}/resourceclaimtemplates",
              "resource.k8s.io/v1"),
             ("Gang", f"/apis/resource.draco.dev/v1alpha1/namespaces/{key.namespace}/gangs",
              "resource.draco.dev/v1alpha1")]
    out: list[dict[str, Any]] = []
    for kind, path, api_version in lists:
        try:
            method, url, headers, _, _ = api.param_serialize(
                "GET", path, header_params={"Accept": "application/json"}, auth_settings=["BearerToken"])
            resp = api.call_api(method, url, header_params=headers)
            resp.read()
        except Exception as exc:  # noqa: BLE001 - 404s and connection errors alike
            status = getattr(exc, "status", None)
            if status is not None:
                warn(f"cannot list {kind}s: {status}")
                continue
            raise ClusterError(f"cannot reach the cluster at {api.configuration.host}: "
                               f"{connection_problem(exc)}") from exc
        if resp.status >= 400:
            warn(f"cannot list {kind}s: HTTP {resp.status}")
            continue
        try:
            items = json.loads(resp.data or b"{}").get("items") or []
        except (ValueError, AttributeError):
            warn(f"cannot list {kind}s: the answer is not JSON")
            continue
        for item in items:
            if isinstance(item, dict):
                item.setdefault("kind", kind)
                item.setdefault("apiVersion", api_version)
                out.append(item)
    return out


__all__ = ["KUEUE_KINDS", "cluster_objects", "find_workload", "other_reservations",
           "workload_document", "workload_table"]
