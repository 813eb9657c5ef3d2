"""Who uses which device: claims, pods, and the allocations that tie claims to devices.

Kept apart from the device side of the tracker because nothing here depends on slices,
pools or overlays: a claim update touches only the devices of its allocation, a pod
update only its own claim references. The one thing the device side must hear about
is a device's first or last allocation (an allocated device stays in the universe even
when its slice is gone), which `put_claim` and `remove_claim` return.
"""

from __future__ import annotations

from collections.abc import Iterable

from operators.model import DeviceID, NamespacedName, Pod, ResourceClaim
from operators.tracker.change import ChangeBuilder
from operators.tracker.views import Allocation

# (devices that gained their first allocation, devices that lost their last one)
Moved = tuple[set[DeviceID], set[DeviceID]]
_UNMOVED: Moved = (set(), set())


class UsageIndex:
    """The claims and pods the tracker knows, indexed both ways.

    The dicts are read directly by the `Tracker` (never rebound, so aliases stay valid).
    """

    __slots__ = ("claims", "pods", "allocs", "claim_devices", "pod_claims", "claim_ref_pods")

    def __init__(self) -> None:
        self.claims: dict[NamespacedName, ResourceClaim] = {}
        self.pods: dict[NamespacedName, Pod] = {}
        self.allocs: dict[DeviceID, dict[NamespacedName, tuple[Allocation, ...]]] = {}
        self.claim_devices: dict[NamespacedName, frozenset[DeviceID]] = {}
        self.pod_claims: dict[NamespacedName, tuple[NamespacedName, ...]] = {}
        self.claim_ref_pods: dict[NamespacedName, set[NamespacedName]] = {}

    # ------------------------------------------------------------------ updates

    def put_claim(self, claim: ResourceClaim, ch: ChangeBuilder) -> Moved:
        key = claim.meta.key
        old = self.claims.get(key)
        self.claims[key] = claim
        if old is not claim and old != claim:
            ch.claims.add(key)
        return self._set_allocations(key, claim, ch)

    def remove_claim(self, key: NamespacedName, ch: ChangeBuilder) -> Moved:
        if self.claims.pop(key, None) is not None:
            ch.claims.add(key)
        return self._set_allocations(key, None, ch)

    def put_pod(self, pod: Pod, ch: ChangeBuilder) -> None:
        key = pod.meta.key
        old = self.pods.get(key)
        self.pods[key] = pod
        if old is not pod and old != pod:
            ch.pods.add(key)
        self._set_pod_claims(key, pod.claim_keys())

    def remove_pod(self, key: NamespacedName, ch: ChangeBuilder) -> None:
        if self.pods.pop(key, None) is not None:
            ch.pods.add(key)
        self._set_pod_claims(key, ())

    def _set_allocations(
        self, key: NamespacedName, claim: ResourceClaim | None, ch: ChangeBuilder
    ) -> Moved:
        new: dict[DeviceID, tuple[Allocation, ...]] = {}
        if claim is not None and claim.allocation is not None:
            grouped: dict[DeviceID, list[Allocation]] = {}
            for r in claim.allocation.results:
                grouped.setdefault(r.id, []).append(Allocation(
                    key, r.request, r.admin_access, r.share_id,
                    tuple(r.consumed_capacity.items()) if r.consumed_capacity else ()))
            new = {d: tuple(a) for d, a in grouped.items()}
        old_ids = self.claim_devices.get(key, frozenset())
        if not new and not old_ids:
            return _UNMOVED
        entered: set[DeviceID] = set()
        left: set[DeviceID] = set()
        allocs = self.allocs
        for did in old_ids:
            if did not in new:
                by_claim = allocs.get(did)
                if by_claim is not None:
                    by_claim.pop(key, None)
                    if not by_claim:
                        del allocs[did]
                        left.add(did)
                ch.allocations.add(did)
        for did, held in new.items():
            by_claim = allocs.get(did)
            if by_claim is None:
                by_claim = allocs[did] = {}
                entered.add(did)
            if by_claim.get(key) != held:
                by_claim[key] = held
                ch.allocations.add(did)
        if new:
            self.claim_devices[key] = frozenset(new)
        else:
            self.claim_devices.pop(key, None)
        return entered, left

    def _set_pod_claims(self, key: NamespacedName, claims: tuple[NamespacedName, ...]) -> None:
        old = self.pod_claims.get(key, ())
        if old == claims:
            return
        for c in old:
            if c not in claims:
                pods = self.claim_ref_pods.get(c)
                if pods is not None:
                    pods.discard(key)
                    if not pods:
                        del self.claim_ref_pods[c]
        for c in claims:
            self.claim_ref_pods.setdefault(c, set()).add(key)
        if claims:
            self.pod_claims[key] = claims
        else:
            self.pod_claims.pop(key, None)

    # ------------------------------------------------------------------ queries

    def allocations(self, device_id: DeviceID) -> tuple[Allocation, ...]:
        by_claim = self.allocs.get(device_id)
        if not by_claim:
            return ()
        return tuple(a for claim in sorted(by_claim) for a in by_claim[claim])

    def is_allocated(self, device_id: DeviceID, include_admin_access: bool) -> bool:
        by_claim = self.allocs.get(device_id)
        if not by_claim:
            return False
        if include_admin_access:
            return True
        return any(not a.admin_access for held in by_claim.values() for a in held)

    def pods_of_claim(self, key: NamespacedName) -> tuple[NamespacedName, ...]:
        out = set(self.claim_ref_pods.get(key, ()))
        claim = self.claims.get(key)
        if claim is not None:
            for c in claim.reserved_for:
                if c.is_pod:
                    out.add(NamespacedName(key.namespace, c.name))
        return tuple(sorted(out))

    def allocated_device_ids(self) -> Iterable[DeviceID]:
        return self.allocs.keys()


__all__ = ["Moved", "UsageIndex"]
