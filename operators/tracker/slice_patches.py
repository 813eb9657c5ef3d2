"""ResourceSlicePatch (KEP-5027) as a tracker overlay: parse, filter, merge, report.

This lives in the tracker layer (not in `operators.patches`) because the tracker, the
allocator and the offline views all need patched devices and may only import
downwards; `operators.patches` keeps the Event/status decisions and the kopf shell.

Merging rules (pinned by tests/patches/merge_cases.yaml):

* every filter criterion must hold; no filter matches every device; a DeviceClass
  filter means the class's selectors must match;
* filters read the device *as published*, so no patch's matching depends on another
  patch's output;
* conflicts are settled per attribute/capacity name: highest priority (unset = 0),
  then older creationTimestamp (a missing one counts as newest), then lower name;
* an attribute set to `null` removes the published attribute; capacity can only be set;
* a selector that fails for a device (runtime error, non-boolean) means the patch does
  not apply there; the failure is kept for reporting. A selector that does not compile
  makes the patch match nothing. Errors in the DeviceClass's own selectors only make
  the class not match: they are the class's problem, not the patch's.

Queries (for `draco devices`, the allocator and the reporter):
`patched(device_id) -> PatchedDevice | None`, `error_records() -> [{"object", "message"}]`,
`report(name) -> PatchReport | None`, `reports()`, `patch_names()`, `matched(name)`.

Re-evaluation is incremental: a slice change re-checks its devices against every patch,
a patch change only that patch's candidates (narrowed by driver and pool first), a
DeviceClass change only the patches naming it. CEL results come from the CEL layer's
caches, keyed by the values an expression reads.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any

from operators.cel import CompiledSelector, compile_selector
from operators.model import (
    Attribute,
    Device,
    DeviceClass,
    DeviceID,
    DeviceSelector,
    FieldError,
    ModelError,
    ObjectMeta,
    ObjectRef,
    PoolID,
    parse_attribute,
    parse_object,
    ref_of,
    register_parser,
)
from operators.model import fields as f
from operators.model.devices import parse_capacity_value
from operators.model.meta import parse_meta
from operators.model.selectors import parse_device_selectors
from operators.tracker.overlay import (
    AttributeOverride,
    CapacityOverride,
    DeviceContribution,
    EventType,
    OverlayBase,
)

KIND = "ResourceSlicePatch"
MAX_ENTRIES = 32  # attributes and capacities combined, as for a device in a slice
MAX_EXAMPLES = 3
MAX_FAILURE_MESSAGES = 3  # distinct (expression, error) pairs spelled out

_DOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_EMPTY: Mapping[str, Any] = MappingProxyType({})


# --------------------------------------------------------------------------- the object


@dataclass(frozen=True, slots=True)
class PatchFilter:
    """Unset (None) criteria do not restrict; an empty filter matches every device."""

    device_class_name: str | None = None
    driver: str | None = None
    pool: str | None = None
    device: str | None = None
    selectors: tuple[DeviceSelector, ...] = ()

    def to_api(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in (
            ("deviceClassName", self.device_class_name),
            ("driver", self.driver),
            ("pool", self.pool),
            ("device", self.device),
        ):
            if value is not None:
                out[key] = value
        if self.selectors:
            out["selectors"] = [s.to_api() for s in self.selectors]
        return out


@dataclass(frozen=True, slots=True)
class ResourceSlicePatch:
    """`attributes` values of None are removals (`null: {}` in the API)."""

    kind = KIND  # class attribute, not a field

    meta: ObjectMeta
    filter: PatchFilter = PatchFilter()
    priority: int = 0
    attributes: Mapping[str, Attribute | None] = field(default_factory=lambda: _EMPTY)
    capacity: Mapping[str, str] = field(default_factory=lambda: _EMPTY)

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def precedence(self) -> tuple[int, bool, datetime | None, str]:
        """Sort key: the first patch in this order wins a contested name."""
        created = self.meta.creation_timestamp
        return (-self.priority, created is None, created, self.meta.name)

    def effect(self) -> tuple[Any, ...]:
        """Everything but the filter that decides what the patch does to a device."""
        return (
            self.precedence,
            tuple(sorted(self.attributes.items())),
            tuple(sorted(self.capacity.items())),
        )


def _check_qualified(name: object, what: str) -> str:
    if not isinstance(name, str) or not name:
        raise FieldError(f"{what} names must be non-empty strings")
    domain, slash, short = name.rpartition("/")
    if not slash or not domain:
        raise FieldError(
            f"{what} name {name!r} must be fully qualified (domain/name), "
            "e.g. gpu.example.com/model"
        )
    if len(domain) > 63 or not _DOMAIN.match(domain):
        raise FieldError(f"domain {domain!r} must be a DNS subdomain of at most 63 characters")
    if len(short) > 32 or not _IDENTIFIER.match(short):
        raise FieldError(f"name {short!r} must be a C identifier of at most 32 characters")
    return name


def _null_key(value: object) -> object:
    """YAML readers turn an unquoted `null:` key into None; the API spells it "null"."""
    if isinstance(value, Mapping) and None in value:
        return {("null" if k is None else k): v for k, v in value.items()}
    return value


def _nullable_attribute(value: object) -> Attribute | None:
    value = _null_key(value)
    if isinstance(value, Mapping) and value.get("null") is not None:
        others = sorted(k for k, v in value.items() if k != "null" and v is not None)
        if others:
            raise FieldError(f"exactly one of string, int, bool, version, null may be set, got "
                             f"{['null', *others]}")
        if not isinstance(value["null"], Mapping) or value["null"]:
            raise FieldError("must be an empty object", "null")
        return None
    return parse_attribute(value)


def _optional_name(d: Mapping[str, Any], key: str) -> str | None:
    value = f.opt_string(d, key)
    return value or None  # "" is how some clients spell "unset"


def parse_patch_filter(d: Mapping[str, Any] | None) -> PatchFilter:
    if not d:
        return PatchFilter()
    return PatchFilter(
        device_class_name=_optional_name(d, "deviceClassName"),
        driver=_optional_name(d, "driver"),
        pool=_optional_name(d, "pool"),
        device=_optional_name(d, "device"),
        selectors=parse_device_selectors(d),
    )


def _parse_devices(devices: Mapping[str, Any]) -> tuple[PatchFilter, int, dict[str, Attribute | None], dict[str, str]]:
    raw_filter = f.opt_obj(devices, "filter")  # names "filter" itself if not an object
    try:
        flt = parse_patch_filter(raw_filter)
    except FieldError as e:
        raise e.at("filter") from None
    priority = f.opt_integer(devices, "priority")
    attributes: dict[str, Attribute | None] = {}
    for name, value in f.obj(devices, "attributes").items():
        try:
            attributes[_check_qualified(name, "attribute")] = _nullable_attribute(value)
        except FieldError as e:
            raise e.at(str(name)).at("attributes") from None
    capacity: dict[str, str] = {}
    for name, value in f.obj(devices, "capacity").items():
        try:
            _check_qualified(name, "capacity")
            value = _null_key(value)
            if isinstance(value, Mapping) and value.get("null") is not None:
                raise FieldError("capacity cannot be removed; set it to 0 instead")
            capacity[name] = parse_capacity_value(value)
        except FieldError as e:
            raise e.at(str(name)).at("capacity") from None
    if len(attributes) + len(capacity) > MAX_ENTRIES:
        raise FieldError(
            f"at most {MAX_ENTRIES} attributes and capacities combined, got "
            f"{len(attributes) + len(capacity)}",
            "attributes",
        )
    return flt, priority or 0, attributes, capacity


def parse_resource_slice_patch(d: Mapping[str, Any]) -> ResourceSlicePatch:
    """Raises FieldError naming the bad field (`parse_object` turns it into ModelError)."""
    meta = parse_meta(d, namespaced=False)
    spec = f.obj(d, "spec", required=True)
    try:
        devices = f.obj(spec, "devices", required=True)
        try:
            flt, priority, attributes, capacity = _parse_devices(devices)
        except FieldError as e:
            raise e.at("devices") from None
    except FieldError as e:
        raise e.at("spec") from None
    return ResourceSlicePatch(
        meta=meta,
        filter=flt,
        priority=priority,
        attributes=MappingProxyType(attributes) if attributes else _EMPTY,
        capacity=MappingProxyType(capacity) if capacity else _EMPTY,
    )


register_parser(KIND, parse_resource_slice_patch)


# --------------------------------------------------------------------------- reports


@dataclass(frozen=True, slots=True)
class SelectorFailure:
    """One expression failing with one message, aggregated over devices."""

    expression: str
    error: str
    count: int
    examples: tuple[DeviceID, ...]


@dataclass(frozen=True, slots=True)
class PatchReport:
    """What a patch currently does and what is wrong with it, for Events and status.

    `invalid`: the object could not be parsed (nothing else is known then).
    `compile_errors`: (expression, message) of selectors that do not compile.
    `missing_class`: the filter names a DeviceClass that does not exist.
    """

    name: str
    generation: int
    matched_devices: int = 0
    invalid: str | None = None
    compile_errors: tuple[tuple[str, str], ...] = ()
    missing_class: str | None = None
    failures: tuple[SelectorFailure, ...] = ()
    failed_devices: int = 0

    @property
    def faulty(self) -> bool:
        return bool(self.invalid or self.compile_errors or self.missing_class or self.failures)


@dataclass(frozen=True, slots=True)
class PatchedDevice:
    """The patches' verdict for one device, before it is merged into the view.

    `attributes` / `capacity`: winning value per qualified name (None = removed);
    `attribute_patches` / `capacity_patches`: the patch that decided each name;
    `patched_by`: those patches, sorted; `matching`: every patch whose filter matches
    the device, winners first (a patch can match and still decide nothing).
    """

    attributes: Mapping[str, Attribute | None]
    capacity: Mapping[str, str]
    attribute_patches: Mapping[str, str]
    capacity_patches: Mapping[str, str]
    patched_by: tuple[str, ...]
    matching: tuple[str, ...]


@dataclass(slots=True)
class SlicePatchStats:
    filter_checks: int = 0  # (patch, device) pairs examined
    patch_evaluations: int = 0  # whole-patch re-evaluations
    device_evaluations: int = 0  # single-device re-evaluations against all patches


# --------------------------------------------------------------------------- the overlay


@dataclass(slots=True)
class _Compiled:
    patch: ResourceSlicePatch
    selectors: tuple[CompiledSelector, ...]
    compile_errors: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class _Resolved:
    """Winners for one set of patches. `contribution` is None when a winner is a removal
    (whether it changes anything depends on the device's published attributes)."""

    order: tuple[str, ...]
    attributes: Mapping[str, Attribute | None]
    attribute_patches: Mapping[str, str]
    capacity: Mapping[str, str]
    capacity_patches: Mapping[str, str]
    contribution: DeviceContribution | None


_RESOLVED_MAX = 4096


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
        self._matched: dict[str, set[DeviceID]] = {}
        self._failures: dict[str, dict[DeviceID, tuple[str, str]]] = {}
        self._by_device: dict[DeviceID, set[str]] = {}
        self._class_users: dict[str, set[str]] = {}
        self._class_selectors: dict[str, tuple[CompiledSelector, ...]] = {}
        self._resolved: dict[frozenset[str], _Resolved] = {}

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
            if self._forget_device(did):
                touched.add(did)
        for did in added | modified:
            if self._evaluate_device(did):
                touched.add(did)
        return touched

    def contribution(self, device: DeviceID) -> DeviceContribution | None:
        names = self._by_device.get(device)
        if not names:
            return None
        resolved = self._resolve(frozenset(names))
        if resolved.contribution is not None:  # shared by every device with these patches
            return resolved.contribution if not resolved.contribution.empty else None
        verdict = self.patched(device)
        if verdict is None:
            return None
        attrs = {
            q: AttributeOverride(v, verdict.attribute_patches[q])
            for q, v in verdict.attributes.items()
        }
        caps = {
            q: CapacityOverride(v, verdict.capacity_patches[q]) for q, v in verdict.capacity.items()
        }
        if not attrs and not caps:
            return None
        return DeviceContribution(
            attributes=MappingProxyType(attrs) if attrs else _EMPTY,
            capacity=MappingProxyType(caps) if caps else _EMPTY,
        )

    # -- queries for views and the reporter ------------------------------------------------

    def patch(self, name: str) -> ResourceSlicePatch | None:
        cp = self._patches.get(name)
        return cp.patch if cp is not None else None

    def patch_names(self) -> list[str]:
        return sorted(set(self._patches) | set(self._invalid))

    def matched(self, name: str) -> frozenset[DeviceID]:
        return frozenset(self._matched.get(name, ()))

    def matching_patches(self, device: DeviceID) -> tuple[str, ...]:
        """Patches whose filter matches the device, winners first."""
        names = self._by_device.get(device)
        if not names:
            return ()
        return self._resolve(frozenset(names)).order

    def patched(self, device: DeviceID) -> PatchedDevice | None:
        """Winning value per attribute/capacity name and who decided it (None: untouched).

        A removal of an attribute the driver does not publish changes nothing and is
        left out, so it does not put the patch into `patched_by`.
        """
        names = self._by_device.get(device)
        if not names:
            return None
        r = self._resolve(frozenset(names))
        attrs, attr_by = r.attributes, r.attribute_patches
        if r.contribution is None:  # some winner is a removal: keep only real ones
            published = self.tracker.published_device(device) if self.tracker else None
            present = published.attributes if published is not None else _EMPTY
            gone = [q for q, v in attrs.items() if v is None and q not in present]
            if gone:
                attrs = MappingProxyType({q: v for q, v in attrs.items() if q not in gone})
                attr_by = MappingProxyType({q: n for q, n in attr_by.items() if q not in gone})
        return PatchedDevice(
            attributes=attrs,
            capacity=r.capacity,
            attribute_patches=attr_by,
            capacity_patches=r.capacity_patches,
            patched_by=tuple(sorted(set(attr_by.values()) | set(r.capacity_patches.values()))),
            matching=r.order,
        )

    def _resolve(self, names: frozenset[str]) -> _Resolved:
        """Per-name winners for one set of matching patches, memoized: devices of one
        model usually share their set, so 10,000 devices need a few dozen merges."""
        cached = self._resolved.get(names)
        if cached is not None:
            return cached
        order = tuple(sorted(names, key=lambda n: self._patches[n].patch.precedence))
        attrs: dict[str, Attribute | None] = {}
        attr_by: dict[str, str] = {}
        caps: dict[str, str] = {}
        cap_by: dict[str, str] = {}
        for name in order:
            p = self._patches[name].patch
            for q, value in p.attributes.items():
                if q not in attr_by:
                    attr_by[q] = name
                    attrs[q] = value
            for q, cap in p.capacity.items():
                if q not in cap_by:
                    cap_by[q] = name
                    caps[q] = cap
        contribution = None
        if all(v is not None for v in attrs.values()):
            contribution = DeviceContribution(
                attributes=MappingProxyType(
                    {q: AttributeOverride(v, attr_by[q]) for q, v in attrs.items()}
                ) if attrs else _EMPTY,
                capacity=MappingProxyType(
                    {q: CapacityOverride(v, cap_by[q]) for q, v in caps.items()}
                ) if caps else _EMPTY,
            )
        if len(self._resolved) >= _RESOLVED_MAX:
            self._resolved.clear()
        r = _Resolved(order, MappingProxyType(attrs), MappingProxyType(attr_by),
                      MappingProxyType(caps), MappingProxyType(cap_by), contribution)
        self._resolved[names] = r
        return r

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
        failures = self._failures.get(name, {})
        return PatchReport(
            name=name,
            generation=generation,
            matched_devices=len(self._matched.get(name, ())),
            compile_errors=cp.compile_errors,
            missing_class=missing,
            failures=_aggregate(failures),
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
            return set() if same_effect else set(self._matched.get(name, ()))
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
        matched = self._matched.pop(name, set())
        self._failures.pop(name, None)
        for did in matched:
            self._unlink(did, name)
        return matched

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

    def _unlink(self, did: DeviceID, name: str) -> None:
        names = self._by_device.get(did)
        if names is not None:
            names.discard(name)
            if not names:
                del self._by_device[did]

    # -- evaluation -------------------------------------------------------------------

    def _candidates(self, flt: PatchFilter) -> Iterator[Device]:
        """Published devices that pass the name criteria, narrowed through the pool index."""
        tracker = self.tracker
        if tracker is None:
            return
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

    def _check(self, cp: _Compiled, dev: Device) -> tuple[bool, tuple[str, str] | None]:
        """(matches, failure) for one device, name criteria included (device events)."""
        self.stats.filter_checks += 1
        flt = cp.patch.filter
        did = dev.id
        if (
            (flt.driver is not None and did.driver != flt.driver)
            or (flt.pool is not None and did.pool != flt.pool)
            or (flt.device is not None and did.device != flt.device)
        ):
            return False, None
        selectors = self._selectors_for(cp)
        if selectors is None:
            return False, None
        return _match(dev, selectors[0], selectors[1], self.use_cel_cache)

    def _evaluate_patch(self, name: str, *, only_membership_changes: bool) -> set[DeviceID]:
        """Re-run one patch over its candidates; returns devices whose verdict may differ."""
        self.stats.patch_evaluations += 1
        cp = self._patches[name]
        old = self._matched.get(name, set())
        new: set[DeviceID] = set()
        failures: dict[DeviceID, tuple[str, str]] = {}
        selectors = self._selectors_for(cp)
        if selectors is not None:
            class_selectors, patch_selectors = selectors
            cache = self.use_cel_cache
            checks = 0
            for dev in self._candidates(cp.patch.filter):  # name criteria already hold
                checks += 1
                ok, failure = _match(dev, class_selectors, patch_selectors, cache)
                if ok:
                    new.add(dev.id)
                elif failure is not None:
                    failures[dev.id] = failure
            self.stats.filter_checks += checks
        for did in old - new:
            self._unlink(did, name)
        for did in new - old:
            self._by_device.setdefault(did, set()).add(name)
        self._matched[name] = new
        if failures:
            self._failures[name] = failures
        else:
            self._failures.pop(name, None)
        return (old ^ new) if only_membership_changes else (old | new)

    def _evaluate_device(self, did: DeviceID) -> bool:
        """Re-check one device against every patch; True if any membership changed."""
        self.stats.device_evaluations += 1
        dev = self.tracker.published_device(did) if self.tracker is not None else None
        if dev is None:
            return self._forget_device(did)
        before = self._by_device.get(did, set())
        after: set[str] = set()
        for name, cp in self._patches.items():
            ok, failure = self._check(cp, dev)
            if ok:
                after.add(name)
                self._matched.setdefault(name, set()).add(did)
            else:
                matched = self._matched.get(name)
                if matched is not None:
                    matched.discard(did)
            failed = self._failures.get(name)
            if failure is not None:
                if failed is None:
                    failed = self._failures[name] = {}
                failed[did] = failure
            elif failed is not None and did in failed:
                del failed[did]
                if not failed:
                    del self._failures[name]
        if after:
            self._by_device[did] = after
        else:
            self._by_device.pop(did, None)
        # A modified device may change its published attributes even when the set of
        # matching patches is the same; the tracker recomposes it regardless.
        return bool(before or after)

    def _forget_device(self, did: DeviceID) -> bool:
        names = self._by_device.pop(did, None)
        for name in names or ():
            matched = self._matched.get(name)
            if matched is not None:
                matched.discard(did)
        for name in list(self._failures):
            failed = self._failures[name]
            if failed.pop(did, None) is not None and not failed:
                del self._failures[name]
        return bool(names)


def _match(
    dev: Device,
    class_selectors: tuple[CompiledSelector, ...],
    selectors: tuple[CompiledSelector, ...],
    cache: bool,
) -> tuple[bool, tuple[str, str] | None]:
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


def _aggregate(failures: Mapping[DeviceID, tuple[str, str]]) -> tuple[SelectorFailure, ...]:
    groups: dict[tuple[str, str], list[DeviceID]] = {}
    for did, key in failures.items():
        groups.setdefault(key, []).append(did)
    out = [
        SelectorFailure(expr, err, len(ids), tuple(sorted(ids)[:MAX_EXAMPLES]))
        for (expr, err), ids in groups.items()
    ]
    out.sort(key=lambda s: (-s.count, s.expression, s.error))
    return tuple(out)


def problem_messages(report: PatchReport) -> list[str]:
    """One human-readable sentence per problem; the wording users see in views and Events."""
    out: list[str] = []
    if report.invalid is not None:
        out.append(f"invalid ResourceSlicePatch, it patches nothing: {report.invalid}")
    for expression, error in report.compile_errors:
        out.append(f"selector `{expression}` does not compile, the patch matches nothing: {error}")
    if report.missing_class is not None:
        out.append(
            f"DeviceClass {report.missing_class!r} does not exist, the patch matches nothing"
        )
    for fl in report.failures[:MAX_FAILURE_MESSAGES]:
        examples = ", ".join(str(d) for d in fl.examples)
        more = f" and {fl.count - len(fl.examples)} more" if fl.count > len(fl.examples) else ""
        noun = "device" if fl.count == 1 else "devices"
        out.append(
            f"selector `{fl.expression}` failed on {fl.count} {noun} ({examples}{more}), "
            f"which the patch therefore does not patch: {fl.error}"
        )
    rest = report.failures[MAX_FAILURE_MESSAGES:]
    if rest:
        out.append(
            f"{len(rest)} more selector errors on {sum(r.count for r in rest)} devices"
        )
    return out


__all__ = [
    "KIND",
    "MAX_ENTRIES",
    "PatchFilter",
    "PatchReport",
    "PatchedDevice",
    "ResourceSlicePatch",
    "SelectorFailure",
    "SlicePatchOverlay",
    "SlicePatchStats",
    "parse_patch_filter",
    "parse_resource_slice_patch",
    "problem_messages",
]
