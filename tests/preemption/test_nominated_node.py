"""Nominations in kube-scheduler's words: when draco nominates node-local devices for a
preemptor it also sets the pod's `status.nominatedNodeName` (through pods/status, before
any victim is touched), and clears it when the nomination ends; and a preemptor still
behind another controller's gate nominates nothing and evicts no one."""

from __future__ import annotations

from typing import Any

from operators.model.gates import DRACO_GATE
from tests.fake_api import run
from tests.gangs.world import NS
from tests.preemption.test_preemption_controller import Cluster, world


def _nominated_node(c: Cluster, pod: str) -> str | None:
    stored = c.pod(pod)
    assert stored is not None
    value: str | None = (stored.get("status") or {}).get("nominatedNodeName")
    return value


def _status_writes(c: Cluster, pod: str) -> list[Any]:
    return [b["status"]["nominatedNodeName"] for m, p, b in c.api.calls
            if m == "PATCH" and p.endswith(f"/pods/{pod}/status") and "nominatedNodeName" in b["status"]]


def test_the_preemptor_carries_its_nominated_node_until_it_is_allocated() -> None:
    c = Cluster(world())
    run(c.settle())
    assert c.nomination("vip") is not None
    assert _nominated_node(c, "vip") == "a"
    written_at = next(i for i, (m, p, b) in enumerate(c.api.calls)
                      if m == "PATCH" and p.endswith("/pods/vip/status"))
    deleted_at = next(i for i, (m, _, _) in enumerate(c.api.calls) if m == "DELETE")
    assert written_at < deleted_at, "kube-scheduler's words are in the API before a victim goes"
    c.release_claims_of_gone_pods()
    run(c.settle())
    assert c.devices("vip-claim") == ["gpu-0"]
    assert c.nomination("vip") is None
    assert _nominated_node(c, "vip") is None, "cleared with the nomination"
    assert _status_writes(c, "vip") == ["a", None]


def test_an_expired_nomination_that_is_not_renewed_clears_the_node() -> None:
    c = Cluster(world())
    run(c.settle())
    assert _nominated_node(c, "vip") == "a" and c.pod("low") is None
    # the deadline passes before the victim's claim is released; no running pod is left
    # to preempt, so no new nomination replaces it
    path = f"/api/v1/namespaces/{NS}/pods/vip"
    c.api.touch(path, lambda p: p["metadata"]["annotations"].update({
        "resource.draco.dev/nomination": '{"node":"a","devices":["driver-a/a/gpu-0"],'
                                         '"victims":["default/low"],"deadline":"2000-01-01T00:00:00Z"}'}))
    c.echo()
    run(c.settle())
    assert c.nomination("vip") is None
    assert _nominated_node(c, "vip") is None, "the nomination went, and its node with it"


def test_a_preemptor_behind_kueues_gate_nominates_nothing_and_evicts_no_one() -> None:
    objs = world()
    for obj in objs:
        if obj["kind"] == "Pod" and obj["metadata"]["name"] == "vip":
            obj["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}, {"name": DRACO_GATE}]
    c = Cluster(objs)
    run(c.settle())
    assert c.nomination("vip") is None and _nominated_node(c, "vip") is None
    assert c.pod("low") is not None, "no victim for a pod whose workload is not admitted"
    assert not [m for m, _, _ in c.api.calls if m == "DELETE"]
    assert c.devices("vip-claim") == []
