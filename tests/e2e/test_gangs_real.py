"""Gangs end to end: on the embedded server and real 1.34 (draco's `Gang`), and on a real
1.37 with upstream's PodGroup API and kube-scheduler's own gang handling switched on.

What a user sees: `kubectl apply` of a Gang and its labelled, gated pods; draco gives
every member its devices inside one topology domain, ungates them together, and
kube-scheduler binds each where its claims are; `kubectl wait --for=condition=Allocated
gang/NAME` returns. A gang beside single pods competing for the same devices is placed
whole or not at all. A restarted draco that finds half a gang written completes it.
And kubernetes/kubernetes#138765 side by side on 1.37: two pods of a PodGroup asking
for "a whole device, else a half" of one partitionable GPU stay pending under
kube-scheduler alone, and are placed on the two halves with draco.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from operators.allocator.pod_claims import GATE
from operators.apiserver.testing import wait_for
from tests.e2e.backends import Backend, RealBackend
from tests.e2e.test_allocator_e2e import SETTINGS, claims_path, pods_path
from tests.operator_threads import operator_threads

GANGS = "/apis/resource.draco.dev/v1alpha1/namespaces/{ns}/gangs"
claims, pods = claims_path, pods_path


def device_class(b: Backend) -> str:
    """The test's DeviceClass; on the embedded server also node-1, the real clusters'
    second kwok node."""
    if b.name == "embedded" and b.get("/api/v1/nodes/node-1") is None:
        b.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}})
    name = f"gpu-{b.domain.split('.')[0]}"
    b.create("/apis/resource.k8s.io/v1/deviceclasses", {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{b.driver}"'}}]}})
    return name


def node_slice(b: Backend, node: str, devices: list[dict[str, Any]], *, count: int = 1,
               name: str = "", counters: list[dict[str, Any]] | None = None) -> None:
    spec: dict[str, Any] = {"driver": b.driver, "nodeName": node,
                            "pool": {"name": f"{b.ns}-{node}", "generation": 1, "resourceSliceCount": count}}
    if counters is not None:
        spec["sharedCounters"] = counters
    else:
        spec["devices"] = devices
    b.create("/apis/resource.k8s.io/v1/resourceslices", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": name or f"{b.ns}-{node}"}, "spec": spec})


def clique_devices(names: dict[str, str]) -> list[dict[str, Any]]:
    return [{"name": n, "attributes": {"clique": {"string": c}}} for n, c in names.items()]


def gang_object(b: Backend, name: str, min_count: int, **topology: str) -> None:
    spec: dict[str, Any] = {"minCount": min_count}
    if topology:
        spec["topology"] = topology
    b.create(GANGS.format(ns=b.ns), {"apiVersion": "resource.draco.dev/v1alpha1", "kind": "Gang",
                                     "metadata": {"name": name}, "spec": spec})


def member(b: Backend, pod: str, request: dict[str, Any], *, gang: str | None = None,
           pod_group: str | None = None, gated: bool = True) -> dict[str, Any]:
    b.create(claims(b), {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                         "metadata": {"name": f"{pod}-gpu"},
                         "spec": {"devices": {"requests": [request]}}})
    spec: dict[str, Any] = {
        "resourceClaims": [{"name": "gpu", "resourceClaimName": f"{pod}-gpu"}],
        "containers": [{"name": "c", "image": "registry.invalid/app",
                        "resources": {"claims": [{"name": "gpu"}]}}],
        "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}]}
    if gated:
        spec["schedulingGates"] = [{"name": GATE}]
    if pod_group:
        spec["schedulingGroup"] = {"podGroupName": pod_group}
    meta: dict[str, Any] = {"name": pod}
    if gang:
        meta["labels"] = {"resource.draco.dev/gang": gang}
    return b.create(pods(b), {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})


def results(b: Backend, claim: str) -> list[dict[str, Any]] | None:
    found = b.get(f"{claims(b)}/{claim}") or {}
    alloc = (found.get("status") or {}).get("allocation")
    return alloc["devices"]["results"] if alloc else None


def pinned(b: Backend, claim: str) -> str:
    found = b.get(f"{claims(b)}/{claim}") or {}
    term = found["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]
    return str(term["matchFields"][0]["values"][0])


def stored_pod(b: Backend, name: str) -> dict[str, Any]:
    found = b.get(f"{pods(b)}/{name}")
    assert found is not None
    return found


def bound_where_claimed(b: Backend, pod: str) -> bool:
    """kube-scheduler bound the pod to the node its claim is pinned to (real servers)."""
    return stored_pod(b, pod)["spec"].get("nodeName") == pinned(b, f"{pod}-gpu")


def test_a_gang_gets_one_clique_and_is_ungated_together(backend: Backend, operator: Any) -> None:
    b = backend
    cls = device_class(b)
    # clique a: three GPUs, clique b: four; two pods of two GPUs fit only in b
    node_slice(b, "node-0", clique_devices({"a0": "a", "a1": "a", "b0": "b", "b1": "b"}))
    node_slice(b, "node-1", clique_devices({"a2": "a", "b2": "b", "b3": "b"}))
    gang_object(b, "train", 2, deviceAttribute=f"{b.driver}/clique")
    two = {"name": "gpu", "exactly": {"deviceClassName": cls, "count": 2}}
    for i in range(2):
        member(b, f"w-{i}", two, gang="train")
    operator(("allocator", "narrowing"), SETTINGS)
    got = [wait_for(lambda i=i: results(b, f"w-{i}-gpu"), 60, what=f"w-{i}'s claim allocated")
           for i in range(2)]
    devices = sorted(r["device"] for rs in got for r in rs)
    assert devices == ["b0", "b1", "b2", "b3"]
    for i in range(2):
        wait_for(lambda i=i: not stored_pod(b, f"w-{i}")["spec"].get("schedulingGates"), 60,
                 what=f"w-{i} ungated")
    b.kubectl("wait", "--for=condition=Allocated", "gang/train", "--timeout=60s", timeout=90)
    status = (b.get(f"{GANGS.format(ns=b.ns)}/train") or {})["status"]
    assert status["placed"] == 2 and status["domain"] == f"{b.driver}/clique=b"
    if b.name == "real":  # kube-scheduler binds each where its devices are
        for i in range(2):
            wait_for(lambda i=i: bound_where_claimed(b, f"w-{i}"), 60, what=f"w-{i} bound")
    shown = b.kubectl("get", "gang", "train").stdout  # the printer columns
    assert shown.split("\n")[0].split() == ["NAME", "MIN", "MEMBERS", "PLACED", "DOMAIN", "ALLOCATED",
                                            "REASON", "AGE"]
    assert shown.split("\n")[1].split()[:7] == ["train", "2", "2", "2", f"{b.driver}/clique=b", "True",
                                                "Allocated"]


def test_a_gang_beside_single_pods_is_placed_whole_or_not_at_all(backend: Backend, operator: Any) -> None:
    b = backend
    cls = device_class(b)
    node_slice(b, "node-0", [{"name": f"d{i}"} for i in range(3)])
    gang_object(b, "pair", 2)
    one = {"name": "gpu", "exactly": {"deviceClassName": cls}}
    for name in ("s-0", "s-1"):
        member(b, name, one)  # single pods, gated by draco too
    for i in range(2):
        member(b, f"g-{i}", one, gang="pair")
    operator(("allocator", "narrowing"), SETTINGS)
    wait_for(lambda: sum(1 for n in ("s-0", "s-1", "g-0", "g-1") if results(b, f"{n}-gpu")) == 3,
             60, what="three of the four claims allocated")
    held = [r["device"] for n in ("s-0", "s-1", "g-0", "g-1") for r in results(b, f"{n}-gpu") or []]
    assert sorted(held) == ["d0", "d1", "d2"], "no device in two claims"
    gang_claims = [bool(results(b, f"g-{i}-gpu")) for i in range(2)]
    assert gang_claims == [True, True], "the gang, decided first, gets both or none"


def test_a_restarted_draco_completes_half_a_gang(backend: Backend, operator: Any) -> None:
    """What a draco killed after writing the first member's claim leaves: that claim
    allocated and reserved, the pod still gated, the second member untouched. The next
    draco completes the gang in the same domain and ungates both."""
    b = backend
    cls = device_class(b)
    node_slice(b, "node-0", clique_devices({"x0": "x", "y0": "y"}))
    node_slice(b, "node-1", clique_devices({"x1": "x", "y1": "y"}))
    gang_object(b, "half", 2, deviceAttribute=f"{b.driver}/clique")
    one = {"name": "gpu", "exactly": {"deviceClassName": cls}}
    first = member(b, "h-0", one, gang="half")
    member(b, "h-1", one, gang="half")
    code, body = b.request("PUT", f"{claims(b)}/h-0-gpu/status", {
        **(b.get(f"{claims(b)}/h-0-gpu") or {}),
        "status": {"allocation": {
            "devices": {"results": [{"request": "gpu", "driver": b.driver, "pool": f"{b.ns}-node-0",
                                     "device": "y0"}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["node-0"]}]}]}},
            "reservedFor": [{"resource": "pods", "name": "h-0", "uid": first["metadata"]["uid"]}]}})
    assert code == 200, body
    operator(("allocator", "narrowing"), SETTINGS)
    second = wait_for(lambda: results(b, "h-1-gpu"), 60, what="the second member allocated")
    assert second[0]["device"] == "y1", "the same clique as the member placed before"
    for name in ("h-0", "h-1"):
        wait_for(lambda name=name: not stored_pod(b, name)["spec"].get("schedulingGates"), 60,
                 what=f"{name} ungated")


WHOLE_OR_HALF = [
    {"name": "whole", "selectors": ['device.attributes["{d}"].size == "whole"']},
    {"name": "half", "selectors": ['device.attributes["{d}"].size == "half"']},
]


def partitioned_gpu(b: Backend, node: str) -> None:
    """One GPU of 40Gi on NODE, published as the whole device or two halves."""
    full = {"counterSet": "gpu", "counters": {"mem": {"value": "40Gi"}}}
    half = {"counterSet": "gpu", "counters": {"mem": {"value": "20Gi"}}}
    node_slice(b, node, [], count=2, name=f"{b.ns}-{node}-counters",
               counters=[{"name": "gpu", "counters": {"mem": {"value": "40Gi"}}}])
    node_slice(b, node, [
        {"name": "whole", "attributes": {"size": {"string": "whole"}}, "consumesCounters": [full]},
        {"name": "half-a", "attributes": {"size": {"string": "half"}}, "consumesCounters": [half]},
        {"name": "half-b", "attributes": {"size": {"string": "half"}}, "consumesCounters": [half]},
    ], count=2, name=f"{b.ns}-{node}-devices")


def pod_group(b: Backend, name: str, min_count: int) -> None:
    b.create(f"/apis/scheduling.k8s.io/v1beta1/namespaces/{b.ns}/podgroups", {
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": name},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}})


@pytest.fixture
def operator_137(private_137_workloads: RealBackend, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    yield from operator_threads(private_137_workloads.kubeconfig, monkeypatch)


@pytest.mark.real
def test_138765_kube_scheduler_leaves_the_gang_pending_draco_places_it(
        private_137_workloads: RealBackend, operator_137: Any) -> None:
    b = private_137_workloads
    cls = device_class(b)
    request = {"name": "gpu", "firstAvailable": [
        {"name": alt["name"], "deviceClassName": cls,
         "selectors": [{"cel": {"expression": alt["selectors"][0].format(d=b.driver)}}]}
        for alt in WHOLE_OR_HALF]}
    # kube-scheduler alone: a PodGroup of two, no draco gate, on node-0's partitioned GPU
    partitioned_gpu(b, "node-0")
    pod_group(b, "upstream", 2)
    for i in range(2):
        member(b, f"u-{i}", request, pod_group="upstream", gated=False)

    def failed_scheduling(name: str) -> list[str]:
        return [e["message"] for e in b.events() if e["involvedObject"].get("name") == name
                and e["reason"] == "FailedScheduling"]

    # 1.37.2's words (asked of the real server): the gang's first pod took the whole
    # device, so "minCount (2) cannot be satisfied: 1 scheduled", and the second "cannot
    # allocate all claims"

    def told() -> list[str]:
        return failed_scheduling("u-0") + failed_scheduling("u-1")

    # each reason is waited for: kube-scheduler's Events come from its own broadcaster,
    # one scheduling attempt after another
    wait_for(lambda: any("minCount (2) cannot be satisfied" in m for m in told()), 120,
             what="kube-scheduler to say the gang's minCount cannot be satisfied")
    wait_for(lambda: any("cannot allocate all claims" in m for m in told()), 120,
             what="kube-scheduler to say it cannot allocate all claims")
    assert not any(stored_pod(b, f"u-{i}")["spec"].get("nodeName") for i in range(2))
    for i in range(2):  # the pods and node-0's GPU go: node-1's is draco's turn
        b.request("DELETE", f"{pods(b)}/u-{i}?gracePeriodSeconds=0")
    for part in ("counters", "devices"):
        code, body = b.request("DELETE", f"/apis/resource.k8s.io/v1/resourceslices/{b.ns}-node-0-{part}")
        assert code == 200, body
    # with draco: the same shape on node-1, the pods carry draco's gate
    partitioned_gpu(b, "node-1")
    pod_group(b, "drawn", 2)
    for i in range(2):
        member(b, f"d-{i}", request, pod_group="drawn")
    operator_137(("allocator", "narrowing"), SETTINGS)
    got = [wait_for(lambda i=i: results(b, f"d-{i}-gpu"), 60, what=f"d-{i} allocated") for i in range(2)]
    assert sorted(r["device"] for rs in got for r in rs) == ["half-a", "half-b"]
    assert {r["request"] for rs in got for r in rs} == {"gpu/half"}
    assert {r["pool"] for rs in got for r in rs} == {f"{b.ns}-node-1"}
    for i in range(2):
        wait_for(lambda i=i: stored_pod(b, f"d-{i}")["spec"].get("nodeName") == "node-1", 90,
                 what=f"kube-scheduler to bind d-{i}")
    for i in range(2):  # kube-scheduler's gang handling and DRA PostFilter kept draco's allocation
        assert [r["device"] for r in results(b, f"d-{i}-gpu") or []] == [got[i][0]["device"]]
