"""The nodes Kueue chose are this admission's, not the Workload's for good.

A ResourceFlavor's nodeLabels and TAS's domains bound where this admission's pods may
go; the ClusterQueue's next flavor, or TAS's next domain, may be where the devices are.
So a Workload whose devices are not on Kueue's nodes is `retry` (saying they fit
elsewhere when they do), and `rejected` only when even an empty cluster bound by the
pods' own selectors cannot hold it (found on real Kueue v0.19.2: a TAS Job on a flavor
of rack-a was rejected while rack-b, the ClusterQueue's other domain, had the devices)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.admission.kueue import decide_doc, flavor, gpu_template, hosts, pod_set, workload
from tests.gangs.world import allocated_on, classes, gpus, member, node, node_slice


def workers(n: int, **kw: Any) -> dict[str, Any]:
    return pod_set("workers", n, templates={"gpu": "gpu"}, **kw)


def world(gpus_a: int, gpus_b: int) -> list[dict[str, Any]]:
    """n-1 (rack a) and n-2 (rack b, the flavor `default`'s only node) with their GPUs."""
    out = [node("n-1", rack="a"), node("n-2", rack="b"), flavor("default", rack="b")]
    for name, n in (("n-1", gpus_a), ("n-2", gpus_b)):
        if n:
            out += node_slice(name, gpus(n))
    return out


def held(node_name: str, device: str) -> list[dict[str, Any]]:
    return member(f"held-{device}", "other", [{"name": "gpu", "class": "class-a"}],
                  allocation=allocated_on(node_name, device), node_name=node_name)


CASES: list[tuple[str, list[dict[str, Any]], str, list[str], list[str]]] = [
    # (case, objects, status, fragments the message has, fragments it has not)
    ("the flavor's nodes have no device, the other rack has them free",
     [*world(2, 0), gpu_template(), workload("w", [workers(2)])],
     "retry", ["do not fit the nodes of the flavor Kueue assigned", "fit elsewhere now"], ["can never"]),
    ("the flavor's nodes have no device, the other rack's are held now",
     [*world(2, 0), *held("n-1", "gpu-0"), gpu_template(), workload("w", [workers(2)])],
     "retry", ["short by count"], ["fit elsewhere", "can never"]),
    ("TAS's node has no device, the other flavor's node has them free",
     [*world(2, 0), gpu_template(),
      workload("w", [workers(2)], assignments={"workers": hosts(("n-2", 2))})],
     "retry", ["do not fit the nodes TAS assigned (workers: kubernetes.io/hostname=n-2 x2)",
               "fit elsewhere now"], ["can never"]),
    ("more than the whole cluster has: rejected, flavor or not",
     [*world(1, 1), gpu_template(), workload("w", [workers(3)])],
     "rejected", ["can never fit"], []),
    ("the pods' own nodeSelector still binds: rejected",
     [*world(2, 0), gpu_template(), workload("w", [workers(1, node_selector={"rack": "b"})])],
     "rejected", ["can never fit"], []),
    ("the flavor's nodes have the devices: ready there",
     [*world(2, 2), gpu_template(), workload("w", [workers(2)])],
     "ready", ["devices reserved for 2 pods"], []),
]


@pytest.mark.parametrize(("objects", "status", "has", "has_not"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_verdicts_beyond_the_nodes_kueue_chose(objects: list[dict[str, Any]], status: str, has: list[str],
                                               has_not: list[str]) -> None:
    doc = decide_doc([*classes(), *objects])
    assert doc["status"] == status, doc["message"]
    for fragment in has:
        assert fragment in doc["message"], doc["message"]
    for fragment in has_not:
        assert fragment not in doc["message"], doc["message"]
