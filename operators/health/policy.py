"""DeviceHealthPolicy (`resource.draco.dev/v1alpha1`, cluster-scoped): which devices a
policy watches, which signals mark one unhealthy, and what it does about it.

Parsed into plain data here; what to do is `operators.health.decisions`. A field draco
does not understand (an unknown signal type, a duration it cannot read, an effect it
does not know) fails the whole policy with the field's path: the policy is left out,
never half-applied.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from operators.model import DeviceID, FieldError, ObjectMeta, ref_of
from operators.model import fields as f
from operators.model.meta import parse_meta

KIND = "DeviceHealthPolicy"
API_VERSION = "resource.draco.dev/v1alpha1"
EFFECTS = ("None", "NoSchedule", "NoExecute")
POD_HEALTH = ("Healthy", "Unhealthy", "Unknown")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
# upstream's durations are int64 nanoseconds (metav1.Duration, Go's time.ParseDuration
# refuses more): about 292 years, so `now + for` stays a date Python can hold
MAX_DURATION = timedelta(seconds=(2**63 - 1) // 10**9)


@dataclass(frozen=True, slots=True)
class SliceTaintSignal:
    """A taint the driver published on the device in its ResourceSlice."""

    key: str
    values: tuple[str, ...] = ()  # any value when empty
    effects: tuple[str, ...] = ()  # any effect when empty


@dataclass(frozen=True, slots=True)
class PodHealthSignal:
    """The kubelet's per-device health in a pod's status (KEP-4680)."""

    health: tuple[str, ...] = ("Unhealthy",)


@dataclass(frozen=True, slots=True)
class DeviceSignal:
    """A CEL expression over the patched device view: true means unhealthy."""

    cel: str


Signal = SliceTaintSignal | PodHealthSignal | DeviceSignal


@dataclass(frozen=True, slots=True)
class HealthPolicy:
    meta: ObjectMeta
    driver: str
    pool: str | None
    device: str | None
    signals: tuple[Signal, ...]
    taint_key: str
    taint_value: str | None  # None: the signal names itself
    effect: str
    hold_for: timedelta
    clear_after: timedelta | None  # None: never removed by the policy
    partitions: bool
    max_unavailable: int | str | None  # 3, "10%", or None for no limit

    @property
    def name(self) -> str:
        return self.meta.name

    def selects(self, device: DeviceID) -> bool:
        return (device.driver == self.driver and (self.pool is None or device.pool == self.pool)
                and (self.device is None or device.device == self.device))

    def limit(self, selected: int) -> int | None:
        """How many selected devices the policy may hold tainted at once (None: all).
        A percentage rounds up and is at least 1, so a small pool can still lose one."""
        if self.max_unavailable is None:
            return None
        if isinstance(self.max_unavailable, int):
            return self.max_unavailable
        percent = float(self.max_unavailable.rstrip("%"))
        return max(1, -(-int(percent * selected) // 100))


def parse_duration(text: str) -> timedelta:
    """Go-style durations as Kubernetes writes them: `0s`, `90s`, `10m`, `1h30m`, `500ms`."""
    if text in ("0", ""):
        return timedelta(0)
    pos, seconds = 0, 0.0
    for match in _DURATION.finditer(text):
        if match.start() != pos:
            break
        seconds += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if pos != len(text) or pos == 0:
        raise FieldError(f"not a duration (like 30s, 10m, 1h30m): {text!r}")
    if not seconds <= MAX_DURATION.total_seconds():
        raise FieldError(f"longer than the longest duration Kubernetes knows "
                         f"(2562047h47m16s, about 292 years): {text!r}")
    return timedelta(seconds=seconds)


def _signal(d: Mapping[str, Any]) -> Signal:
    kinds = [k for k in ("sliceTaint", "podHealth", "device") if d.get(k) is not None]
    unknown = sorted(k for k in d if k not in ("sliceTaint", "podHealth", "device"))
    if unknown:
        raise FieldError(f"unknown signal type {unknown[0]!r} (known: sliceTaint, podHealth, device)")
    if len(kinds) != 1:
        raise FieldError("exactly one of sliceTaint, podHealth, device must be set")
    body = f.obj(d, kinds[0], required=True)
    try:
        if kinds[0] == "sliceTaint":
            effects = f.string_list(body, "effects")
            for i, effect in enumerate(effects):
                if effect not in EFFECTS:
                    raise FieldError(f"unknown effect {effect!r} (known: {', '.join(EFFECTS)})", f"[{i}]", "effects")
            return SliceTaintSignal(f.string(body, "key", required=True), f.string_list(body, "values"), effects)
        if kinds[0] == "podHealth":
            health = f.string_list(body, "health") or ("Unhealthy",)
            for i, h in enumerate(health):
                if h not in POD_HEALTH:
                    raise FieldError(f"unknown health {h!r} (known: {', '.join(POD_HEALTH)})", f"[{i}]", "health")
            return PodHealthSignal(health)
        return DeviceSignal(f.string(body, "cel", required=True))
    except FieldError as e:
        raise e.at(kinds[0]) from None


def _max_unavailable(spec: Mapping[str, Any]) -> int | str | None:
    value = spec.get("maxUnavailable")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise FieldError(f"expected an integer or a percentage, got {f.type_name(value)}", "maxUnavailable")
    if isinstance(value, int):
        if value < 0:
            raise FieldError("must be 0 or more", "maxUnavailable")
        return value
    if not re.fullmatch(r"\d{1,3}%", value) or int(value[:-1]) > 100:
        raise FieldError(f"expected a percentage from 0% to 100%, got {value!r}", "maxUnavailable")
    return value


def parse_health_policy(d: Mapping[str, Any]) -> HealthPolicy:
    ref = ref_of(d)
    try:
        meta = parse_meta(d, namespaced=False)
        spec = f.obj(d, "spec", required=True)
        selector = f.obj(spec, "deviceSelector", required=True)
        try:
            driver = f.string(selector, "driver", required=True)
        except FieldError as e:
            raise e.at("deviceSelector").at("spec") from None
        signals = []
        for i, raw in enumerate(f.lst(spec, "signals", required=True)):
            try:
                signals.append(_signal(f.as_object(raw)))
            except FieldError as e:
                raise e.at(f"[{i}]").at("signals").at("spec") from None
        if not signals:
            raise FieldError("at least one signal is required", "signals", "spec")
        taint = f.obj(spec, "taint", required=True)
        try:
            effect = f.string(taint, "effect", required=True)
            if effect not in EFFECTS:
                raise FieldError(f"unknown effect {effect!r} (known: {', '.join(EFFECTS)})", "effect")
            key = f.string(taint, "key", required=True)
            value = f.opt_string(taint, "value")
        except FieldError as e:
            raise e.at("taint").at("spec") from None
        try:
            hold_for = parse_duration(f.string(spec, "for") or "0s")
        except FieldError as e:
            raise e.at("for").at("spec") from None
        try:
            clear_raw = f.opt_string(spec, "clearAfter")
            clear_after = None if clear_raw is None else parse_duration(clear_raw)
        except FieldError as e:
            raise e.at("clearAfter").at("spec") from None
        try:
            max_unavailable = _max_unavailable(spec)
        except FieldError as e:
            raise e.at("spec") from None
        return HealthPolicy(meta, driver, f.opt_string(selector, "pool"), f.opt_string(selector, "device"),
                            tuple(signals), key, value, effect, hold_for, clear_after,
                            f.boolean(spec, "partitions"), max_unavailable)
    except FieldError as e:
        raise e.to_model_error(ref) from None
