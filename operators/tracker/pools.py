"""Slice and pool bookkeeping that keeps a slice update proportional to its devices.

A pool's devices are those of its newest-generation slices. When a slice arrives at
the current generation only its own device names are re-examined; a generation change
(rare: the driver republishes the whole pool) rebuilds that pool alone. `SliceIndex`
holds every slice by name and its pool; the `Tracker` asks it which devices a slice
event may have changed and settles their published devices itself.
"""

from __future__ import annotations

from operators.model import Device, DeviceID, PoolID, ResourceSlice
from operators.tracker.change import ChangeBuilder
from operators.tracker.views import PoolStatus


class PoolState:
    __slots__ = ("id", "slices", "generation", "current", "by_slice", "names", "dups")

    def __init__(self, pool_id: PoolID) -> None:
        self.id = pool_id
        self.slices: dict[str, ResourceSlice] = {}  # every generation
        self.generation = 0
        self.current: dict[str, ResourceSlice] = {}  # newest generation only
        self.by_slice: dict[str, dict[str, Device]] = {}  # current slice -> name -> device
        self.names: dict[str, list[str]] = {}  # device name -> current slices publishing it
        self.dups: set[str] = set()

    # -- updates: each returns the device names whose winner may have changed --------

    def put(self, s: ResourceSlice) -> set[str]:
        old = self.slices.get(s.meta.name)
        self.slices[s.meta.name] = s
        gen = s.pool.generation
        if gen == self.generation and self.current:
            changed = set()
            if old is not None and old.meta.name in self.current:
                changed = self._unindex(old)
            changed |= self._index(s)
            return changed
        if (
            gen > self.generation
            or (old is not None and old.meta.name in self.current)
            or not self.current
        ):
            return self._rebuild()
        return set()  # an outdated slice: invisible

    def remove(self, name: str) -> set[str]:
        old = self.slices.pop(name, None)
        if old is None or name not in self.current:
            return set()
        if len(self.current) > 1:
            return self._unindex(old)
        return self._rebuild()

    # -- queries ----------------------------------------------------------------------

    def winner(self, name: str) -> Device | None:
        """The device published under `name`; with duplicates, the one in the first slice
        by name (the pool is then invalid and not allocatable anyway)."""
        owners = self.names.get(name)
        if not owners:
            return None
        return self.by_slice[min(owners)][name]

    def device_names_in_order(self) -> list[str]:
        seen: dict[str, None] = {}
        for sname in sorted(self.current):
            for d in self.current[sname].devices:
                seen.setdefault(d.id.device, None)
        return list(seen)

    def status(self) -> PoolStatus:
        current = sorted(self.current)
        outdated = sorted(n for n in self.slices if n not in self.current)
        expected = self.current[current[0]].pool.resource_slice_count if current else 0
        complete = len(current) == expected
        valid = not self.dups
        if not complete:
            reason = (
                f"pool {self.id} is incomplete: {len(current)} of {expected} "
                f"ResourceSlices at generation {self.generation}"
            )
        elif not valid:
            reason = f"pool {self.id} is invalid: duplicate device name {min(self.dups)}"
        else:
            reason = ""
        return PoolStatus(
            id=self.id,
            generation=self.generation,
            resource_slice_count=expected,
            slices=tuple(current),
            outdated_slices=tuple(outdated),
            device_count=len(self.names),
            complete=complete,
            valid=valid,
            reason=reason,
        )

    # -- internals --------------------------------------------------------------------

    def _index(self, s: ResourceSlice) -> set[str]:
        sname = s.meta.name
        self.current[sname] = s
        devs: dict[str, Device] = {}
        names = self.names
        for d in s.devices:
            n = d.id.device
            owners = names.get(n)
            if owners is None:
                names[n] = [sname]
            else:
                owners.append(sname)
                self.dups.add(n)
            devs.setdefault(n, d)
        self.by_slice[sname] = devs
        return {d.id.device for d in s.devices}

    def _unindex(self, s: ResourceSlice) -> set[str]:
        sname = s.meta.name
        self.current.pop(sname, None)
        self.by_slice.pop(sname, None)
        names = self.names
        out = {d.id.device for d in s.devices}
        for n in out:
            owners = names.get(n)
            if owners is None:
                continue
            owners[:] = [o for o in owners if o != sname]
            if not owners:
                del names[n]
                self.dups.discard(n)
            elif len(owners) == 1:
                self.dups.discard(n)
        return out

    def _rebuild(self) -> set[str]:
        changed = set(self.names)
        self.current = {}
        self.by_slice = {}
        self.names = {}
        self.dups = set()
        if not self.slices:
            self.generation = 0
            return changed
        self.generation = max(s.pool.generation for s in self.slices.values())
        for s in self.slices.values():
            if s.pool.generation == self.generation:
                changed |= self._index(s)
        return changed


class SliceIndex:
    """Every ResourceSlice by name, grouped into pools and pools by driver.

    The dicts are read directly by the `Tracker` (never rebound, so aliases stay valid).
    """

    __slots__ = ("slices", "pools", "driver_pools")

    def __init__(self) -> None:
        self.slices: dict[str, ResourceSlice] = {}
        self.pools: dict[PoolID, PoolState] = {}
        self.driver_pools: dict[str, set[PoolID]] = {}

    def put(self, s: ResourceSlice, ch: ChangeBuilder) -> set[DeviceID]:
        """Store the slice; returns the devices whose published winner may have changed
        (none when the slice is the one already stored)."""
        name = s.meta.name
        old = self.slices.get(name)
        self.slices[name] = s
        if old is not None and (old is s or old == s):
            return set()
        ch.slices.add(name)
        candidates: set[DeviceID] = set()
        if old is not None and old.pool_id != s.pool_id:
            candidates |= self._pool_remove(old.pool_id, name, ch)
        pid = s.pool_id
        st = self.pools.get(pid)
        if st is None:
            st = self.pools[pid] = PoolState(pid)
            self.driver_pools.setdefault(pid.driver, set()).add(pid)
        names = st.put(s)
        ch.pools.add(pid)
        candidates.update(DeviceID(pid.driver, pid.pool, n) for n in names)
        return candidates

    def remove(self, name: str, ch: ChangeBuilder) -> set[DeviceID]:
        """Forget the slice; returns the devices whose published winner may have changed."""
        old = self.slices.pop(name, None)
        if old is None:
            return set()
        ch.slices.add(name)
        return self._pool_remove(old.pool_id, name, ch)

    def _pool_remove(self, pid: PoolID, slice_name: str, ch: ChangeBuilder) -> set[DeviceID]:
        st = self.pools.get(pid)
        if st is None:
            return set()
        names = st.remove(slice_name)
        ch.pools.add(pid)
        if not st.slices:
            del self.pools[pid]
            drv = self.driver_pools.get(pid.driver)
            if drv is not None:
                drv.discard(pid)
                if not drv:
                    del self.driver_pools[pid.driver]
        return {DeviceID(pid.driver, pid.pool, n) for n in names}


__all__ = ["PoolState", "SliceIndex"]
