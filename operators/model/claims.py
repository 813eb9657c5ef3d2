"""ResourceClaim: what a workload asks for and, once allocated, what it got.

Allocation result request names are `<request>` for `exactly` requests and
`<request>/<subrequest>` for `firstAvailable`; `DeviceRequest.alternative` resolves
both spellings back to the spec that produced them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from operators.model import fields as f
from operators.model.capacity import parse_capacity_requests, parse_consumed
from operators.model.deviceclass import OpaqueDeviceConfiguration, parse_opaque
from operators.model.devices import DeviceID, DeviceToleration, parse_toleration, parse_tolerations
from operators.model.errors import FieldError, ModelError, ObjectRef
from operators.model.meta import NamespacedObject, ObjectMeta
from operators.model.quantity import Quantity
from operators.model.selectors import (
    DeviceSelector,
    NodeSelector,
    opt_node_selector,
    parse_device_selectors,
)

AllocationMode = Literal["ExactCount", "All"]
ALLOCATION_MODES: tuple[str, ...] = ("ExactCount", "All")
TOLERATIONS_ANNOTATION = "resource.draco.dev/tolerations"


@dataclass(frozen=True, slots=True)
class ExactDeviceRequest:
    device_class_name: str
    selectors: tuple[DeviceSelector, ...] = ()
    allocation_mode: AllocationMode = "ExactCount"
    count: int = 1  # 0 when allocation_mode is All
    admin_access: bool = False
    tolerations: tuple[DeviceToleration, ...] = ()
    unsupported: tuple[str, ...] = ()  # fields draco does not model: never allocated
    capacity: Mapping[str, Quantity] = field(default_factory=lambda: f.EMPTY_MAP)  # KEP-5075


@dataclass(frozen=True, slots=True)
class DeviceSubRequest:
    name: str
    device_class_name: str
    selectors: tuple[DeviceSelector, ...] = ()
    allocation_mode: AllocationMode = "ExactCount"
    count: int = 1
    tolerations: tuple[DeviceToleration, ...] = ()
    admin_access: bool = False  # subrequests cannot ask for admin access; uniform reads
    unsupported: tuple[str, ...] = ()
    capacity: Mapping[str, Quantity] = field(default_factory=lambda: f.EMPTY_MAP)


RequestSpec = ExactDeviceRequest | DeviceSubRequest


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """Exactly one of `exactly` / `first_available` is set."""

    name: str
    exactly: ExactDeviceRequest | None = None
    first_available: tuple[DeviceSubRequest, ...] = ()

    def alternatives(self) -> tuple[tuple[str, RequestSpec], ...]:
        """(result request name, spec) in the order the allocator must try them."""
        if self.exactly is not None:
            return ((self.name, self.exactly),)
        return tuple((f"{self.name}/{s.name}", s) for s in self.first_available)

    def alternative(self, result_request: str) -> RequestSpec | None:
        for name, spec in self.alternatives():
            if name == result_request:
                return spec
        return None


@dataclass(frozen=True, slots=True)
class DeviceConstraint:
    requests: tuple[str, ...] = ()  # empty: applies to all requests
    match_attribute: str | None = None
    distinct_attribute: str | None = None


@dataclass(frozen=True, slots=True)
class DeviceClaimConfiguration:
    requests: tuple[str, ...] = ()
    opaque: OpaqueDeviceConfiguration | None = None


@dataclass(frozen=True, slots=True)
class DeviceAllocationConfiguration:
    source: str  # FromClass | FromClaim
    requests: tuple[str, ...] = ()
    opaque: OpaqueDeviceConfiguration | None = None


@dataclass(frozen=True, slots=True)
class DeviceRequestAllocationResult:
    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool = False
    tolerations: tuple[DeviceToleration, ...] = ()
    share_id: str | None = None
    consumed_capacity: Mapping[str, Quantity] = field(default_factory=lambda: f.EMPTY_MAP)
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()

    @property
    def id(self) -> DeviceID:
        return DeviceID(self.driver, self.pool, self.device)

    @property
    def parent_request(self) -> str:
        """`gpu/h100` -> `gpu`: the claim's request this result satisfies."""
        return self.request.partition("/")[0]


@dataclass(frozen=True, slots=True)
class AllocationResult:
    results: tuple[DeviceRequestAllocationResult, ...] = ()
    config: tuple[DeviceAllocationConfiguration, ...] = ()
    node_selector: NodeSelector | None = None
    allocation_timestamp: datetime | None = None


@dataclass(frozen=True, slots=True)
class ConsumerRef:
    """An entry of status.reservedFor (for pods: resource "pods", api_group "")."""

    resource: str
    name: str
    uid: str
    api_group: str = ""

    @property
    def is_pod(self) -> bool:
        return self.resource == "pods" and self.api_group == ""

    @property
    def is_pod_group(self) -> bool:
        return self.resource == "podgroups" and self.api_group == "scheduling.k8s.io"


@dataclass(frozen=True, slots=True)
class AllocatedDeviceStatus:
    """An entry of status.devices (drivers report on allocated devices): only what
    binding conditions (KEP-5007) need, the condition types with their status."""

    driver: str
    pool: str
    device: str
    share_id: str | None = None
    conditions: tuple[tuple[str, str], ...] = ()  # (type, status)

    def condition(self, type_: str) -> str | None:
        return next((st for t, st in self.conditions if t == type_), None)


@dataclass(frozen=True, slots=True)
class ResourceClaim(NamespacedObject):
    kind = "ResourceClaim"

    meta: ObjectMeta
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[DeviceConstraint, ...] = ()
    config: tuple[DeviceClaimConfiguration, ...] = ()
    allocation: AllocationResult | None = None
    reserved_for: tuple[ConsumerRef, ...] = ()
    device_statuses: tuple[AllocatedDeviceStatus, ...] = ()

    def device_status(self, driver: str, pool: str, device: str) -> AllocatedDeviceStatus | None:
        """The first status entry for the device, whatever its share (as kube-scheduler
        looks it up for binding conditions)."""
        return next((d for d in self.device_statuses
                     if (d.driver, d.pool, d.device) == (driver, pool, device)), None)

    @property
    def allocated(self) -> bool:
        return self.allocation is not None

    def reserved_for_pod(self, uid: str, pod_group: str = "") -> bool:
        """Reserved for the pod with UID, or (KEP-5729) for the PodGroup it belongs to
        (`pod_group`, its spec.schedulingGroup.podGroupName): upstream accepts a group's
        reservation by name, the pod not knowing the group's UID."""
        return any((r.is_pod and r.uid == uid) or (
            pod_group and r.is_pod_group and r.name == pod_group) for r in self.reserved_for)

    def request(self, name: str) -> DeviceRequest | None:
        parent = name.partition("/")[0]
        for r in self.requests:
            if r.name == parent:
                return r
        return None

    def spec_for(self, result_request: str) -> RequestSpec | None:
        r = self.request(result_request)
        return r.alternative(result_request) if r is not None else None

    def annotation_tolerations(self) -> tuple[DeviceToleration, ...]:
        """draco's fallback tolerations (clusters that drop the API fields). Raises ModelError."""
        raw = self.meta.annotations.get(TOLERATIONS_ANNOTATION)
        if not raw:
            return ()
        ref = ObjectRef("ResourceClaim", self.meta.namespace, self.meta.name)
        path = f'metadata.annotations["{TOLERATIONS_ANNOTATION}"]'
        try:
            items = json.loads(raw)
        except ValueError as e:
            raise ModelError(ref, path, f"not valid JSON: {e}") from None
        if not isinstance(items, list):
            raise ModelError(ref, path, f"expected a JSON array, got {f.type_name(items)}")
        out = []
        for i, t in enumerate(items):
            try:
                out.append(parse_toleration(t))
            except FieldError as e:
                raise ModelError(
                    ref, f"{path}[{i}]" + (f".{e.path}" if e.path else ""), e.message
                ) from None
        return tuple(out)

    def tolerations_for(
        self, result: DeviceRequestAllocationResult
    ) -> tuple[DeviceToleration, ...]:
        """Union of the result's copy, the (sub)request's own and the annotation's tolerations."""
        seen: dict[DeviceToleration, None] = dict.fromkeys(result.tolerations)
        spec = self.spec_for(result.request)
        if spec is not None:
            seen.update(dict.fromkeys(spec.tolerations))
        seen.update(dict.fromkeys(self.annotation_tolerations()))
        return tuple(seen)

    def toleration_problems(self) -> tuple[tuple[str, str], ...]:
        """(field path, problem) of every toleration draco could not read.

        Such tolerations tolerate nothing, so the claim stays evictable; callers report
        these (log, Event, a view's `errors`) rather than drop the claim.
        """
        found: list[tuple[str, str]] = []

        def add(prefix: str, tolerations: tuple[DeviceToleration, ...]) -> None:
            for t in tolerations:
                if t.problem:
                    path, _, message = t.problem.partition(": ")
                    found.append((f"{prefix}.{path}", message))

        for i, r in enumerate(self.requests):
            if r.exactly is not None:
                add(f"spec.devices.requests[{i}].exactly", r.exactly.tolerations)
            for j, s in enumerate(r.first_available):
                add(f"spec.devices.requests[{i}].firstAvailable[{j}]", s.tolerations)
        if self.allocation is not None:
            for k, res in enumerate(self.allocation.results):
                add(f"status.allocation.devices.results[{k}]", res.tolerations)
        try:
            self.annotation_tolerations()
        except ModelError as e:
            found.append((e.path, e.message))
        return tuple(found)


# --- parsing -------------------------------------------------------------------------


def _mode_and_count(d: Mapping[str, Any]) -> tuple[AllocationMode, int]:
    mode = f.enum(d, "allocationMode", ALLOCATION_MODES, default="ExactCount")
    if mode == "All":
        # The API server refuses a count here; upstream's allocator ignores one, and so does
        # draco: the mode alone says what is wanted.
        return "All", 0
    count = f.integer(d, "count", default=1)
    if count <= 0:
        raise FieldError("must be greater than zero", "count")
    return "ExactCount", count


# The request fields of resource.k8s.io/v1 draco acts on. Any other field set (an alpha
# of a newer Kubernetes) keeps draco from allocating the claim:
# allocating as if it were absent could hand out what upstream would refuse.
EXACT_FIELDS = frozenset({"deviceClassName", "selectors", "allocationMode", "count",
                          "adminAccess", "tolerations", "capacity"})
SUB_FIELDS = frozenset({"name", "deviceClassName", "selectors", "allocationMode", "count",
                        "tolerations", "capacity"})


def _unsupported(d: Mapping[str, Any], known: frozenset[str]) -> tuple[str, ...]:
    return tuple(sorted(k for k in d if k not in known and d[k] is not None))


def _exact(d: object) -> ExactDeviceRequest:
    if not isinstance(d, Mapping):
        raise FieldError(f"expected an object, got {f.type_name(d)}")
    mode, count = _mode_and_count(d)
    return ExactDeviceRequest(
        device_class_name=f.string(d, "deviceClassName", required=True),
        selectors=parse_device_selectors(d),
        allocation_mode=mode,
        count=count,
        admin_access=f.boolean(d, "adminAccess"),
        tolerations=parse_tolerations(d),
        unsupported=_unsupported(d, EXACT_FIELDS),
        capacity=parse_capacity_requests(d),
    )


def _sub(d: object) -> DeviceSubRequest:
    if not isinstance(d, Mapping):
        raise FieldError(f"expected an object, got {f.type_name(d)}")
    mode, count = _mode_and_count(d)
    return DeviceSubRequest(
        name=f.string(d, "name", required=True),
        device_class_name=f.string(d, "deviceClassName", required=True),
        selectors=parse_device_selectors(d),
        allocation_mode=mode,
        count=count,
        tolerations=parse_tolerations(d),
        unsupported=_unsupported(d, SUB_FIELDS),
        capacity=parse_capacity_requests(d),
    )


def _request(d: object) -> DeviceRequest:
    if not isinstance(d, Mapping):
        raise FieldError(f"expected an object, got {f.type_name(d)}")
    name = f.string(d, "name", required=True)
    exactly_raw = d.get("exactly")
    first_raw = f.lst(d, "firstAvailable")
    if exactly_raw is not None and first_raw:
        raise FieldError("exactly and firstAvailable are mutually exclusive", "firstAvailable")
    if exactly_raw is not None:
        try:
            return DeviceRequest(name, exactly=_exact(exactly_raw))
        except FieldError as e:
            raise e.at("exactly") from None
    if not first_raw:
        raise FieldError("one of exactly or firstAvailable is required", "exactly")
    return DeviceRequest(name, first_available=f.each(d, "firstAvailable", _sub))


def _constraint(d: Mapping[str, Any]) -> DeviceConstraint:
    return DeviceConstraint(
        requests=f.string_list(d, "requests"),
        match_attribute=f.opt_string(d, "matchAttribute"),
        distinct_attribute=f.opt_string(d, "distinctAttribute"),
    )


def _claim_config(d: Mapping[str, Any]) -> DeviceClaimConfiguration:
    return DeviceClaimConfiguration(requests=f.string_list(d, "requests"), opaque=parse_opaque(d))


def _alloc_config(d: Mapping[str, Any]) -> DeviceAllocationConfiguration:
    return DeviceAllocationConfiguration(
        source=f.enum(d, "source", ("FromClass", "FromClaim"), default="FromClaim"),
        requests=f.string_list(d, "requests"),
        opaque=parse_opaque(d),
    )


def _result(d: Mapping[str, Any]) -> DeviceRequestAllocationResult:
    return DeviceRequestAllocationResult(
        request=f.string(d, "request", required=True),
        driver=f.string(d, "driver", required=True),
        pool=f.string(d, "pool", required=True),
        device=f.string(d, "device", required=True),
        admin_access=f.boolean(d, "adminAccess"),
        tolerations=parse_tolerations(d),
        share_id=f.opt_string(d, "shareID"),
        consumed_capacity=parse_consumed(d),
        binding_conditions=f.string_list(d, "bindingConditions"),
        binding_failure_conditions=f.string_list(d, "bindingFailureConditions"),
    )


def _consumer(d: Mapping[str, Any]) -> ConsumerRef:
    return ConsumerRef(
        resource=f.string(d, "resource", required=True),
        name=f.string(d, "name", required=True),
        uid=f.string(d, "uid"),
        api_group=f.string(d, "apiGroup"),
    )


def _allocation(d: Mapping[str, Any]) -> AllocationResult:
    devices = f.obj(d, "devices")
    try:
        results = f.objects(devices, "results", _result)
        config = f.objects(devices, "config", _alloc_config)
    except FieldError as e:
        raise e.at("devices") from None
    return AllocationResult(
        results=results,
        config=config,
        node_selector=opt_node_selector(d, "nodeSelector"),
        allocation_timestamp=f.opt_time(d, "allocationTimestamp"),
    )


def parse_claim(
    meta: ObjectMeta, spec: Mapping[str, Any], status: Mapping[str, Any]
) -> ResourceClaim:
    try:
        devices = f.obj(spec, "devices")
        try:
            requests = f.objects(devices, "requests", _request)
            constraints = f.objects(devices, "constraints", _constraint)
            config = f.objects(devices, "config", _claim_config)
        except FieldError as e:
            raise e.at("devices") from None
    except FieldError as e:
        raise e.at("spec") from None
    try:
        alloc_raw = f.opt_obj(status, "allocation")
        try:
            allocation = _allocation(alloc_raw) if alloc_raw is not None else None
        except FieldError as e:
            raise e.at("allocation") from None
        reserved = f.objects(status, "reservedFor", _consumer)
        device_statuses = f.objects(status, "devices", _device_status)
    except FieldError as e:
        raise e.at("status") from None
    return ResourceClaim(
        meta=meta,
        requests=requests,
        constraints=constraints,
        config=config,
        allocation=allocation,
        reserved_for=reserved,
        device_statuses=device_statuses,
    )


def _device_status(d: Mapping[str, Any]) -> AllocatedDeviceStatus:
    conditions = []
    for c in f.lst(d, "conditions"):
        if isinstance(c, Mapping) and isinstance(c.get("type"), str):
            conditions.append((str(c["type"]), str(c.get("status") or "")))
    return AllocatedDeviceStatus(
        driver=f.string(d, "driver", required=True),
        pool=f.string(d, "pool", required=True),
        device=f.string(d, "device", required=True),
        share_id=f.opt_string(d, "shareID"),
        conditions=tuple(conditions),
    )
