"""Devices as drivers publish them: ResourceSlice, Device, taints, tolerations, placement.

Attribute and capacity maps are keyed by the fully qualified name so that `model` and
`gpu.example.com/model` published by driver `gpu.example.com` are one key everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, Literal, NamedTuple, TypeVar

from operators.model import fields as f
from operators.model.capacity import CapacityPolicy, parse_policies
from operators.model.counters import (
    CounterConsumption,
    CounterSet,
    parse_consumption,
    parse_counter_set,
    unsupported_fields,
)
from operators.model.errors import FieldError
from operators.model.meta import ObjectMeta
from operators.model.quantity import parse_quantity
from operators.model.selectors import NodeSelector, opt_node_selector
from operators.model.values import ATTRIBUTE_KINDS, Attribute, qualify

TaintEffect = Literal["None", "NoSchedule", "NoExecute"]
KNOWN_TAINT_EFFECTS: tuple[str, ...] = ("None", "NoSchedule", "NoExecute")
TOLERATION_OPERATORS: tuple[str, ...] = ("Exists", "Equal")

# Capacity values repeat a lot across devices ("80Gi"); remember the valid spellings so
# a full build does not re-parse the same quantity thousands of times.
_VALID_QUANTITIES: set[str] = set()
_VALID_QUANTITIES_MAX = 4096


def _check_quantity(s: str) -> None:
    if s in _VALID_QUANTITIES:
        return
    parse_quantity(s)  # raises ValueError
    if len(_VALID_QUANTITIES) < _VALID_QUANTITIES_MAX:
        _VALID_QUANTITIES.add(s)


class DeviceID(NamedTuple):
    """Globally unique device name; sorts by driver, then pool, then device."""

    driver: str
    pool: str
    device: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


class PoolID(NamedTuple):
    driver: str
    pool: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}"


T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class DeviceTaint:
    """A taint on a device. `effect` keeps unknown strings: newer clusters add effects.

    `source` says who put it there (`ResourceSlice/<name>`, `DeviceTaintRule/<name>`);
    it is not part of the API object and is ignored when comparing taints for identity
    only through `key`/`effect` by callers that need that.
    """

    key: str
    value: str = ""
    effect: str = "NoSchedule"
    time_added: datetime | None = None
    source: str = ""

    @property
    def known_effect(self) -> TaintEffect:
        """The effect as draco acts on it: unknown effects behave like `None`."""
        e = self.effect
        return e if e in KNOWN_TAINT_EFFECTS else "None"  # type: ignore[return-value]

    def to_api(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "effect": self.effect}
        if self.value:
            out["value"] = self.value
        if self.time_added is not None:
            out["timeAdded"] = self.time_added.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return out


@dataclass(frozen=True, slots=True)
class DeviceToleration:
    """A device toleration. `problem` is set when draco could not read the API entry:
    such a toleration tolerates nothing (upstream's matching, too, rejects an operator it
    does not know), so a claim is never spared an eviction because of a field draco
    cannot read; the claim's owner reports the problem instead of dropping the claim."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None
    problem: str = ""

    def tolerates(self, taint: DeviceTaint) -> bool:
        """Upstream matching: an empty effect matches every effect, an empty key every
        key (with Equal the values must still agree), Exists every value."""
        if self.problem:
            return False
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        if self.operator == "Equal":
            return self.value == taint.value
        return False

    def to_api(self) -> dict[str, Any]:
        out: dict[str, Any] = {"operator": self.operator}
        if self.key:
            out["key"] = self.key
        if self.value:
            out["value"] = self.value
        if self.effect:
            out["effect"] = self.effect
        if self.toleration_seconds is not None:
            out["tolerationSeconds"] = self.toleration_seconds
        return out


@dataclass(frozen=True, slots=True)
class NodePlacement:
    """Where a device is reachable. Nothing set means no node (unknown future mode)."""

    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool = False

    def matches(self, node_name: str, labels: Mapping[str, str]) -> bool:
        if self.node_name:
            return self.node_name == node_name
        if self.all_nodes:
            return True
        if self.node_selector is not None:
            return self.node_selector.matches(node_name, labels)
        return False


NO_PLACEMENT = NodePlacement()
ALL_NODES = NodePlacement(all_nodes=True)


class KeyedByDeviceID:
    """The names a device carries in its DeviceID, for every type keyed by one (a
    published device, the tracker's composed view of it). Each subclass still defines
    `__hash__` as `hash(self.id)`: a frozen dataclass replaces an inherited one."""

    __slots__ = ()
    id: DeviceID

    @property
    def driver(self) -> str:
        return self.id.driver

    @property
    def pool(self) -> str:
        return self.id.pool

    @property
    def name(self) -> str:
        return self.id.device


@dataclass(frozen=True, slots=True)
class Device(KeyedByDeviceID):
    id: DeviceID
    attributes: Mapping[str, Attribute] = field(default_factory=lambda: f.EMPTY_MAP)
    capacity: Mapping[str, str] = field(default_factory=lambda: f.EMPTY_MAP)
    taints: tuple[DeviceTaint, ...] = ()
    placement: NodePlacement = NO_PLACEMENT
    allow_multiple_allocations: bool = False
    slice_name: str = ""
    consumes_counters: tuple[CounterConsumption, ...] = ()
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    binds_to_node: bool = False
    unsupported: tuple[str, ...] = ()  # fields draco does not model: never allocated
    capacity_policies: Mapping[str, CapacityPolicy] = field(default_factory=lambda: f.EMPTY_MAP)
    # names published both short and with the driver's domain ("capacity memory"): read
    # with the qualified entry winning, as 1.38 does; before, draco never allocates the
    # device (operators.allocator.inventory.PoolCandidates.refuse_spelled_twice)
    spelled_twice: tuple[str, ...] = ()
    # capacities (qualified) the device spells with its own driver's domain:
    # consumedCapacity names them that way too, and before 1.38 only a request spelling
    # them so reaches them
    domain_spelled: frozenset[str] = frozenset()

    def __hash__(self) -> int:  # the maps are unhashable; equal devices share an id
        return hash(self.id)

    @property
    def node_name(self) -> str | None:
        return self.placement.node_name

    @property
    def node_selector(self) -> NodeSelector | None:
        return self.placement.node_selector

    @property
    def all_nodes(self) -> bool:
        return self.placement.all_nodes


@dataclass(frozen=True, slots=True)
class PoolRef:
    name: str
    generation: int
    resource_slice_count: int


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    kind = "ResourceSlice"  # class attribute, not a field (no annotation)

    meta: ObjectMeta
    driver: str
    pool: PoolRef
    devices: tuple[Device, ...] = ()
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool = False
    per_device_node_selection: bool = False
    shared_counters: tuple[CounterSet, ...] = ()

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def pool_id(self) -> PoolID:
        return PoolID(self.driver, self.pool.name)


# --- parsing -------------------------------------------------------------------------


def parse_attribute(value: object) -> Attribute:
    if not isinstance(value, Mapping):
        raise FieldError(f"expected an object, got {f.type_name(value)}")
    set_kinds = [k for k in value if value[k] is not None]
    if len(set_kinds) != 1:
        raise FieldError(
            f"exactly one of {', '.join(ATTRIBUTE_KINDS)} must be set, got {sorted(set_kinds) or 'none'}"
        )
    kind = set_kinds[0]
    v = value[kind]
    if kind == "string" or kind == "version":
        if not isinstance(v, str):
            raise FieldError(f"expected a string, got {f.type_name(v)}", kind)
    elif kind == "int":
        if isinstance(v, bool) or not isinstance(v, int):
            raise FieldError(f"expected an integer, got {f.type_name(v)}", kind)
    elif kind == "bool":
        if not isinstance(v, bool):
            raise FieldError(f"expected a boolean, got {f.type_name(v)}", kind)
    else:
        raise FieldError(
            f"unknown attribute type {kind!r}; expected one of {', '.join(ATTRIBUTE_KINDS)}"
        )
    return Attribute(kind, v)


def parse_capacity_value(value: object) -> str:
    if not isinstance(value, Mapping):
        raise FieldError(f"expected an object, got {f.type_name(value)}")
    v = value.get("value")
    if v is None:
        raise FieldError("required field is missing", "value")
    if isinstance(v, bool) or not isinstance(v, str | int | float):
        raise FieldError(f"expected a quantity string, got {f.type_name(v)}", "value")
    s = v if isinstance(v, str) else str(v)
    try:
        _check_quantity(s)
    except (ValueError, TypeError) as e:
        raise FieldError(f"invalid quantity {s!r}: {e}", "value") from None
    return s


class _Read(NamedTuple):
    """A qualified-name map as read, with how the device spelled its driver's names."""

    values: Mapping[str, Any]
    twice: tuple[str, ...]  # qualified names published both short and qualified
    domain_spelled: frozenset[str]  # qualified names spelled with the driver's domain


def _qualified_map(d: Mapping[str, Any], key: str, driver: str, parse: Callable[[Any], T]) -> _Read:
    """`attributes` or `capacity`, keyed by qualified name. Upstream treats a short name
    and its spelling with the driver's domain as one entry; when a device publishes both,
    the qualified entry wins (1.38's reading; as earlier releases draco never allocates
    such a device, which the allocator decides from `twice`)."""
    raw = f.obj(d, key)
    if not raw:
        return _Read(f.EMPTY_MAP, (), frozenset())
    out: dict[str, T] = {}
    twice: list[str] = []
    spelled: set[str] = set()
    for name, value in raw.items():
        try:
            if not isinstance(name, str) or not name:
                raise FieldError(f"{key} names must be non-empty strings")
            q = qualify(name, driver)
            parsed = parse(value)  # both spellings must be readable
        except FieldError as e:
            raise e.at(str(name)).at(key) from None
        qualified = "/" in name
        if qualified and q.rpartition("/")[0] == driver:
            spelled.add(q)
        if q in out:
            twice.append(q)
            if not qualified:
                continue  # the qualified spelling, read already, wins
        out[q] = parsed
    return _Read(MappingProxyType(out), tuple(twice), frozenset(spelled))


def parse_taint(d: object, source: str = "") -> DeviceTaint:
    if not isinstance(d, Mapping):
        raise FieldError(f"expected an object, got {f.type_name(d)}")
    effect = f.string(d, "effect", required=True)
    return DeviceTaint(
        key=f.string(d, "key", required=True),
        value=f.string(d, "value"),
        effect=effect,
        time_added=f.opt_time(d, "timeAdded"),
        source=source,
    )


def parse_taints(d: Mapping[str, Any], key: str, source: str) -> tuple[DeviceTaint, ...]:
    return f.each(d, key, lambda t: parse_taint(t, source))


def parse_toleration(d: object) -> DeviceToleration:
    """One toleration as the API validates it (raises FieldError otherwise).

    An empty key goes with either operator, as upstream's validation allows: with Equal
    it tolerates every taint whose value equals the toleration's.
    """
    if not isinstance(d, Mapping):
        raise FieldError(f"expected an object, got {f.type_name(d)}")
    tol = DeviceToleration(
        key=f.string(d, "key"),
        operator=f.enum(d, "operator", TOLERATION_OPERATORS, default="Equal"),
        value=f.string(d, "value"),
        effect=f.string(d, "effect"),
        toleration_seconds=f.opt_integer(d, "tolerationSeconds"),
    )
    if tol.operator == "Exists" and tol.value:
        raise FieldError("must be empty when operator is Exists", "value")
    return tol


def parse_tolerations(
    d: Mapping[str, Any], key: str = "tolerations"
) -> tuple[DeviceToleration, ...]:
    """The tolerations of a request or an allocation result, never failing the object.

    An entry draco cannot read becomes a toleration that tolerates nothing and carries
    the problem (field path relative to the owning request or result), so the claim is
    still evicted where upstream would evict it and the problem can be reported.
    """
    try:
        items = f.lst(d, key)
    except FieldError as e:
        return (DeviceToleration(operator="", problem=f"{e.path}: {e.message}"),)
    out = []
    for i, t in enumerate(items):
        try:
            out.append(parse_toleration(t))
        except FieldError as e:
            where = f"{key}[{i}]" + (f".{e.path}" if e.path else "")
            out.append(DeviceToleration(operator="", problem=f"{where}: {e.message}"))
    return tuple(out)


def _placement(d: Mapping[str, Any], allow_per_device: bool) -> tuple[NodePlacement, bool]:
    """Slice- or device-level placement; exactly one of the fields may be set."""
    node_name = f.opt_string(d, "nodeName") or None
    node_selector = opt_node_selector(d, "nodeSelector")
    all_nodes = f.boolean(d, "allNodes")
    per_device = f.boolean(d, "perDeviceNodeSelection") if allow_per_device else False
    set_fields = [
        n
        for n, on in (
            ("nodeName", node_name is not None),
            ("nodeSelector", node_selector is not None),
            ("allNodes", all_nodes),
            ("perDeviceNodeSelection", per_device),
        )
        if on
    ]
    if len(set_fields) > 1:
        raise FieldError(f"only one of {', '.join(set_fields)} may be set", set_fields[1])
    if all_nodes:
        return ALL_NODES, per_device
    if node_name is None and node_selector is None:
        return NO_PLACEMENT, per_device
    return NodePlacement(node_name, node_selector, False), per_device


def parse_device(
    d: object,
    driver: str,
    pool: str,
    slice_placement: NodePlacement | None,
    slice_name: str,
    taint_source: str,
) -> Device:
    """`slice_placement` None means perDeviceNodeSelection: read placement from the device."""
    if not isinstance(d, Mapping):
        raise FieldError(f"expected an object, got {f.type_name(d)}")
    name = f.string(d, "name", required=True)
    if slice_placement is None:
        placement, _ = _placement(d, allow_per_device=False)
    else:
        placement = slice_placement
    attributes = _qualified_map(d, "attributes", driver, parse_attribute)
    capacity = _qualified_map(d, "capacity", driver, parse_capacity_value)
    twice = (*(f"attribute {n}" for n in attributes.twice),
             *(f"capacity {n}" for n in capacity.twice))
    return Device(
        id=DeviceID(driver, pool, name),
        attributes=attributes.values,
        capacity=capacity.values,
        taints=parse_taints(d, "taints", taint_source) if "taints" in d else (),
        placement=placement,
        allow_multiple_allocations=f.boolean(d, "allowMultipleAllocations"),
        slice_name=slice_name,
        consumes_counters=tuple(f.each(d, "consumesCounters", parse_consumption)),
        binding_conditions=_names(d, "bindingConditions"),
        binding_failure_conditions=_names(d, "bindingFailureConditions"),
        binds_to_node=f.boolean(d, "bindsToNode"),
        unsupported=unsupported_fields(d),
        capacity_policies=parse_policies(d, driver),
        spelled_twice=twice,
        domain_spelled=capacity.domain_spelled,
    )


def _names(d: Mapping[str, Any], key: str) -> tuple[str, ...]:
    return tuple(f.each(d, key, lambda v: v if isinstance(v, str) and v else _bad_name(v)))


def _bad_name(v: object) -> str:
    raise FieldError(f"expected a non-empty string, got {f.type_name(v)}")


def parse_slice_spec(meta: ObjectMeta, spec: Mapping[str, Any]) -> ResourceSlice:
    driver = f.string(spec, "driver", required=True)
    try:
        p = f.obj(spec, "pool", required=True)
        pool = PoolRef(
            name=f.string(p, "name", required=True),
            generation=f.integer(p, "generation", required=True),
            resource_slice_count=f.integer(p, "resourceSliceCount", required=True),
        )
        if pool.resource_slice_count <= 0:
            raise FieldError("must be greater than zero", "resourceSliceCount")
        if pool.generation < 0:
            raise FieldError("must not be negative", "generation")
    except FieldError as e:
        if e.segments[-1] != "pool":
            e.at("pool")
        raise
    placement, per_device = _placement(spec, allow_per_device=True)
    source = f"ResourceSlice/{meta.name}"
    dev_placement = None if per_device else placement
    devices = f.each(spec, "devices",
                     lambda d: parse_device(d, driver, pool.name, dev_placement, meta.name, source))
    return ResourceSlice(
        meta=meta,
        driver=driver,
        pool=pool,
        devices=tuple(devices),
        node_name=placement.node_name,
        node_selector=placement.node_selector,
        all_nodes=placement.all_nodes,
        per_device_node_selection=per_device,
        shared_counters=tuple(f.each(spec, "sharedCounters",
                                     lambda c: parse_counter_set(c, meta.name))),
    )
