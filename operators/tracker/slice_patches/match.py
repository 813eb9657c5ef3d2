"""Whether a patch's filter matches a device: name criteria, the DeviceClass, CEL.

Filters read the device *as published*, so no patch's matching depends on another
patch's output. A selector that fails for a device (runtime error, non-boolean) means
the patch does not apply there and the failure is kept for reporting; errors in the
DeviceClass's own selectors only make the class not match (they are the class's
problem, not the patch's).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from operators.cel import CompiledSelector
from operators.model import Device, DeviceID, PoolID
from operators.tracker.overlay import TrackerHandle
from operators.tracker.slice_patches.objects import PatchFilter

Failure = tuple[str, str]  # (expression, error message)


def names_match(flt: PatchFilter, did: DeviceID) -> bool:
    """The driver/pool/device criteria (unset ones do not restrict)."""
    return not (
        (flt.driver is not None and did.driver != flt.driver)
        or (flt.pool is not None and did.pool != flt.pool)
        or (flt.device is not None and did.device != flt.device)
    )


def candidates(tracker: TrackerHandle, flt: PatchFilter) -> Iterator[Device]:
    """Published devices that pass the name criteria, narrowed through the pool index
    when the filter names a driver and a pool or device (no scan of every device)."""
    if flt.driver is not None and (flt.pool is not None or flt.device is not None):
        pools = tracker.driver_pools(flt.driver)
        if flt.pool is not None:
            pools = [p for p in pools if p.pool == flt.pool]
        for pid in pools:
            if flt.device is not None:
                ids: Iterable[DeviceID] = (DeviceID(pid.driver, pid.pool, flt.device),)
            else:
                ids = tracker.pool_device_ids(PoolID(pid.driver, pid.pool))
            for did in ids:
                dev = tracker.published_device(did)
                if dev is not None:
                    yield dev
        return
    driver, pool, device = flt.driver, flt.pool, flt.device
    for dev in tracker.published_devices():
        did = dev.id
        if (
            (driver is None or did.driver == driver)
            and (pool is None or did.pool == pool)
            and (device is None or did.device == device)
        ):
            yield dev


def match(
    dev: Device,
    class_selectors: tuple[CompiledSelector, ...],
    selectors: tuple[CompiledSelector, ...],
    cache: bool,
) -> tuple[bool, Failure | None]:
    """(matches, the patch's own selector failure) for a device whose names already match."""
    for sel in class_selectors:
        if not sel.evaluate(dev, cache).matched:
            return False, None  # the class's errors are not the patch's
    for sel in selectors:
        result = sel.evaluate(dev, cache)
        if result.error is not None:
            return False, (sel.expression, result.error)
        if not result.matched:
            return False, None
    return True, None


__all__ = ["Failure", "candidates", "match", "names_match"]
