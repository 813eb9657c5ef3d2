"""Parsing the GA resource.k8s.io/v1 shapes into draco's typed views."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from model_cases import MALFORMED, claim_obj, pod_obj, slice_obj

from operators.model import (
    Attribute,
    DeviceClass,
    DeviceID,
    DeviceTaint,
    DeviceToleration,
    ModelError,
    NamespacedName,
    Pod,
    ResourceClaim,
    ResourceSlice,
    parse_object,
    parse_objects,
    qualify,
    register_parser,
    split_qualified,
    thaw,
)

SHAPES = Path("/work/shared/examples/shapes.yaml")


def _shapes() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(SHAPES.read_text()) if d]


@pytest.mark.parametrize(
    ("case", "obj", "ref", "path", "message"), MALFORMED, ids=[c[0] for c in MALFORMED]
)
def test_malformed_objects_name_object_and_field(
    case: str, obj: dict[str, Any], ref: str, path: str, message: str
) -> None:
    with pytest.raises(ModelError) as info:
        parse_object(obj)
    err = info.value
    assert str(err.ref) == ref
    assert err.path == path
    assert message in err.message
    assert str(err).startswith(f"{ref} {path}: ")


def test_shapes_example_parses() -> None:
    objs, errors = parse_objects(
        d
        for d in _shapes()
        if d["kind"] in ("ResourceSlice", "DeviceClass", "ResourceClaim", "Pod")
    )
    assert errors == []
    kinds = [type(o) for o in objs]
    assert kinds == [ResourceSlice, DeviceClass, ResourceClaim, Pod]
    s, dc, claim, pod = objs
    dev = s.devices[0]
    assert dev.id == DeviceID("gpu.example.com", "node-a", "gpu-0")
    assert dict(dev.attributes) == {
        "gpu.example.com/model": Attribute("string", "H100"),
        "gpu.example.com/index": Attribute("int", 0),
        "gpu.example.com/driverVersion": Attribute("version", "550.54.15"),
        "gpu.example.com/uuid": Attribute("string", "GPU-6f1c0a52"),
    }
    assert dict(dev.capacity) == {"gpu.example.com/memory": "80Gi"}
    assert dev.taints == (
        DeviceTaint(
            "gpu.example.com/ecc-errors",
            "high",
            "NoSchedule",
            datetime(2026, 11, 1, 10, 0, tzinfo=UTC),
            "ResourceSlice/node-a-gpu.example.com-x7k2p",
        ),
    )
    assert dev.node_name == "node-a" and s.pool.generation == 1 and s.pool.resource_slice_count == 1
    assert dc.selectors[0].expression == 'device.driver == "gpu.example.com"'
    gpu, nic = claim.requests
    assert [n for n, _ in gpu.alternatives()] == ["gpu/h100", "gpu/a100-pair"]
    assert gpu.alternatives()[1][1].count == 2
    assert nic.alternatives()[0][0] == "nic"
    assert claim.constraints[0].match_attribute == "resource.kubernetes.io/pcieRoot"
    assert thaw(claim.config[0].opaque.parameters) == {
        "apiVersion": "gpu.example.com/v1",
        "kind": "GPUConfig",
        "sharing": "none",
    }
    assert [r.id for r in claim.allocation.results] == [
        DeviceID("gpu.example.com", "node-a", "gpu-0"),
        DeviceID("nic.example.com", "node-a", "nic-1"),
    ]
    assert claim.allocation.node_selector.matches("node-a", {})
    assert not claim.allocation.node_selector.matches("node-b", {})
    assert claim.reserved_for[0].is_pod and claim.reserved_for[0].name == "trainer-0"
    assert pod.has_gate("resource.draco.dev/allocation")
    assert pod.claim_keys() == (NamespacedName("team-a", "training"),)


def test_every_shape_parses_once_the_overlays_register_their_kinds() -> None:
    import operators.tracker.slice_patches
    import operators.tracker.taint_rules  # noqa: F401 - registering their parsers is the point

    objs, errors = parse_objects(_shapes())
    assert errors == []
    assert sorted(type(o).__name__ for o in objs) == [
        "DeviceClass", "DeviceTaintRule", "Pod", "ResourceClaim", "ResourceSlice", "ResourceSlicePatch"]


def test_unknown_kinds_are_errors_naming_the_object() -> None:
    objs, errors = parse_objects([{"kind": "Gadget", "metadata": {"name": "g"}}])
    assert objs == [] and str(errors[0].ref) == "Gadget g"


def test_register_parser_extends_dispatch() -> None:
    seen = []

    def parse_widget(d: Any) -> str:
        seen.append(d["metadata"]["name"])
        return "widget!"

    register_parser("Widget", parse_widget)
    assert parse_object({"kind": "Widget", "metadata": {"name": "w"}}) == "widget!"
    assert seen == ["w"]


def test_batch_keeps_going_after_bad_objects() -> None:
    good = slice_obj()
    bad = slice_obj(driver=None)
    objs, errors = parse_objects([bad, good, "not an object", claim_obj()])  # type: ignore[list-item]
    assert [type(o) for o in objs] == [ResourceSlice, ResourceClaim]
    assert [e.path for e in errors] == ["spec.driver", ""]


QUALIFY = [
    # (published name, driver, qualified)
    ("model", "gpu.example.com", "gpu.example.com/model"),
    ("gpu.example.com/model", "gpu.example.com", "gpu.example.com/model"),
    ("resource.kubernetes.io/pcieRoot", "gpu.example.com", "resource.kubernetes.io/pcieRoot"),
    ("other.example.com/x", "gpu.example.com", "other.example.com/x"),
]


@pytest.mark.parametrize(("name", "driver", "expected"), QUALIFY)
def test_qualification(name: str, driver: str, expected: str) -> None:
    assert qualify(name, driver) == expected
    s = parse_object(
        slice_obj(
            driver=driver,
            devices=[
                {
                    "name": "d",
                    "attributes": {name: {"bool": True}},
                    "capacity": {name: {"value": "1"}},
                }
            ],
        )
    )
    assert list(s.devices[0].attributes) == [expected]
    assert list(s.devices[0].capacity) == [expected]
    assert split_qualified(expected)[1] == name.rpartition("/")[2]


def test_unknown_taint_effect_is_kept_and_acts_as_none() -> None:
    s = parse_object(
        slice_obj(
            devices=[
                {
                    "name": "d",
                    "taints": [
                        {"key": "k", "effect": "NoDrain"},
                        {"key": "k2", "effect": "NoExecute"},
                    ],
                }
            ]
        )
    )
    t1, t2 = s.devices[0].taints
    assert t1.effect == "NoDrain" and t1.known_effect == "None"
    assert t2.known_effect == "NoExecute"


def test_placement_per_device_and_slice_level() -> None:
    per = parse_object(
        slice_obj(
            nodeName=None,
            perDeviceNodeSelection=True,
            devices=[
                {"name": "a", "nodeName": "n1"},
                {"name": "b", "allNodes": True},
                {
                    "name": "c",
                    "nodeSelector": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "zone", "operator": "In", "values": ["z1"]}
                                ]
                            }
                        ]
                    },
                },
                {"name": "d"},
            ],
        )
    )
    a, b, c, d = per.devices
    assert per.per_device_node_selection
    assert a.placement.matches("n1", {}) and not a.placement.matches("n2", {})
    assert b.placement.matches("anything", {})
    assert c.placement.matches("n9", {"zone": "z1"}) and not c.placement.matches(
        "n9", {"zone": "z2"}
    )
    assert not d.placement.matches("n1", {})
    whole = parse_object(slice_obj(nodeName=None, allNodes=True))
    assert all(dev.all_nodes for dev in whole.devices)


def test_default_and_explicit_request_fields() -> None:
    c = parse_object(
        claim_obj(
            [
                {"name": "a", "exactly": {"deviceClassName": "c"}},
                {
                    "name": "b",
                    "exactly": {
                        "deviceClassName": "c",
                        "allocationMode": "All",
                        "adminAccess": True,
                        "count": 2,  # ignored beside All, as upstream's allocator ignores it
                    },
                },
            ]
        )
    )
    a, b = (r.exactly for r in c.requests)
    assert (a.allocation_mode, a.count, a.admin_access) == ("ExactCount", 1, False)
    assert (b.allocation_mode, b.count, b.admin_access) == ("All", 0, True)


def test_claim_tolerations_union_and_annotation() -> None:
    c = parse_object(
        claim_obj(
            [
                {
                    "name": "gpu",
                    "firstAvailable": [
                        {
                            "name": "h100",
                            "deviceClassName": "c",
                            "tolerations": [{"key": "a", "operator": "Exists"}],
                        }
                    ],
                }
            ],
            status={
                "allocation": {
                    "devices": {
                        "results": [
                            {
                                "request": "gpu/h100",
                                "driver": "d",
                                "pool": "p",
                                "device": "x",
                                "tolerations": [
                                    {
                                        "key": "b",
                                        "operator": "Equal",
                                        "value": "v",
                                        "effect": "NoExecute",
                                    }
                                ],
                            }
                        ]
                    }
                }
            },
        )
        | {
            "metadata": {
                "name": "c1",
                "namespace": "team-a",
                "annotations": {
                    "resource.draco.dev/tolerations": '[{"key": "c", "operator": "Exists", "effect": "NoExecute"}]'
                },
            }
        }
    )
    result = c.allocation.results[0]
    assert result.parent_request == "gpu"
    assert c.spec_for("gpu/h100") is c.requests[0].first_available[0]
    assert [t.key for t in c.tolerations_for(result)] == ["b", "a", "c"]


@pytest.mark.parametrize(
    ("annotation", "path"),
    [
        ("not json", 'metadata.annotations["resource.draco.dev/tolerations"]'),
        ('{"key": "a"}', 'metadata.annotations["resource.draco.dev/tolerations"]'),
        (
            '[{"key": "a", "operator": "Sometimes"}]',
            'metadata.annotations["resource.draco.dev/tolerations"][0].operator',
        ),
    ],
)
def test_bad_toleration_annotation_is_reported_not_fatal(annotation: str, path: str) -> None:
    c = parse_object(
        claim_obj()
        | {
            "metadata": {
                "name": "c1",
                "namespace": "team-a",
                "annotations": {"resource.draco.dev/tolerations": annotation},
            }
        }
    )
    with pytest.raises(ModelError) as info:
        c.annotation_tolerations()
    assert info.value.path == path
    assert str(info.value.ref) == "ResourceClaim team-a/c1"


TOLERATES = [
    # (toleration, taint, tolerated)
    (DeviceToleration("k", "Equal", "v", "NoExecute"), DeviceTaint("k", "v", "NoExecute"), True),
    (DeviceToleration("k", "Equal", "v", "NoExecute"), DeviceTaint("k", "w", "NoExecute"), False),
    (DeviceToleration("k", "Equal", "v", ""), DeviceTaint("k", "v", "NoSchedule"), True),
    (DeviceToleration("k", "Exists", "", "NoSchedule"), DeviceTaint("k", "x", "NoExecute"), False),
    (DeviceToleration("", "Exists", "", ""), DeviceTaint("any", "x", "NoExecute"), True),
    (DeviceToleration("k", "Exists"), DeviceTaint("other", "", "NoExecute"), False),
    (DeviceToleration("k", "Equal", ""), DeviceTaint("k", "", "None"), True),
]


@pytest.mark.parametrize(("tol", "taint", "expected"), TOLERATES)
def test_toleration_matching(tol: DeviceToleration, taint: DeviceTaint, expected: bool) -> None:
    assert tol.tolerates(taint) is expected


def test_pod_claim_names_direct_template_and_extended() -> None:
    pod = parse_object(
        pod_obj(
            {
                "resourceClaims": [
                    {"name": "direct", "resourceClaimName": "shared"},
                    {"name": "tmpl", "resourceClaimTemplateName": "gpu-template"},
                    {"name": "pending", "resourceClaimTemplateName": "other"},
                ],
                "nodeSelector": {"zone": "z1"},
                "schedulingGates": [{"name": "g"}],
            },
            {
                "resourceClaimStatuses": [{"name": "tmpl", "resourceClaimName": "p1-tmpl-x7z"}],
                "extendedResourceClaimStatus": {
                    "resourceClaimName": "p1-extended",
                    "requestMappings": [
                        {
                            "containerName": "main",
                            "resourceName": "example.com/gpu",
                            "requestName": "container-0-request-0",
                        }
                    ],
                },
                "phase": "Pending",
            },
        )
    )
    assert pod.claim_names() == ("shared", "p1-tmpl-x7z", "p1-extended")
    assert pod.claim_name(pod.resource_claims[2]) is None
    assert dict(pod.node_selector) == {"zone": "z1"}
    assert pod.scheduling_gates == ("g",) and pod.phase == "Pending" and not pod.terminal


def test_pod_affinity_is_frozen_and_round_trips() -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "zone", "operator": "In", "values": ["z1", "z2"]}
                        ]
                    }
                ]
            }
        }
    }
    pod = parse_object(pod_obj({"affinity": affinity}))
    assert thaw(pod.affinity) == affinity
    assert (
        pod.required_node_affinity.to_api()
        == affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    )
    with pytest.raises(TypeError):
        pod.affinity["nodeAffinity"] = {}


def test_views_are_immutable() -> None:
    s = parse_object(slice_obj())
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.driver = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        s.devices[0].attributes["gpu.example.com/model"] = Attribute("string", "A100")  # type: ignore[index]
    assert isinstance(s.devices, tuple)
    assert not hasattr(s.devices[0], "__dict__")


def test_device_ids_sort_by_driver_pool_device() -> None:
    ids = [DeviceID("b", "p", "a"), DeviceID("a", "q", "a"), DeviceID("a", "p", "z")]
    assert sorted(ids) == [
        DeviceID("a", "p", "z"),
        DeviceID("a", "q", "a"),
        DeviceID("b", "p", "a"),
    ]
    assert str(ids[0]) == "b/p/a"


def test_timestamps_are_aware_and_yaml_datetimes_accepted() -> None:
    d = claim_obj()
    d["metadata"]["creationTimestamp"] = datetime(
        2026, 1, 2, 3, 4, 5
    )  # what PyYAML makes of an unquoted time
    d["metadata"]["deletionTimestamp"] = "2026-01-02T03:04:06Z"
    c = parse_object(d)
    assert c.meta.creation_timestamp == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert c.meta.deleting and c.meta.deletion_timestamp.tzinfo is not None
