"""The devices check's verdicts over Workload shapes, as a table: what Kueue is told
(ready / retry / rejected), which devices each pod gets, and the podSetUpdates."""

from __future__ import annotations

from typing import Any

import pytest

from tests.admission.kueue import (
    claim_template,
    decide_doc,
    devices_of,
    flavor,
    gpu_template,
    hosts,
    pod_set,
    workload,
)
from tests.allocator.build import claim_api
from tests.gangs.test_gang_placement import WHOLE_OR_HALF, partitioned_node
from tests.gangs.world import allocated_on, classes, gang, gpus, member, node, node_slice

RACK = "example.com/rack"
ANN = "resource.draco.dev/workload"


def workers(n: int, **kw: Any) -> dict[str, Any]:
    return pod_set("workers", n, templates={"gpu": "gpu"}, **kw)


def two_nodes(a: int, b: int) -> list[dict[str, Any]]:
    return [node("n-1"), *node_slice("n-1", gpus(a)), node("n-2"), *node_slice("n-2", gpus(b))]


def racks() -> list[dict[str, Any]]:
    """rack-a: two nodes with one GPU each; rack-b: two nodes with two each."""
    out: list[dict[str, Any]] = []
    for name, rack, n in (("a-1", "rack-a", 1), ("a-2", "rack-a", 1), ("b-1", "rack-b", 2),
                          ("b-2", "rack-b", 2)):
        out += [node(name, **{RACK: rack}), *node_slice(name, gpus(n))]
    return out


def nic_claim() -> dict[str, Any]:
    c = claim_api({"name": "nic", "requests": [{"name": "nic", "class": "class-b"}]})
    c["metadata"]["uid"] = "uid-nic"
    return c


def fabric(n: int) -> list[dict[str, Any]]:
    from tests.allocator.build import resource_slice_api
    return [resource_slice_api({"driver": "driver-b", "pool": "fabric", "allNodes": True, "name": "fabric",
                                "devices": [{"name": f"nic-{i}"} for i in range(n)]}, 0)]


def held(node_name: str, device: str) -> list[dict[str, Any]]:
    return member(f"held-{device}", "other", [{"name": "gpu", "class": "class-a"}],
                  allocation=allocated_on(node_name, device), node_name=node_name)


CASES: list[tuple[str, list[dict[str, Any]], str, list[str] | None, str | None]] = [
    # (case, objects, status, devices or None, a fragment of the message or None)
    ("two PodSets: a launcher without claims and two workers",
     [*two_nodes(2, 0), gpu_template(),
      workload("w", [pod_set("launcher", 1), workers(2)])],
     "ready", ["n-1/gpu-0", "n-1/gpu-1"], "devices reserved for 3 pods"),
    ("more than the cluster has: rejected",
     [*two_nodes(1, 1), gpu_template(), workload("w", [workers(3)])],
     "rejected", None, "can never fit"),
    ("fits an empty cluster, not now: retry",
     [*two_nodes(2, 1), *held("n-2", "gpu-0"), gpu_template(), workload("w", [workers(3)])],
     "retry", None, "needs 3 free devices across the gang, the domain has 2"),
    ("a selector nothing matches: rejected",
     [node("n-1"), *node_slice("n-1", gpus(2, model="a100")),
      claim_template("gpu", [{"name": "gpu", "class": "class-a",
                                                "selectors": ['device.attributes["driver-a"].model == "h100"']}]),
      workload("w", [workers(1)])],
     "rejected", None, "can never fit"),
    ("TAS: one pod per node, as assigned",
     [*two_nodes(1, 1), gpu_template(),
      workload("w", [workers(2)], assignments={"workers": hosts(("n-1", 1), ("n-2", 1))})],
     "ready", ["n-1/gpu-0", "n-2/gpu-0"], "in TAS's assignment"),
    ("TAS: both pods on a node with one device, while another has two: retry",
     [*two_nodes(2, 1), gpu_template(),
      workload("w", [workers(2)], assignments={"workers": hosts(("n-2", 2))})],
     "retry", None, "do not fit the nodes TAS assigned (workers: kubernetes.io/hostname=n-2 x2)"),
    ("a Gang label: the rack that fits, named in the nodeSelector",
     [*racks(), gang("g", 1, node_label=RACK), gpu_template(count=2),
      workload("w", [workers(2, labels={"resource.draco.dev/gang": "g"})])],
     "ready", ["b-1/gpu-0", "b-1/gpu-1", "b-2/gpu-0", "b-2/gpu-1"], f"in {RACK}=rack-b"),
    ("a Gang label naming no Gang: retry",
     [*racks(), gpu_template(), workload("w", [workers(1, labels={"resource.draco.dev/gang": "g"})])],
     "retry", None, "Gang default/g"),
    ("a claim every pod names is allocated once",
     [*two_nodes(1, 1), *fabric(2), nic_claim(), gpu_template(),
      workload("w", [pod_set("workers", 2, templates={"gpu": "gpu"}, claims={"nic": "nic"})])],
     "ready", ["fabric/nic-0", "n-1/gpu-0", "n-2/gpu-0"], None),
    ("a prioritized list over partitions: two halves of one GPU",
     [node("n-1"), *partitioned_node("n-1"), claim_template("gpu", WHOLE_OR_HALF),
      workload("w", [workers(2)])],
     "ready", ["n-1/half-a", "n-1/half-b"], None),
    ("a template that does not exist yet: retry",
     [*two_nodes(1, 1), workload("w", [workers(1)])],
     "retry", None, "ResourceClaimTemplate default/gpu (entry gpu) does not exist"),
    ("a named claim that does not exist yet: retry",
     [*two_nodes(1, 1), workload("w", [pod_set("workers", 1, claims={"nic": "nic"})])],
     "retry", None, "ResourceClaim default/nic (entry nic) does not exist"),
    ("a DeviceClass that does not exist: retry",
     [*two_nodes(1, 1), claim_template("gpu", [{"name": "gpu", "class": "class-z"}]),
      workload("w", [workers(1)])],
     "retry", None, "could not retrieve device class class-z"),
    ("a ResourceFlavor's node labels bound the nodes",
     [node("n-1"), *node_slice("n-1", gpus(1)), node("n-2", pool="b"), *node_slice("n-2", gpus(1)),
      flavor("default", pool="b"), gpu_template(), workload("w", [workers(1)])],
     "ready", ["n-2/gpu-0"], None),
]


@pytest.mark.parametrize(("objects", "status", "devices", "fragment"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_verdicts(objects: list[dict[str, Any]], status: str, devices: list[str] | None,
                  fragment: str | None) -> None:
    doc = decide_doc([*classes(), *objects])
    assert set(doc) == {"status", "message", "members", "podSetUpdates"}
    assert doc["status"] == status, doc["message"]
    if fragment is not None:
        assert fragment in doc["message"]
    if devices is not None:
        assert devices_of(doc) == devices
    if status != "ready":
        assert doc["members"] == {} and doc["podSetUpdates"] == []


def test_members_are_pod_indexes_per_pod_set_with_their_claims() -> None:
    doc = decide_doc([*classes(), *two_nodes(2, 1), gpu_template(), nic_claim(), *fabric(1),
                      workload("w", [pod_set("launcher", 1, claims={"nic": "nic"}), workers(3)])])
    assert doc["status"] == "ready", doc["message"]
    assert set(doc["members"]) == {"launcher", "workers"}
    assert set(doc["members"]["workers"]) == {"0", "1", "2"}
    assert list(doc["members"]["launcher"]["0"]) == ["nic"]
    for claims in doc["members"]["workers"].values():
        (results,) = claims.values()
        assert [set(r) for r in results] == [{"request", "driver", "pool", "device"}]
    assert doc["podSetUpdates"] == [{"name": "launcher", "annotations": {ANN: "w"}},
                                    {"name": "workers", "annotations": {ANN: "w"}}]


def test_a_gang_rack_goes_into_every_pod_sets_node_selector() -> None:
    doc = decide_doc([*classes(), *racks(), gang("g", 1, node_label=RACK), gpu_template(),
                      workload("w", [pod_set("a", 1, templates={"gpu": "gpu"}, labels={"resource.draco.dev/gang": "g"}),
                                     pod_set("b", 1, templates={"gpu": "gpu"}, labels={"resource.draco.dev/gang": "g"},
                                             node_selector={RACK: "rack-a"})])])
    assert doc["status"] == "ready", doc["message"]
    # the template that names the rack already needs no update (Kueue refuses a change of a key)
    assert doc["podSetUpdates"] == [
        {"name": "a", "annotations": {ANN: "w"}, "nodeSelector": {RACK: "rack-a"}},
        {"name": "b", "annotations": {ANN: "w"}}]


def test_another_workloads_reservation_keeps_its_devices() -> None:
    objs = [*classes(), *two_nodes(2, 0), gpu_template(), workload("w", [workers(2)])]
    first = decide_doc(objs)
    assert first["status"] == "ready"
    from operators.admission.reservation import (
        RESERVATION_ANNOTATION,
        Reservation,
        admission_fingerprint,
    )
    from operators.admission.workload import parse_workload
    from operators.model import DeviceID
    other = workload("x", [workers(1)])
    r = Reservation("uid-x", admission_fingerprint(parse_workload(other)), "2026-11-28T00:00:00Z",
                    frozenset({DeviceID("driver-a", "n-1", "gpu-0")}))
    other["metadata"]["annotations"] = {RESERVATION_ANNOTATION: r.to_json()}
    second = decide_doc([*objs, other])
    assert second["status"] == "retry"
    assert "the domain has 1" in second["message"]


def test_a_workload_with_its_own_reservation_is_answered_from_it() -> None:
    objs = [*classes(), *two_nodes(2, 0), gpu_template()]
    wl = workload("w", [workers(1)])
    from operators.admission.reservation import (
        RESERVATION_ANNOTATION,
        Reservation,
        admission_fingerprint,
    )
    from operators.admission.workload import parse_workload
    from operators.model import DeviceID
    members = {"workers": {"0": {"gpu": [{"request": "gpu", "driver": "driver-a", "pool": "n-1",
                                          "device": "gpu-1"}]}}}
    allocations = {"workers": {"0": {"gpu": {"devices": {"results": members["workers"]["0"]["gpu"]}}}}}
    r = Reservation("uid-w", admission_fingerprint(parse_workload(wl)), "2026-11-28T00:00:00Z",
                    frozenset({DeviceID("driver-a", "n-1", "gpu-1")}), allocations,
                    {"workers": {"0": "n-1"}}, ({"name": "workers", "annotations": {ANN: "w"}},),
                    "devices reserved for 1 pod")
    wl["metadata"]["annotations"] = {RESERVATION_ANNOTATION: r.to_json()}
    doc = decide_doc([*objs, wl])
    assert doc == {"status": "ready", "message": "devices reserved for 1 pod", "members": members,
                   "podSetUpdates": [{"name": "workers", "annotations": {ANN: "w"}}]}
    # a reservation of an earlier admission is stale: decided afresh (gpu-0 comes first)
    wl["status"]["admission"]["clusterQueue"] = "other"
    assert devices_of(decide_doc([*objs, wl])) == ["n-1/gpu-0"]
