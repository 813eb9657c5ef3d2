"""Data tables for the model tests: malformed objects and the field path they must name."""

from __future__ import annotations

import copy
from typing import Any


def slice_obj(**spec_overrides: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "driver": "gpu.example.com",
        "nodeName": "node-a",
        "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1},
        "devices": [
            {
                "name": f"gpu-{i}",
                "attributes": {"model": {"string": "H100"}, "index": {"int": i}},
                "capacity": {"memory": {"value": "80Gi"}},
            }
            for i in range(4)
        ],
    }
    spec.update(spec_overrides)
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "node-a-gpu"},
        "spec": spec,
    }


def claim_obj(
    requests: list[Any] | None = None, status: dict[str, Any] | None = None
) -> dict[str, Any]:
    d: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c1", "namespace": "team-a"},
        "spec": {
            "devices": {
                "requests": requests
                if requests is not None
                else [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]
            }
        },
    }
    if status is not None:
        d["status"] = status
    return d


def pod_obj(
    spec: dict[str, Any] | None = None, status: dict[str, Any] | None = None
) -> dict[str, Any]:
    base: dict[str, Any] = {"containers": [{"name": "main", "image": "x"}]}
    base.update(spec or {})
    d: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p1", "namespace": "team-a"},
        "spec": base,
    }
    if status is not None:
        d["status"] = status
    return d


def _mut(obj: dict[str, Any], path: list[Any], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    cur: Any = out
    for p in path[:-1]:
        cur = cur[p]
    if value is _DELETE:
        del cur[path[-1]]
    else:
        cur[path[-1]] = value
    return out


_DELETE = object()

# (case id, object, expected ref string, expected field path, fragment of the message)
MALFORMED: list[tuple[str, dict[str, Any], str, str, str]] = [
    (
        "slice missing driver",
        _mut(slice_obj(), ["spec", "driver"], _DELETE),
        "ResourceSlice node-a-gpu",
        "spec.driver",
        "required",
    ),
    (
        "slice driver wrong type",
        _mut(slice_obj(), ["spec", "driver"], 7),
        "ResourceSlice node-a-gpu",
        "spec.driver",
        "expected a string",
    ),
    (
        "slice missing pool",
        _mut(slice_obj(), ["spec", "pool"], _DELETE),
        "ResourceSlice node-a-gpu",
        "spec.pool",
        "required",
    ),
    (
        "pool name missing",
        _mut(slice_obj(), ["spec", "pool", "name"], _DELETE),
        "ResourceSlice node-a-gpu",
        "spec.pool.name",
        "required",
    ),
    (
        "pool generation is a string",
        _mut(slice_obj(), ["spec", "pool", "generation"], "1"),
        "ResourceSlice node-a-gpu",
        "spec.pool.generation",
        "expected an integer",
    ),
    (
        "pool slice count zero",
        _mut(slice_obj(), ["spec", "pool", "resourceSliceCount"], 0),
        "ResourceSlice node-a-gpu",
        "spec.pool.resourceSliceCount",
        "greater than zero",
    ),
    (
        "two placements",
        slice_obj(allNodes=True),
        "ResourceSlice node-a-gpu",
        "spec.allNodes",
        "only one of",
    ),
    (
        "devices not a list",
        slice_obj(devices={"gpu-0": {}}),
        "ResourceSlice node-a-gpu",
        "spec.devices",
        "expected an array",
    ),
    (
        "device name missing",
        _mut(slice_obj(), ["spec", "devices", 2, "name"], _DELETE),
        "ResourceSlice node-a-gpu",
        "spec.devices[2].name",
        "required",
    ),
    (
        "attribute with two values",
        _mut(
            slice_obj(), ["spec", "devices", 3, "attributes", "model"], {"string": "H100", "int": 1}
        ),
        "ResourceSlice node-a-gpu",
        "spec.devices[3].attributes.model",
        "exactly one",
    ),
    (
        "attribute of unknown type",
        _mut(slice_obj(), ["spec", "devices", 3, "attributes", "model"], {"float": 1.5}),
        "ResourceSlice node-a-gpu",
        "spec.devices[3].attributes.model",
        "unknown attribute type",
    ),
    (
        "int attribute holding a string",
        _mut(slice_obj(), ["spec", "devices", 1, "attributes", "index"], {"int": "1"}),
        "ResourceSlice node-a-gpu",
        "spec.devices[1].attributes.index.int",
        "expected an integer",
    ),
    (
        "bool attribute holding an int",
        _mut(slice_obj(), ["spec", "devices", 1, "attributes", "index"], {"bool": 1}),
        "ResourceSlice node-a-gpu",
        "spec.devices[1].attributes.index.bool",
        "expected a boolean",
    ),
    (
        # both spellings of one name are read (the qualified wins): the losing one too
        "unreadable short spelling beside a qualified one",
        _mut(
            _mut(
                slice_obj(),
                ["spec", "devices", 0, "attributes", "gpu.example.com/model"],
                {"string": "A100"},
            ),
            ["spec", "devices", 0, "attributes", "model"],
            {},
        ),
        "ResourceSlice node-a-gpu",
        "spec.devices[0].attributes.model",
        "exactly one of",
    ),
    (
        "capacity without value",
        _mut(slice_obj(), ["spec", "devices", 0, "capacity", "memory"], {}),
        "ResourceSlice node-a-gpu",
        "spec.devices[0].capacity.memory.value",
        "required",
    ),
    (
        "capacity not a quantity",
        _mut(slice_obj(), ["spec", "devices", 0, "capacity", "memory"], {"value": "lots"}),
        "ResourceSlice node-a-gpu",
        "spec.devices[0].capacity.memory.value",
        "invalid quantity",
    ),
    (
        "taint without effect",
        _mut(slice_obj(), ["spec", "devices", 1, "taints"], [{"key": "k"}]),
        "ResourceSlice node-a-gpu",
        "spec.devices[1].taints[0].effect",
        "required",
    ),
    (
        "taint with a bad timestamp",
        _mut(
            slice_obj(),
            ["spec", "devices", 1, "taints"],
            [{"key": "k", "effect": "NoExecute", "timeAdded": "yesterday"}],
        ),
        "ResourceSlice node-a-gpu",
        "spec.devices[1].taints[0].timeAdded",
        "RFC 3339",
    ),
    (
        "node selector with unknown operator",
        slice_obj(
            nodeName=None,
            nodeSelector={
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "Near", "values": ["a"]}]}
                ]
            },
        ),
        "ResourceSlice node-a-gpu",
        "spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].operator",
        "unknown value",
    ),
    (
        "per-device placement with two fields",
        _mut(
            slice_obj(nodeName=None, perDeviceNodeSelection=True),
            ["spec", "devices", 2],
            {"name": "gpu-2", "nodeName": "n", "allNodes": True},
        ),
        "ResourceSlice node-a-gpu",
        "spec.devices[2].allNodes",
        "only one of",
    ),
    (
        "metadata missing",
        {"kind": "ResourceSlice", "spec": {}},
        "ResourceSlice <unnamed>",
        "metadata",
        "required",
    ),
    (
        "claim without namespace",
        _mut(claim_obj(), ["metadata", "namespace"], _DELETE),
        "ResourceClaim c1",
        "metadata.namespace",
        "required",
    ),
    (
        "unknown allocation mode",
        claim_obj([{"name": "gpu", "exactly": {"deviceClassName": "c", "allocationMode": "Some"}}]),
        "ResourceClaim team-a/c1",
        "spec.devices.requests[0].exactly.allocationMode",
        "unknown value",
    ),
    (
        "negative count",
        claim_obj([{"name": "gpu", "exactly": {"deviceClassName": "c", "count": -1}}]),
        "ResourceClaim team-a/c1",
        "spec.devices.requests[0].exactly.count",
        "greater than zero",
    ),
    (
        "request with neither exactly nor firstAvailable",
        claim_obj([{"name": "gpu"}]),
        "ResourceClaim team-a/c1",
        "spec.devices.requests[0].exactly",
        "one of exactly or firstAvailable",
    ),
    (
        "request with both",
        claim_obj(
            [
                {
                    "name": "gpu",
                    "exactly": {"deviceClassName": "c"},
                    "firstAvailable": [{"name": "a", "deviceClassName": "c"}],
                }
            ]
        ),
        "ResourceClaim team-a/c1",
        "spec.devices.requests[0].firstAvailable",
        "mutually exclusive",
    ),
    (
        "subrequest without class",
        claim_obj(
            [
                {
                    "name": "gpu",
                    "firstAvailable": [{"name": "a", "deviceClassName": "c"}, {"name": "b"}],
                }
            ]
        ),
        "ResourceClaim team-a/c1",
        "spec.devices.requests[0].firstAvailable[1].deviceClassName",
        "required",
    ),
    (
        "selector without expression",
        claim_obj(
            [{"name": "gpu", "exactly": {"deviceClassName": "c", "selectors": [{"cel": {}}]}}]
        ),
        "ResourceClaim team-a/c1",
        "spec.devices.requests[0].exactly.selectors[0].cel.expression",
        "required",
    ),
    (
        "allocation result without device",
        claim_obj(
            status={
                "allocation": {
                    "devices": {"results": [{"request": "gpu", "driver": "d", "pool": "p"}]}
                }
            }
        ),
        "ResourceClaim team-a/c1",
        "status.allocation.devices.results[0].device",
        "required",
    ),
    (
        "reservedFor entry not an object",
        claim_obj(status={"reservedFor": ["pod-a"]}),
        "ResourceClaim team-a/c1",
        "status.reservedFor[0]",
        "expected an object",
    ),
    (
        "bad deletion timestamp",
        _mut(claim_obj(), ["metadata", "deletionTimestamp"], "soon"),
        "ResourceClaim team-a/c1",
        "metadata.deletionTimestamp",
        "RFC 3339",
    ),
    (
        "annotations with non-string value",
        _mut(claim_obj(), ["metadata", "annotations"], {"a": 1}),
        "ResourceClaim team-a/c1",
        "metadata.annotations.a",
        "expected a string",
    ),
    (
        "pod claim with two sources",
        pod_obj(
            {
                "resourceClaims": [
                    {"name": "d", "resourceClaimName": "a", "resourceClaimTemplateName": "t"}
                ]
            }
        ),
        "Pod team-a/p1",
        "spec.resourceClaims[0].resourceClaimTemplateName",
        "mutually exclusive",
    ),
    (
        "pod claim without source",
        pod_obj({"resourceClaims": [{"name": "d"}]}),
        "Pod team-a/p1",
        "spec.resourceClaims[0].resourceClaimName",
        "required",
    ),
    (
        "scheduling gate without name",
        pod_obj({"schedulingGates": [{}]}),
        "Pod team-a/p1",
        "spec.schedulingGates[0].name",
        "required",
    ),
    (
        "node affinity with unknown operator",
        pod_obj(
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchFields": [
                                        {"key": "metadata.name", "operator": "Is", "values": ["n"]}
                                    ]
                                }
                            ]
                        }
                    }
                }
            }
        ),
        "Pod team-a/p1",
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        ".nodeSelectorTerms[0].matchFields[0].operator",
        "unknown value",
    ),
    (
        "extended claim status without name",
        pod_obj(status={"extendedResourceClaimStatus": {}}),
        "Pod team-a/p1",
        "status.extendedResourceClaimStatus.resourceClaimName",
        "required",
    ),
    (
        "device class selectors not a list",
        {"kind": "DeviceClass", "metadata": {"name": "gpu"}, "spec": {"selectors": {"cel": {}}}},
        "DeviceClass gpu",
        "spec.selectors",
        "expected an array",
    ),
    (
        "device class opaque config without driver",
        {
            "kind": "DeviceClass",
            "metadata": {"name": "gpu"},
            "spec": {"config": [{"opaque": {"parameters": {}}}]},
        },
        "DeviceClass gpu",
        "spec.config[0].opaque.driver",
        "required",
    ),
    (
        "unknown kind",
        {"kind": "Node", "metadata": {"name": "n"}},
        "Node n",
        "kind",
        "unsupported kind",
    ),
    ("no kind", {"metadata": {"name": "n"}}, "object n", "kind", "required"),
]
