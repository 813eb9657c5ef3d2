"""Where a Workload's devices are kept between `Ready` and its pods: the reservation.

Kept in the API, on the Workload itself, as the annotation
`resource.draco.dev/reservation` (JSON, `Reservation.to_json`), written before the
check turns `Ready`. Why there: it lives and dies with the Workload (deleted with it,
no garbage to collect), a restarted or newly elected draco finds every reservation in
its first listing of Workloads, and the write carries the Workload's resourceVersion,
so two deciders cannot both reserve. It names the Workload's UID and a fingerprint of
its admission: a reservation of an earlier admission (Kueue evicted and re-admitted
it, TAS chose other nodes) is stale and never reused.

A Workload never gets `Ready` with two placements: while a valid reservation is on it,
the check is only ever set from that reservation. Two Workloads never share a device:
every decision counts the devices of all other reservations as in use
(`Reservations`, rebuilt from the annotations), and decisions run one at a time.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from operators.admission.workload import Workload, WorkloadError, parse_workload
from operators.model import DeviceID, NamespacedName

RESERVATION_ANNOTATION = "resource.draco.dev/reservation"


def admission_fingerprint(wl: Workload) -> str:
    """Short hash of `status.admission`: changes whenever Kueue admits anew."""
    text = json.dumps(wl.admission or {}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Reservation:
    uid: str
    admission: str
    reserved_at: str  # RFC 3339
    devices: frozenset[DeviceID]
    # PodSet -> pod index -> resourceClaims entry -> `status.allocation` as the API writes it
    allocations: Mapping[str, Any] = field(default_factory=dict)
    nodes: Mapping[str, Any] = field(default_factory=dict)  # PodSet -> pod index -> node
    pod_set_updates: tuple[Mapping[str, Any], ...] = ()
    message: str = ""

    def to_json(self) -> str:
        return json.dumps({
            "uid": self.uid, "admission": self.admission, "reservedAt": self.reserved_at,
            "devices": sorted([d.driver, d.pool, d.device] for d in self.devices),
            "allocations": self.allocations, "nodes": self.nodes,
            "podSetUpdates": list(self.pod_set_updates), "message": self.message,
        }, sort_keys=True, separators=(",", ":"))

    def valid_for(self, wl: Workload) -> bool:
        return self.uid == wl.uid and self.admission == admission_fingerprint(wl)

    def members(self) -> dict[str, dict[str, dict[str, list[Any]]]]:
        """PodSet -> pod index -> entry -> results (`draco allocate --workload`'s members)."""
        return {ps: {i: {e: list((a.get("devices") or {}).get("results") or []) for e, a in claims.items()}
                     for i, claims in pods.items()} for ps, pods in self.allocations.items()}

    def pod(self, pod_set: str, taken: Callable[[str], bool], node: str | None = None,
            ) -> tuple[str, Mapping[str, Any]] | None:
        """The reserved pod index a newly arrived pod of POD_SET takes, with its entries'
        allocations: the first index TAKEN does not rule out (its devices are allocated to
        a pod already), reserved on NODE when the pod is bound to one (TAS's nodeSelector).
        Pods of one PodSet are alike, so which index a pod takes does not matter."""
        pods = self.allocations.get(pod_set)
        if not isinstance(pods, Mapping):
            return None
        where = self.nodes.get(pod_set)
        where = where if isinstance(where, Mapping) else {}
        for i in sorted(pods, key=lambda x: (len(x), x)):
            if taken(i) or (node is not None and where.get(i) != node):
                continue
            return i, pods[i]
        return None


def parse_reservation(text: str) -> Reservation | None:
    """The annotation's value; None when it cannot be read (then it is not honoured)."""
    try:
        d = json.loads(text)
        devices = frozenset(DeviceID(str(a), str(b), str(c)) for a, b, c in d["devices"])
        return Reservation(str(d["uid"]), str(d["admission"]), str(d.get("reservedAt") or ""),
                           devices, d.get("allocations") or {}, d.get("nodes") or {},
                           tuple(d.get("podSetUpdates") or ()), str(d.get("message") or ""))
    except (ValueError, KeyError, TypeError):
        return None


def reservation_of(wl: Workload) -> Reservation | None:
    text = wl.annotations.get(RESERVATION_ANNOTATION)
    return parse_reservation(text) if text else None


def held_reservations(objects: Iterable[Mapping[str, Any]]) -> list[tuple[Workload, Reservation]]:
    """Every reservation that keeps devices now, with its Workload, from plain objects
    (the Workloads of a listing or a file): valid for the Workload's current admission
    and the Workload not over, as the controller honours them. Unreadable Workloads and
    annotations keep nothing."""
    out = [held for obj in objects if obj.get("kind") == "Workload"
           and (held := honoured_reservation(obj)) is not None]
    return sorted(out, key=lambda x: (x[0].namespace, x[0].name))


def honoured_reservation(obj: Mapping[str, Any]) -> tuple[Workload, Reservation] | None:
    """The Workload OBJ and its reservation when that keeps devices now: valid for the
    Workload's current admission, and the Workload not over. None for an unreadable
    Workload or annotation."""
    try:
        wl = parse_workload(obj)
    except WorkloadError:
        return None
    r = reservation_of(wl)
    return (wl, r) if r is not None and r.valid_for(wl) and wl.over is None else None


class Reservations:
    """The devices every Workload's reservation keeps, by Workload. Pure bookkeeping."""

    def __init__(self) -> None:
        self._by_workload: dict[NamespacedName, Reservation] = {}
        self._devices: dict[DeviceID, NamespacedName] = {}

    def __len__(self) -> int:
        return len(self._by_workload)

    def __contains__(self, key: object) -> bool:
        return key in self._by_workload

    def get(self, key: NamespacedName) -> Reservation | None:
        return self._by_workload.get(key)

    def items(self) -> Iterator[tuple[NamespacedName, Reservation]]:
        yield from list(self._by_workload.items())

    def hold(self, key: NamespacedName, r: Reservation) -> None:
        self.release(key)
        self._by_workload[key] = r
        for d in r.devices:
            self._devices.setdefault(d, key)

    def release(self, key: NamespacedName) -> Reservation | None:
        r = self._by_workload.pop(key, None)
        if r is not None:
            for d in r.devices:
                if self._devices.get(d) == key:
                    del self._devices[d]
                    other = next((k for k, o in self._by_workload.items() if d in o.devices), None)
                    if other is not None:
                        self._devices[d] = other
        return r

    def holder(self, device: DeviceID) -> NamespacedName | None:
        return self._devices.get(device)

    def devices(self, but: NamespacedName | None = None) -> frozenset[DeviceID]:
        """Every reserved device, except those only BUT's reservation keeps."""
        if but is None or but not in self._by_workload:
            return frozenset(self._devices)
        return frozenset(d for d, k in self._devices.items() if k != but)


__all__ = ["RESERVATION_ANNOTATION", "Reservation", "Reservations", "admission_fingerprint",
           "held_reservations", "parse_reservation", "reservation_of"]
