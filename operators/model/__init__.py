"""draco's typed, immutable views of the API objects it reads (layer 1, no I/O).

Parse plain dicts (as kopf, the kubernetes client or YAML give them) into frozen,
slotted dataclasses; collections are tuples and read-only mappings.

Entry points
    parse_object(d: Mapping, kind: str | None = None) -> APIObject | <registered kind>
    parse_objects(items: Iterable[Mapping]) -> tuple[list[object], list[ModelError]]
    register_parser(kind: str, parser: Callable[[Mapping], object]) -> None
    parse_resource_slice / parse_device_class / parse_resource_claim / parse_pod_object
    ref_of(d: Mapping) -> ObjectRef      (identity of even a malformed object)

Errors
    ModelError(ref: ObjectRef, path: str, message: str)   e.g. path "spec.devices[3].attributes.model"
    FieldError: raised inside parsers of registered kinds; parse_object adds the object ref

Identity
    ObjectRef(kind, namespace, name)  str() -> "Kind ns/name" or "Kind name"
    NamespacedName(namespace, name)   key of claims and pods
    DeviceID(driver, pool, device)    NamedTuple, sortable;  PoolID(driver, pool)
    ObjectMeta(name, namespace, uid, resource_version, generation, creation_timestamp,
               deletion_timestamp, labels, annotations)

Devices (ResourceSlice)
    ResourceSlice(meta, driver, pool: PoolRef(name, generation, resource_slice_count),
                  devices: tuple[Device], node_name, node_selector, all_nodes,
                  per_device_node_selection, shared_counters: tuple[CounterSet])
    Device(id, attributes: Mapping[qualified name, Attribute], capacity: Mapping[qualified
           name, str], taints: tuple[DeviceTaint], placement: NodePlacement,
           allow_multiple_allocations, slice_name, consumes_counters:
           tuple[CounterConsumption], binding_conditions, binding_failure_conditions,
           binds_to_node, unsupported: field paths draco does not model)
           (+ name/driver/pool/node_* properties)
    CounterSet(name, counters: Mapping[name, Quantity], slice_name);
    CounterConsumption(counter_set, counters)
    NodePlacement(node_name, node_selector, all_nodes).matches(node_name, labels)
    DeviceTaint(key, value, effect, time_added, source)  .known_effect: unknown -> "None"
    DeviceToleration(key, operator, value, effect, toleration_seconds).tolerates(taint)
    Attribute(kind, value), qualify(name, driver), split_qualified(qualified)

Selectors
    DeviceSelector(expression)  (CEL, evaluated by operators.cel)
    NodeSelector(terms) / NodeSelectorTerm / NodeSelectorRequirement, .matches(), .to_api()

Classes and claims
    DeviceClass(meta, selectors, config: tuple[DeviceClassConfiguration], extended_resource_name)
    ResourceClaim(meta, requests: tuple[DeviceRequest], constraints, config,
                  allocation: AllocationResult | None, reserved_for: tuple[ConsumerRef])
        .spec_for(result_request) .annotation_tolerations() .tolerations_for(result)
    DeviceRequest(name, exactly: ExactDeviceRequest | None, first_available: tuple[DeviceSubRequest])
        .alternatives() -> ((result request name, spec), ...)
    ExactDeviceRequest / DeviceSubRequest(device_class_name, selectors, allocation_mode
        "ExactCount"|"All", count, admin_access, tolerations)
    DeviceConstraint(requests, match_attribute, distinct_attribute)
    AllocationResult(results: tuple[DeviceRequestAllocationResult], config, node_selector,
                     allocation_timestamp)
    DeviceRequestAllocationResult(request, driver, pool, device, admin_access, tolerations,
                                  share_id).id -> DeviceID
    TOLERATIONS_ANNOTATION = "resource.draco.dev/tolerations"

Pods
    Pod(meta, node_name, scheduling_gates, resource_claims: tuple[PodResourceClaim],
        node_selector, affinity (frozen), required_node_affinity: NodeSelector | None, phase,
        resource_claim_statuses, extended_resource_claim_status)
        .claim_names() .claim_keys() .claim_name(pod_claim) .has_gate(gate) .terminal

Free-form JSON (opaque parameters, affinity) is frozen with `freeze` and turned back into
plain dicts/lists with `thaw`.
"""

from operators.model.claims import (
    ALLOCATION_MODES,
    TOLERATIONS_ANNOTATION,
    AllocationMode,
    AllocationResult,
    ConsumerRef,
    DeviceAllocationConfiguration,
    DeviceClaimConfiguration,
    DeviceConstraint,
    DeviceRequest,
    DeviceRequestAllocationResult,
    DeviceSubRequest,
    ExactDeviceRequest,
    RequestSpec,
    ResourceClaim,
)
from operators.model.counters import CounterConsumption, CounterSet
from operators.model.deviceclass import (
    DeviceClass,
    DeviceClassConfiguration,
    OpaqueDeviceConfiguration,
)
from operators.model.devices import (
    KNOWN_TAINT_EFFECTS,
    Device,
    DeviceID,
    DeviceTaint,
    DeviceToleration,
    NodePlacement,
    PoolID,
    PoolRef,
    ResourceSlice,
    TaintEffect,
    parse_attribute,
    parse_taint,
    parse_toleration,
)
from operators.model.errors import FieldError, ModelError, ObjectRef
from operators.model.fields import freeze, thaw
from operators.model.meta import NamespacedName, ObjectMeta
from operators.model.objects import (
    APIObject,
    known_kinds,
    parse_device_class,
    parse_object,
    parse_objects,
    parse_pod_object,
    parse_resource_claim,
    parse_resource_slice,
    ref_of,
    register_parser,
)
from operators.model.pods import (
    ContainerExtendedResourceRequest,
    Pod,
    PodExtendedResourceClaimStatus,
    PodResourceClaim,
    PodResourceClaimStatus,
)
from operators.model.selectors import (
    DeviceSelector,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
)
from operators.model.values import Attribute, qualify, split_qualified

__all__ = [
    "CounterConsumption",
    "CounterSet",
    "ALLOCATION_MODES",
    "KNOWN_TAINT_EFFECTS",
    "TOLERATIONS_ANNOTATION",
    "APIObject",
    "AllocationMode",
    "AllocationResult",
    "Attribute",
    "ConsumerRef",
    "ContainerExtendedResourceRequest",
    "Device",
    "DeviceAllocationConfiguration",
    "DeviceClaimConfiguration",
    "DeviceClass",
    "DeviceClassConfiguration",
    "DeviceConstraint",
    "DeviceID",
    "DeviceRequest",
    "DeviceRequestAllocationResult",
    "DeviceSelector",
    "DeviceSubRequest",
    "DeviceTaint",
    "DeviceToleration",
    "ExactDeviceRequest",
    "FieldError",
    "ModelError",
    "NamespacedName",
    "NodePlacement",
    "NodeSelector",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "ObjectMeta",
    "ObjectRef",
    "OpaqueDeviceConfiguration",
    "Pod",
    "PodExtendedResourceClaimStatus",
    "PodResourceClaim",
    "PodResourceClaimStatus",
    "PoolID",
    "PoolRef",
    "RequestSpec",
    "ResourceClaim",
    "ResourceSlice",
    "TaintEffect",
    "freeze",
    "known_kinds",
    "parse_attribute",
    "parse_device_class",
    "parse_object",
    "parse_objects",
    "parse_pod_object",
    "parse_resource_claim",
    "parse_resource_slice",
    "parse_taint",
    "parse_toleration",
    "qualify",
    "ref_of",
    "register_parser",
    "split_qualified",
    "thaw",
]
