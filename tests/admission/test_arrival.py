"""When the pods of a Ready Workload arrive, each gets exactly reserved devices: one
reserved pod index per pod, the one on its node under TAS, a shared claim once."""

from __future__ import annotations

from typing import Any

from operators.admission.arrival import arrival, workload_of
from operators.admission.reservation import Reservation
from operators.model import DeviceID, Pod
from operators.model.objects import parse_pod_object
from tests.admission.kueue import NS, decision_of, gpu_template, hosts, pod_set, workload
from tests.gangs.world import classes, gpus, node, node_slice


def arrived(name: str, pod_set_name: str, entries: dict[str, str], *, node_selector: dict[str, str] | None = None,
            named: dict[str, str] | None = None) -> Pod:
    """A pod Kueue started: the podset label, draco's annotation from podSetUpdates, its
    claims generated from templates (ENTRIES: entry -> generated name) or NAMED."""
    claims = [{"name": e, "resourceClaimTemplateName": "gpu"} for e in entries]
    claims += [{"name": e, "resourceClaimName": c} for e, c in (named or {}).items()]
    return parse_pod_object({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}",
                     "labels": {"kueue.x-k8s.io/podset": pod_set_name},
                     "annotations": {"resource.draco.dev/workload": "w"}},
        "spec": {"containers": [{"name": "c", "image": "x"}], "resourceClaims": claims,
                 "nodeSelector": node_selector or {}},
        "status": {"resourceClaimStatuses": [{"name": e, "resourceClaimName": n} for e, n in entries.items()]}})


def reservation_of_decision(d: Any) -> Reservation:
    return Reservation("uid-w", "x", "2026-11-28T00:00:00Z", d.devices, d.allocations_json(), d.nodes_json())


def devices(allocation: Any) -> list[str]:
    return [f"{r['pool']}/{r['device']}" for r in allocation["devices"]["results"]]


def test_each_arriving_pod_takes_a_reserved_pod_index_of_its_own() -> None:
    d = decision_of([*classes(), node("n-1"), *node_slice("n-1", gpus(3)), gpu_template(),
                     workload("w", [pod_set("workers", 3, templates={"gpu": "gpu"})])])
    assert d.status == "ready"
    r = reservation_of_decision(d)
    held: set[DeviceID] = set()
    got = []
    for i in range(3):
        pod = arrived(f"job-{i}", "workers", {"gpu": f"job-{i}-gpu"})
        assert workload_of(pod) is not None and workload_of(pod).name == "w"  # type: ignore[union-attr]
        answer = arrival(r, pod, held.__contains__)
        assert not isinstance(answer, str), answer
        (allocation,) = answer.values()
        assert list(answer) == [f"job-{i}-gpu"]
        got += devices(allocation)
        held |= {DeviceID(x["driver"], x["pool"], x["device"]) for x in allocation["devices"]["results"]}
    assert sorted(got) == ["n-1/gpu-0", "n-1/gpu-1", "n-1/gpu-2"]
    late = arrived("job-3", "workers", {"gpu": "job-3-gpu"})
    assert arrival(r, late, held.__contains__) == "every reserved pod of PodSet workers has come already"


def test_under_tas_a_pod_takes_the_index_reserved_on_its_node() -> None:
    d = decision_of([*classes(), node("n-1"), *node_slice("n-1", gpus(1)), node("n-2"), *node_slice("n-2", gpus(1)),
                     gpu_template(), workload("w", [pod_set("workers", 2, templates={"gpu": "gpu"})],
                                                assignments={"workers": hosts(("n-1", 1), ("n-2", 1))})])
    r = reservation_of_decision(d)
    pod = arrived("p", "workers", {"gpu": "p-gpu"}, node_selector={"kubernetes.io/hostname": "n-2"})
    answer = arrival(r, pod, lambda _: False)
    assert not isinstance(answer, str)
    assert devices(answer["p-gpu"]) == ["n-2/gpu-0"]


def test_a_shared_claim_does_not_count_as_a_pod_index_taken() -> None:
    from tests.admission.test_workload_decide import fabric, nic_claim
    d = decision_of([*classes(), node("n-1"), *node_slice("n-1", gpus(2)), *fabric(1), nic_claim(), gpu_template(),
                     workload("w", [pod_set("workers", 2, templates={"gpu": "gpu"}, claims={"nic": "nic"})])])
    r = reservation_of_decision(d)
    nic = DeviceID("driver-b", "fabric", "nic-0")
    first = arrival(r, arrived("a", "workers", {"gpu": "a-gpu"}, named={"nic": "nic"}), lambda _: False)
    assert not isinstance(first, str) and devices(first["nic"]) == ["fabric/nic-0"]
    taken = {nic} | {DeviceID("driver-a", "n-1", x.split("/")[1]) for x in devices(first["a-gpu"])}
    second = arrival(r, arrived("b", "workers", {"gpu": "b-gpu"}, named={"nic": "nic"}), taken.__contains__)
    assert not isinstance(second, str)
    assert devices(second["b-gpu"]) != devices(first["a-gpu"]) and devices(second["nic"]) == ["fabric/nic-0"]
    assert arrival(r, arrived("c", "other", {}), lambda _: False) == "the reservation has no PodSet other"
