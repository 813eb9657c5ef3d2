"""DeviceTaintRule (KEP-5055) as a tracker overlay: the rule's taint on every device it selects.

Selection is by names only (driver, pool, device; `all: true` matches every device, a
missing selector none), so a rule also reaches allocated devices whose ResourceSlice is
gone. An empty selector, `{}`, is what upstream evicted every DRA pod of a cluster with
(kubernetes/kubernetes#141422): the CRD refuses to create one since draco 0.1 added
`all`, and one stored before still matches every device, as it always did (the API
server's validation ratcheting lets such a rule's status and metadata be written). Taints are cumulative: a rule never replaces a slice taint or
another rule's taint with the same key.

The CRD cannot default `spec.taint.timeAdded` as upstream's apiserver does, so until
draco's controller has written it, a rule's taint counts from the rule's
creationTimestamp.

Upstream's own DeviceTaintRule (`resource.k8s.io`, GA in 1.37) has the same kind name
and fields. Both arrive as kind `DeviceTaintRule` and are told apart by apiVersion:
`TaintRuleOverlay` keeps draco's (`resource.draco.dev`, or no apiVersion at all) and
`UpstreamTaintRuleOverlay` keeps upstream's, whose taints carry the source
`DeviceTaintRule.resource.k8s.io/<name>` so that nobody mistakes them for draco's rules
(draco never writes their status; upstream's controller does).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from operators.model import DeviceID, DeviceTaint, FieldError, ModelError, ObjectMeta, ref_of
from operators.model import fields as f
from operators.model.meta import parse_meta
from operators.model.objects import register_parser
from operators.tracker.overlay import DeviceContribution, EventType, OverlayBase

KIND = "DeviceTaintRule"
UPSTREAM_GROUP = "resource.k8s.io"
UPSTREAM_KIND = f"{KIND}.{UPSTREAM_GROUP}"  # also the feed's name for upstream's rules
UPSTREAM_PREFIX = f"{UPSTREAM_KIND}/"


def is_upstream(obj: Any) -> bool:
    """Whether a DeviceTaintRule (dict or parsed) is upstream's built-in one."""
    if isinstance(obj, DeviceTaintRule):
        return obj.origin == UPSTREAM_KIND
    if not isinstance(obj, Mapping):
        return False
    if obj.get("kind") == UPSTREAM_KIND:
        return True
    api_version = obj.get("apiVersion")
    return isinstance(api_version, str) and api_version.partition("/")[0] == UPSTREAM_GROUP


@dataclass(frozen=True, slots=True)
class RuleSelector:
    """None fields match anything; the selector as a whole may be absent (matches nothing).
    `all_devices` is the explicit `all: true`; `all: false` with no field matches nothing."""

    driver: str | None = None
    pool: str | None = None
    device: str | None = None
    all_devices: bool | None = None

    @property
    def empty(self) -> bool:
        return self.driver is None and self.pool is None and self.device is None

    def matches(self, device: DeviceID) -> bool:
        if self.all_devices is False and self.empty:
            return False
        return ((self.driver is None or self.driver == device.driver)
                and (self.pool is None or self.pool == device.pool)
                and (self.device is None or self.device == device.device))

    def to_api(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: v for k, v in (("driver", self.driver), ("pool", self.pool),
                                                  ("device", self.device)) if v is not None}
        if self.all_devices is not None:
            out["all"] = self.all_devices
        return out


@dataclass(frozen=True, slots=True)
class DeviceTaintRule:
    kind = KIND

    meta: ObjectMeta
    selector: RuleSelector | None
    key: str
    value: str
    effect: str
    time_added: datetime | None
    conditions: tuple[Mapping[str, Any], ...] = ()
    origin: str = KIND  # UPSTREAM_KIND for upstream's built-in rules

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def taint_time(self) -> datetime | None:
        """When the taint counts from: spec.taint.timeAdded, else the rule's creation."""
        return self.time_added or self.meta.creation_timestamp

    @property
    def source(self) -> str:
        return f"{self.origin}/{self.meta.name}"

    def taint(self) -> DeviceTaint:
        return DeviceTaint(key=self.key, value=self.value, effect=self.effect,
                           time_added=self.taint_time, source=self.source)

    def matches(self, device: DeviceID) -> bool:
        return self.selector is not None and self.selector.matches(device)

    def condition(self, type_: str) -> Mapping[str, Any] | None:
        return next((c for c in self.conditions if c.get("type") == type_), None)


def parse_device_taint_rule(d: Mapping[str, Any]) -> DeviceTaintRule:
    ref = ref_of(d)
    try:
        meta = parse_meta(d, namespaced=False)
        spec = d.get("spec")
        if not isinstance(spec, Mapping):
            raise FieldError("required field is missing", "spec")
        try:
            sel_raw = spec.get("deviceSelector")
            selector = None
            if sel_raw is not None:
                if not isinstance(sel_raw, Mapping):
                    raise FieldError(f"expected an object, got {f.type_name(sel_raw)}")
                selector = RuleSelector(f.opt_string(sel_raw, "driver"), f.opt_string(sel_raw, "pool"),
                                        f.opt_string(sel_raw, "device"), f.opt_bool(sel_raw, "all"))
                if selector.all_devices and not selector.empty:
                    # ambiguous (every device, or those named?): the CRD refuses it, and a
                    # rule that got in anyway is left out, not guessed at
                    raise FieldError("all: true selects every device and takes no driver, "
                                     "pool or device", "all")
        except FieldError as e:
            raise e.at("deviceSelector").at("spec") from None
        taint = spec.get("taint")
        if not isinstance(taint, Mapping):
            raise FieldError("required field is missing", "spec", "taint")
        try:
            key = f.string(taint, "key", required=True)
            effect = f.string(taint, "effect", required=True)
            value = f.string(taint, "value") or ""
            time_added = f.opt_time(taint, "timeAdded")
        except FieldError as e:
            raise e.at("taint").at("spec") from None
        status = d.get("status") if isinstance(d.get("status"), Mapping) else {}
        conditions = tuple(c for c in (status or {}).get("conditions") or [] if isinstance(c, Mapping))
    except FieldError as e:
        raise e.to_model_error(ref) from None
    return DeviceTaintRule(meta, selector, key, value, effect, time_added, conditions,
                           UPSTREAM_KIND if is_upstream(d) else KIND)


register_parser(KIND, parse_device_taint_rule)


class _RuleOverlay(OverlayBase):
    """Rules of one origin: objects of the other origin are not this overlay's business."""

    upstream = False

    def __init__(self) -> None:
        super().__init__()
        self.rules: dict[str, DeviceTaintRule] = {}
        self.errors: dict[str, ModelError] = {}

    def apply(self, event_type: EventType, obj: Any) -> Iterable[DeviceID]:
        if isinstance(obj, Mapping):
            meta = obj.get("metadata")
            name = str(meta.get("name") or "") if isinstance(meta, Mapping) else ""
        else:
            name = obj.name
        if is_upstream(obj) != self.upstream:
            return ()
        old = self.rules.get(name)
        if event_type == "DELETED":
            self.rules.pop(name, None)
            self.errors.pop(name, None)
            return self._affected(old, None)
        try:
            rule = obj if isinstance(obj, DeviceTaintRule) else parse_device_taint_rule(obj)
        except ModelError as err:
            self.rules.pop(name, None)
            self.errors[name] = err
            self._affected(old, None)
            raise
        self.errors.pop(name, None)
        self.rules[name] = rule
        if old is not None and (old.selector, old.taint()) == (rule.selector, rule.taint()):
            return ()
        return self._affected(old, rule)

    def _affected(self, old: DeviceTaintRule | None, new: DeviceTaintRule | None) -> set[DeviceID]:
        if self.tracker is None:
            return set()
        return {d for d in self.tracker.device_ids()
                if (old is not None and old.matches(d)) or (new is not None and new.matches(d))}

    def devices_changed(self, added: frozenset[DeviceID], modified: frozenset[DeviceID],
                        removed: frozenset[DeviceID]) -> Iterable[DeviceID]:
        return {d for d in added if any(r.matches(d) for r in self.rules.values())}

    def contribution(self, device: DeviceID) -> DeviceContribution | None:
        taints = tuple(r.taint() for _, r in sorted(self.rules.items()) if r.matches(device))
        return DeviceContribution(taints=taints) if taints else None

    def selected(self, rule: DeviceTaintRule) -> list[DeviceID]:
        """Devices in the tracker's view (published or allocated) the rule selects."""
        if self.tracker is None:
            return []
        return [d for d in self.tracker.device_ids() if rule.matches(d)]


class TaintRuleOverlay(_RuleOverlay):
    """draco's own rules (`resource.draco.dev`), whose status draco's controller writes."""

    name = "taint-rules"
    kinds = frozenset({KIND})


class UpstreamTaintRuleOverlay(_RuleOverlay):
    """Upstream's built-in rules (`resource.k8s.io`): a taint source like draco's own,
    read only. Composed after draco's rules, so a device lists draco's taints first."""

    name = "upstream-taint-rules"
    kinds = frozenset({KIND, UPSTREAM_KIND})
    upstream = True


def ensure_upstream_overlay(tracker: Any) -> UpstreamTaintRuleOverlay:
    """The tracker's upstream-rule overlay, registered if it is not there yet."""
    for overlay in tracker.overlays:
        if isinstance(overlay, UpstreamTaintRuleOverlay):
            return overlay
    overlay = UpstreamTaintRuleOverlay()
    tracker.register_overlay(overlay)
    return overlay
