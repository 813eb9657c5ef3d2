"""Binding conditions (KEP-5007): is an allocated claim's device ready for its pod?

As kube-scheduler's PreBind judges a claim: per result with binding conditions, in
result order, the device's entry in `status.devices` (found by driver, pool and device,
whatever the share) must exist, show no failure condition True and every binding
condition True. A failure condition True, or conditions still open `timeout` seconds
after `allocationTimestamp` (kube-scheduler's default `bindingTimeout`: 600 s), fails
the binding: the claim is to be released and allocated again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from operators.model.claims import ResourceClaim

BINDING_TIMEOUT_S = 600.0


@dataclass(frozen=True, slots=True)
class Binding:
    waits: tuple[str, ...] = ()  # one sentence per device still waiting
    failed: str = ""  # why the binding failed ("" if it did not)
    deadline: datetime | None = None  # when the waiting times out

    @property
    def ready(self) -> bool:
        return not self.waits and not self.failed


READY = Binding()


def binding(claim: ResourceClaim, now: datetime | None, timeout: float = BINDING_TIMEOUT_S) -> Binding:
    """The binding state of an allocated CLAIM; NOW None: it never times out."""
    if claim.allocation is None:
        return READY
    waits: list[str] = []
    for r in claim.allocation.results:
        if not r.binding_conditions:
            continue
        status = claim.device_status(r.driver, r.pool, r.device)
        if status is not None:
            bad = next((c for c in r.binding_failure_conditions if status.condition(c) == "True"), None)
            if bad is not None:
                return Binding(failed=f"device {r.id} reports binding failure condition {bad}")
            open_ = [c for c in r.binding_conditions if status.condition(c) != "True"]
        else:
            open_ = list(r.binding_conditions)
        if open_:
            waits.append(f"device {r.id} waits for binding condition{'s' if len(open_) > 1 else ''} "
                         f"{', '.join(open_)}")
    if not waits:
        return READY
    stamp = claim.allocation.allocation_timestamp
    deadline = stamp + timedelta(seconds=timeout) if stamp is not None else None
    if deadline is not None and now is not None and now > deadline:
        return Binding(failed=f"binding conditions not met within {timeout:g}s of the allocation "
                              f"({'; '.join(waits)})")
    return Binding(tuple(waits), "", deadline)


__all__ = ["BINDING_TIMEOUT_S", "READY", "Binding", "binding"]
