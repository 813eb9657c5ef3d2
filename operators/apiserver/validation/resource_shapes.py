"""JSON shapes of the resource.k8s.io/v1 kinds: every field the v1 Go types carry
(alpha-gated ones included), with its decoded type; "@type" names the Go struct (for
decoder messages). Derived once from the published k8s.io/api v0.34 types; "any" marks
fields whose content is not checked here. Each Go struct is one constant, named after
it, so a struct used in several places (a toleration, a selector) is written once.
"""

from __future__ import annotations

from typing import Any

RESOURCE_POOL: dict[str, Any] = {
    '@type': 'ResourcePool',
    'name': 'string',
    'generation': 'int64',
    'resourceSliceCount': 'int64',
}


DEVICE_ATTRIBUTE: dict[str, Any] = {
    '@type': 'DeviceAttribute',
    'int': 'int64',
    'bool': 'bool',
    'string': 'string',
    'version': 'string',
}


CAPACITY_REQUEST_POLICY_RANGE: dict[str, Any] = {
    '@type': 'CapacityRequestPolicyRange',
    'min': 'quantity',
    'max': 'quantity',
    'step': 'quantity',
}


CAPACITY_REQUEST_POLICY: dict[str, Any] = {
    '@type': 'CapacityRequestPolicy',
    'default': 'quantity',
    'validValues': ['quantity'],
    'validRange': CAPACITY_REQUEST_POLICY_RANGE,
}


DEVICE_CAPACITY: dict[str, Any] = {
    '@type': 'DeviceCapacity',
    'value': 'quantity',
    'requestPolicy': CAPACITY_REQUEST_POLICY,
}


COUNTER: dict[str, Any] = {
    '@type': 'Counter',
    'value': 'quantity',
}


DEVICE_COUNTER_CONSUMPTION: dict[str, Any] = {
    '@type': 'DeviceCounterConsumption',
    'counterSet': 'string',
    'counters': {
        '*': COUNTER,
    },
}


DEVICE_TAINT: dict[str, Any] = {
    '@type': 'DeviceTaint',
    'key': 'string',
    'value': 'string',
    'effect': 'string',
    'timeAdded': 'string',
}


DEVICE: dict[str, Any] = {
    '@type': 'Device',
    'name': 'string',
    'attributes': {
        '*': DEVICE_ATTRIBUTE,
    },
    'capacity': {
        '*': DEVICE_CAPACITY,
    },
    'consumesCounters': [DEVICE_COUNTER_CONSUMPTION],
    'nodeName': 'string',
    'nodeSelector': 'any',
    'allNodes': 'bool',
    'taints': [DEVICE_TAINT],
    'bindsToNode': 'bool',
    'bindingConditions': ['string'],
    'bindingFailureConditions': ['string'],
    'allowMultipleAllocations': 'bool',
}


COUNTER_SET: dict[str, Any] = {
    '@type': 'CounterSet',
    'name': 'string',
    'counters': {
        '*': COUNTER,
    },
}


RESOURCE_SLICE_SPEC: dict[str, Any] = {
    '@type': 'ResourceSliceSpec',
    'driver': 'string',
    'pool': RESOURCE_POOL,
    'nodeName': 'string',
    'nodeSelector': 'any',
    'allNodes': 'bool',
    'devices': [DEVICE],
    'perDeviceNodeSelection': 'bool',
    'sharedCounters': [COUNTER_SET],
}


RESOURCE_SLICE: dict[str, Any] = {
    '@type': 'ResourceSlice',
    'apiVersion': 'string',
    'kind': 'string',
    'metadata': 'any',
    'spec': RESOURCE_SLICE_SPEC,
}


C_E_L_DEVICE_SELECTOR: dict[str, Any] = {
    '@type': 'CELDeviceSelector',
    'expression': 'string',
}


DEVICE_SELECTOR: dict[str, Any] = {
    '@type': 'DeviceSelector',
    'cel': C_E_L_DEVICE_SELECTOR,
}


OPAQUE_DEVICE_CONFIGURATION: dict[str, Any] = {
    '@type': 'OpaqueDeviceConfiguration',
    'driver': 'string',
    'parameters': 'any',
}


DEVICE_CLASS_CONFIGURATION: dict[str, Any] = {
    '@type': 'DeviceClassConfiguration',
    'opaque': OPAQUE_DEVICE_CONFIGURATION,
}


DEVICE_CLASS_SPEC: dict[str, Any] = {
    '@type': 'DeviceClassSpec',
    'selectors': [DEVICE_SELECTOR],
    'config': [DEVICE_CLASS_CONFIGURATION],
    'extendedResourceName': 'string',
}


DEVICE_CLASS: dict[str, Any] = {
    '@type': 'DeviceClass',
    'apiVersion': 'string',
    'kind': 'string',
    'metadata': 'any',
    'spec': DEVICE_CLASS_SPEC,
}


DEVICE_TOLERATION: dict[str, Any] = {
    '@type': 'DeviceToleration',
    'key': 'string',
    'operator': 'string',
    'value': 'string',
    'effect': 'string',
    'tolerationSeconds': 'int64',
}


CAPACITY_REQUIREMENTS: dict[str, Any] = {
    '@type': 'CapacityRequirements',
    'requests': {
        '*': 'quantity',
    },
}


EXACT_DEVICE_REQUEST: dict[str, Any] = {
    '@type': 'ExactDeviceRequest',
    'deviceClassName': 'string',
    'selectors': [DEVICE_SELECTOR],
    'allocationMode': 'string',
    'count': 'int64',
    'adminAccess': 'bool',
    'tolerations': [DEVICE_TOLERATION],
    'capacity': CAPACITY_REQUIREMENTS,
}


DEVICE_SUB_REQUEST: dict[str, Any] = {
    '@type': 'DeviceSubRequest',
    'name': 'string',
    'deviceClassName': 'string',
    'selectors': [DEVICE_SELECTOR],
    'allocationMode': 'string',
    'count': 'int64',
    'tolerations': [DEVICE_TOLERATION],
    'capacity': CAPACITY_REQUIREMENTS,
}


DEVICE_REQUEST: dict[str, Any] = {
    '@type': 'DeviceRequest',
    'name': 'string',
    'exactly': EXACT_DEVICE_REQUEST,
    'firstAvailable': [DEVICE_SUB_REQUEST],
}


DEVICE_CONSTRAINT: dict[str, Any] = {
    '@type': 'DeviceConstraint',
    'requests': ['string'],
    'matchAttribute': 'string',
    'distinctAttribute': 'string',
}


DEVICE_CLAIM_CONFIGURATION: dict[str, Any] = {
    '@type': 'DeviceClaimConfiguration',
    'requests': ['string'],
    'opaque': OPAQUE_DEVICE_CONFIGURATION,
}


DEVICE_CLAIM: dict[str, Any] = {
    '@type': 'DeviceClaim',
    'requests': [DEVICE_REQUEST],
    'constraints': [DEVICE_CONSTRAINT],
    'config': [DEVICE_CLAIM_CONFIGURATION],
}


RESOURCE_CLAIM_SPEC: dict[str, Any] = {
    '@type': 'ResourceClaimSpec',
    'devices': DEVICE_CLAIM,
}


DEVICE_REQUEST_ALLOCATION_RESULT: dict[str, Any] = {
    '@type': 'DeviceRequestAllocationResult',
    'request': 'string',
    'driver': 'string',
    'pool': 'string',
    'device': 'string',
    'adminAccess': 'bool',
    'tolerations': [DEVICE_TOLERATION],
    'bindingConditions': ['string'],
    'bindingFailureConditions': ['string'],
    'shareID': 'string',
    'consumedCapacity': {
        '*': 'quantity',
    },
}


DEVICE_ALLOCATION_CONFIGURATION: dict[str, Any] = {
    '@type': 'DeviceAllocationConfiguration',
    'source': 'string',
    'requests': ['string'],
    'opaque': OPAQUE_DEVICE_CONFIGURATION,
}


DEVICE_ALLOCATION_RESULT: dict[str, Any] = {
    '@type': 'DeviceAllocationResult',
    'results': [DEVICE_REQUEST_ALLOCATION_RESULT],
    'config': [DEVICE_ALLOCATION_CONFIGURATION],
}


ALLOCATION_RESULT: dict[str, Any] = {
    '@type': 'AllocationResult',
    'devices': DEVICE_ALLOCATION_RESULT,
    'nodeSelector': 'any',
    'allocationTimestamp': 'string',
}


RESOURCE_CLAIM_CONSUMER_REFERENCE: dict[str, Any] = {
    '@type': 'ResourceClaimConsumerReference',
    'apiGroup': 'string',
    'resource': 'string',
    'name': 'string',
    'uid': 'string',
}


NETWORK_DEVICE_DATA: dict[str, Any] = {
    '@type': 'NetworkDeviceData',
    'interfaceName': 'string',
    'ips': ['string'],
    'hardwareAddress': 'string',
}


ALLOCATED_DEVICE_STATUS: dict[str, Any] = {
    '@type': 'AllocatedDeviceStatus',
    'driver': 'string',
    'pool': 'string',
    'device': 'string',
    'shareID': 'string',
    'conditions': ['any'],
    'data': 'any',
    'networkData': NETWORK_DEVICE_DATA,
}


RESOURCE_CLAIM_STATUS: dict[str, Any] = {
    '@type': 'ResourceClaimStatus',
    'allocation': ALLOCATION_RESULT,
    'reservedFor': [RESOURCE_CLAIM_CONSUMER_REFERENCE],
    'devices': [ALLOCATED_DEVICE_STATUS],
}


RESOURCE_CLAIM: dict[str, Any] = {
    '@type': 'ResourceClaim',
    'apiVersion': 'string',
    'kind': 'string',
    'metadata': 'any',
    'spec': RESOURCE_CLAIM_SPEC,
    'status': RESOURCE_CLAIM_STATUS,
}


RESOURCE_CLAIM_TEMPLATE_SPEC: dict[str, Any] = {
    '@type': 'ResourceClaimTemplateSpec',
    'metadata': 'any',
    'spec': RESOURCE_CLAIM_SPEC,
}


RESOURCE_CLAIM_TEMPLATE: dict[str, Any] = {
    '@type': 'ResourceClaimTemplate',
    'apiVersion': 'string',
    'kind': 'string',
    'metadata': 'any',
    'spec': RESOURCE_CLAIM_TEMPLATE_SPEC,
}


RESOURCE_V1: dict[str, Any] = {
    'ResourceSlice': RESOURCE_SLICE,
    'DeviceClass': DEVICE_CLASS,
    'ResourceClaim': RESOURCE_CLAIM,
    'ResourceClaimTemplate': RESOURCE_CLAIM_TEMPLATE,
}
