"""When a Workload's pods arrive: which reserved devices each one gets.

A pod finds its reservation by what `Ready`'s podSetUpdates and Kueue put on it: the
annotation `resource.draco.dev/workload` (the Workload's name, in the pod's namespace)
and Kueue's label `kueue.x-k8s.io/podset`. It takes one reserved pod index of its
PodSet: the first whose own devices no claim holds yet, and with TAS (a nodeSelector
on `kubernetes.io/hostname`) one reserved on that node. Each of its claims then gets
exactly the allocation recorded for its resourceClaims entry; a claim several pods
name (a named claim) is allocated by the first and only reserved by the others.

This is what the allocator asks before it searches for such a pod (the hook is the
allocator's: `arrival` answers, it does not write).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from operators.admission.decide import WORKLOAD_ANNOTATION
from operators.admission.reservation import Reservation
from operators.admission.workload import HOSTNAME, PODSET_LABEL
from operators.model import DeviceID, NamespacedName, Pod


def workload_of(pod: Pod) -> NamespacedName | None:
    """The Workload whose reservation the pod was sent to, if any."""
    name = pod.meta.annotations.get(WORKLOAD_ANNOTATION)
    return NamespacedName(pod.meta.namespace, name) if name else None


def _devices(allocation: Mapping[str, Any]) -> set[DeviceID]:
    results = (allocation.get("devices") or {}).get("results") or []
    return {DeviceID(str(r.get("driver")), str(r.get("pool")), str(r.get("device")))
            for r in results if isinstance(r, Mapping) and not r.get("adminAccess") and not r.get("shareID")}


def arrival(reservation: Reservation, pod: Pod, held: Callable[[DeviceID], bool],
            ) -> dict[str, Mapping[str, Any]] | str:
    """Claim name -> the `status.allocation` to write for it, or why the pod has none.
    HELD: whether a claim holds the device already (a pod that came earlier)."""
    pod_set = pod.meta.labels.get(PODSET_LABEL)
    if not pod_set:
        return f"the pod has no {PODSET_LABEL} label: which PodSet it belongs to is unknown"
    pods = reservation.allocations.get(pod_set)
    if not isinstance(pods, Mapping):
        return f"the reservation has no PodSet {pod_set}"
    per_index: dict[str, set[DeviceID]] = {}
    for i, claims in pods.items():
        devs: set[DeviceID] = set()
        for a in claims.values() if isinstance(claims, Mapping) else ():
            if isinstance(a, Mapping):
                devs |= _devices(a)
        per_index[str(i)] = devs
    counts: dict[DeviceID, int] = {}
    for devs in per_index.values():
        for d in devs:
            counts[d] = counts.get(d, 0) + 1
    own = {i: {d for d in devs if counts[d] == 1} for i, devs in per_index.items()}  # not shared

    def taken(i: str) -> bool:
        return any(held(d) for d in own.get(i, ()))

    found = reservation.pod(pod_set, taken, pod.node_selector.get(HOSTNAME))
    if found is None:
        return f"every reserved pod of PodSet {pod_set} has come already"
    _, entries = found
    out: dict[str, Mapping[str, Any]] = {}
    for pc in pod.resource_claims:
        name = pod.claim_name(pc)
        if name is None:
            return f"the claim of entry {pc.name} is not generated yet"
        allocation = entries.get(pc.name)
        if not isinstance(allocation, Mapping):
            return f"entry {pc.name} has no reserved devices"
        out[name] = allocation
    return out


__all__ = ["arrival", "workload_of"]
