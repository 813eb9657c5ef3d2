"""`SlicePatchOverlay`: the plumbing that keeps the patch verdicts in step with events.

It owns the compiled patches and the DeviceClass selectors they use, feeds the match
index from patch, class and device events, memoizes merges, and answers the queries of
`draco devices`, the allocator and the reporter. The decisions themselves live beside
it: `match` (filters), `merge` (winners), `index` (who matches what), `report`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from operators.cel import CompiledSelector, compile_selector
from operators.model import (
    Device,
    DeviceClass,
    DeviceID,
    ModelError,
    ObjectRef,
    parse_object,
    ref_of,
)
from operators.tracker.overlay import DeviceContribution, EventType, OverlayBase
from operators.tracker.slice_patches.index import MatchIndex
from operators.tracker.slice_patches.match import Failure, candidates, match
from operators.tracker.slice_patches.merge import (
    PatchedDevice,
    Resolved,
    contribution_of,
    resolve,
    verdict,
)
from operators.tracker.slice_patches.objects import KIND, PatchFilter, ResourceSlicePatch
from operators.tracker.slice_patches.report import PatchReport, aggregate, problem_messages

_EMPTY: Mapping[str, Any] = MappingProxyType({})
_RESOLVED_MAX = 4096


@dataclass(slots=True)
class SlicePatchStats:
    filter_checks: int = 0  # (patch, device) pairs examined
    patch_evaluations: int = 0  # whole-patch re-evaluations
    device_evaluations: int = 0  # single-device re-evaluations against all patches


@dataclass(slots=True)
class _Compiled:
    patch: ResourceSlicePatch
    selectors: tuple[CompiledSelector, ...]
    compile_errors: tuple[tuple[str, str], ...]


class SlicePatchOverlay(OverlayBase):
    """Register with `tracker.register_overlay(SlicePatchOverlay())`.

    `use_cel_cache=False` evaluates every selector afresh (the benchmark's baseline).
    """

    name = "resourceslicepatches"
    kinds = frozenset({KIND, "DeviceClass"})

    def __init__(self, *, use_cel_cache: bool = True) -> None:
        super().__init__()
        self.use_cel_cache = use_cel_cache
        self.stats = SlicePatchStats()
        self._patches: dict[str, _Compiled] = {}
        self._generations: dict[str, int] = {}
        self._invalid: dict[str, str] = {}
        self._index = MatchIndex()
        self._class_users: dict[str, set[str]] = {}
        self._class_selectors: dict[str, tuple[CompiledSelector, ...]] = {}
        self._resolved: dict[frozenset[str], Resolved] = {}

    # -- overlay protocol -------------------------------------------------------------

    def apply(self, event_type: EventType, obj: Any) -> Iterable[DeviceID]:
        if isinstance(obj, DeviceClass):
            return self._on_class(obj.meta.name)
        if isinstance(obj, ResourceSlicePatch):
            name = obj.meta.name
            return self._remove(name) if event_type == "DELETED" else self._put(obj)
        if not isinstance(obj, Mapping):
            raise ModelError(ObjectRef(KIND, "", ""), "", "expected an object")
        ref = ref_of(obj)
        if event_type == "DELETED":
            self._invalid.pop(ref.name, None)
            self._generations.pop(ref.name, None)
            return self._remove(ref.name)
        try:
            patch = parse_object(obj, KIND)
        except ModelError as err:
            self._reject(ref.name, obj, err)
            raise
        return self._put(patch)

    def devices_changed(
        self,
        added: frozenset[DeviceID],
        modified: frozenset[DeviceID],
        removed: frozenset[DeviceID],
    ) -> Iterable[DeviceID]:
        touched: set[DeviceID] = set()
        for did in removed:
            if self._index.forget_device(did):
                touched.add(did)
        for did in added | modified:
            if self._evaluate_device(did):
                touched.add(did)
        return touched

    def contribution(self, device: DeviceID) -> DeviceContribution | None:
        names = self._index.by_device.get(device)
        if not names:
            return None
        resolved = self._resolve(frozenset(names))
        if resolved.contribution is not None:  # shared by every device with these patches
            return resolved.contribution if not resolved.contribution.empty else None
        patched = self.patched(device)
        return contribution_of(patched) if patched is not None else None

    # -- queries for views and the reporter ------------------------------------------------

    def patch(self, name: str) -> ResourceSlicePatch | None:
        cp = self._patches.get(name)
        return cp.patch if cp is not None else None

    def patch_names(self) -> list[str]:
        return sorted(set(self._patches) | set(self._invalid))

    def matched(self, name: str) -> frozenset[DeviceID]:
        return frozenset(self._index.matched.get(name, ()))

    def matching_patches(self, device: DeviceID) -> tuple[str, ...]:
        """Patches whose filter matches the device, winners first."""
        names = self._index.by_device.get(device)
        if not names:
            return ()
        return self._resolve(frozenset(names)).order

    def patched(self, device: DeviceID) -> PatchedDevice | None:
        """Winning value per attribute/capacity name and who decided it (None: untouched)."""
        names = self._index.by_device.get(device)
        if not names:
            return None
        r = self._resolve(frozenset(names))
        present: Mapping[str, Any] = _EMPTY
        if r.contribution is None:  # a removal: what the driver publishes decides
            published = self.tracker.published_device(device) if self.tracker else None
            if published is not None:
                present = published.attributes
        return verdict(r, present)

    def report(self, name: str) -> PatchReport | None:
        generation = self._generations.get(name, 0)
        if name in self._invalid:
            return PatchReport(name, generation, invalid=self._invalid[name])
        cp = self._patches.get(name)
        if cp is None:
            return None
        class_name = cp.patch.filter.device_class_name
        missing = (
            class_name
            if class_name is not None
            and self.tracker is not None
            and self.tracker.device_class(class_name) is None
            else None
        )
        failures = self._index.failures.get(name, {})
        return PatchReport(
            name=name,
            generation=generation,
            matched_devices=len(self._index.matched.get(name, ())),
            compile_errors=cp.compile_errors,
            missing_class=missing,
            failures=aggregate(failures),
            failed_devices=len(failures),
        )

    def reports(self) -> list[PatchReport]:
        out = []
        for name in self.patch_names():
            r = self.report(name)
            if r is not None:
                out.append(r)
        return out

    def error_records(self) -> list[dict[str, str]]:
        """Records for `draco devices`' errors list, one per problem of each patch.

        Patches that do not parse are left out: the tracker already reports those
        (`Tracker.errors`), with the same field path.
        """
        out: list[dict[str, str]] = []
        for r in self.reports():
            if r.invalid is not None:
                continue
            for message in problem_messages(r):
                out.append({"object": f"{KIND}/{r.name}", "message": message})
        return out

    def _resolve(self, names: frozenset[str]) -> Resolved:
        """Memoized per set of matching patches: devices of one model usually share
        their set, so 10,000 devices need a few dozen merges."""
        cached = self._resolved.get(names)
        if cached is not None:
            return cached
        r = resolve(self._patches[n].patch for n in names)
        if len(self._resolved) >= _RESOLVED_MAX:
            self._resolved.clear()
        self._resolved[names] = r
        return r

    # -- patch bookkeeping ------------------------------------------------------------

    def _reject(self, name: str, obj: Mapping[str, Any], err: ModelError) -> None:
        """An object that no longer parses stops patching; its devices are recomposed."""
        md = obj.get("metadata")
        gen = md.get("generation") if isinstance(md, Mapping) else None
        self._generations[name] = gen if isinstance(gen, int) else 0
        self._invalid[name] = f"{err.path}: {err.message}" if err.path else err.message
        touched = self._remove(name)
        if touched and self.tracker is not None:
            self.tracker.refresh(touched)

    def _put(self, patch: ResourceSlicePatch) -> set[DeviceID]:
        name = patch.meta.name
        self._resolved.clear()
        self._generations[name] = patch.meta.generation
        self._invalid.pop(name, None)
        old = self._patches.get(name)
        if old is not None and old.patch.filter == patch.filter:
            same_effect = old.patch.effect() == patch.effect()
            old.patch = patch
            # Status writes and label edits arrive as MODIFIED too: skip re-evaluation.
            return set() if same_effect else set(self._index.matched.get(name, ()))
        selectors, errors = [], []
        for sel in patch.filter.selectors:
            compiled = compile_selector(sel.expression)
            if compiled.compile_error is not None:
                errors.append((sel.expression, compiled.compile_error))
            selectors.append(compiled)
        if old is not None:
            self._unuse_class(name, old.patch.filter.device_class_name)
        self._patches[name] = _Compiled(patch, tuple(selectors), tuple(errors))
        if patch.filter.device_class_name is not None:
            self._class_users.setdefault(patch.filter.device_class_name, set()).add(name)
        same = old is not None and old.patch.effect() == patch.effect()
        return self._evaluate_patch(name, only_membership_changes=same)

    def _remove(self, name: str) -> set[DeviceID]:
        cp = self._patches.pop(name, None)
        if cp is None:
            return set()
        self._resolved.clear()
        self._unuse_class(name, cp.patch.filter.device_class_name)
        return self._index.remove_patch(name)

    def _unuse_class(self, patch_name: str, class_name: str | None) -> None:
        if class_name is None:
            return
        users = self._class_users.get(class_name)
        if users is not None:
            users.discard(patch_name)
            if not users:
                del self._class_users[class_name]

    def _on_class(self, class_name: str) -> set[DeviceID]:
        self._class_selectors.pop(class_name, None)
        touched: set[DeviceID] = set()
        for name in sorted(self._class_users.get(class_name, ())):
            touched |= self._evaluate_patch(name, only_membership_changes=True)
        return touched

    # -- evaluation -------------------------------------------------------------------

    def _candidates(self, flt: PatchFilter) -> Iterator[Device]:
        if self.tracker is None:
            return iter(())
        return candidates(self.tracker, flt)

    def _class_selectors_of(self, class_name: str) -> tuple[CompiledSelector, ...] | None:
        cached = self._class_selectors.get(class_name)
        if cached is not None:
            return cached
        dc = self.tracker.device_class(class_name) if self.tracker is not None else None
        if dc is None:
            return None
        compiled = tuple(compile_selector(s.expression) for s in dc.selectors)
        self._class_selectors[class_name] = compiled
        return compiled

    def _selectors_for(self, cp: _Compiled) -> tuple[tuple[CompiledSelector, ...], ...] | None:
        """(class selectors, patch selectors), or None when nothing can match."""
        if cp.compile_errors:
            return None
        class_name = cp.patch.filter.device_class_name
        if class_name is None:
            return (), cp.selectors
        class_selectors = self._class_selectors_of(class_name)
        if class_selectors is None:
            return None
        return class_selectors, cp.selectors

    def _check(self, cp: _Compiled, dev: Device) -> tuple[bool, Failure | None]:
        """(matches, failure) for one device, name criteria included (device events)."""
        self.stats.filter_checks += 1
        flt = cp.patch.filter
        did = dev.id
        if (  # names_match, inlined: this runs for every (patch, device) pair
            (flt.driver is not None and did.driver != flt.driver)
            or (flt.pool is not None and did.pool != flt.pool)
            or (flt.device is not None and did.device != flt.device)
        ):
            return False, None
        selectors = self._selectors_for(cp)
        if selectors is None:
            return False, None
        return match(dev, selectors[0], selectors[1], self.use_cel_cache)

    def _evaluate_patch(self, name: str, *, only_membership_changes: bool) -> set[DeviceID]:
        """Re-run one patch over its candidates; returns devices whose verdict may differ."""
        self.stats.patch_evaluations += 1
        cp = self._patches[name]
        new: set[DeviceID] = set()
        failures: dict[DeviceID, Failure] = {}
        selectors = self._selectors_for(cp)
        if selectors is not None:
            class_selectors, patch_selectors = selectors
            cache = self.use_cel_cache
            checks = 0
            for dev in self._candidates(cp.patch.filter):  # name criteria already hold
                checks += 1
                ok, failure = match(dev, class_selectors, patch_selectors, cache)
                if ok:
                    new.add(dev.id)
                elif failure is not None:
                    failures[dev.id] = failure
            self.stats.filter_checks += checks
        old = self._index.set_patch(name, new, failures)
        return (old ^ new) if only_membership_changes else (old | new)

    def _evaluate_device(self, did: DeviceID) -> bool:
        """Re-check one device against every patch; True if its view needs recomposing."""
        self.stats.device_evaluations += 1
        dev = self.tracker.published_device(did) if self.tracker is not None else None
        if dev is None:
            return self._index.forget_device(did)
        return self._index.set_device(dev, self._patches.items(), self._check)


__all__ = ["SlicePatchOverlay", "SlicePatchStats"]
