"""Preemption end to end (`draco run --preemption`), on the embedded server, real 1.34 and 1.37.

What a user sees: low-priority pods hold every GPU; a high-priority gated pod arrives,
and a lower-priority gated pod competes for the same devices at the same moment. draco
writes the nomination on the high-priority pod, marks the victims `DisruptionTarget`
(`PreemptionByDraco`) and deletes them; once their claims are released the high-priority
pod gets exactly the nominated devices, is ungated and (on the real server) bound, while
the competing pod keeps waiting. On the embedded server, which has no
kube-controller-manager, the test releases the victims' claims as its resource claim
controller would; on 1.34 the real one does. On 1.37 the same pod without draco's gate
stays pending under kube-scheduler alone (its preemption frees no device), shown first;
then, with draco, an ungated lower-priority pod created beside the preemptor is kept off
the freed GPU by draco's NoSchedule fence (upstream's DeviceTaintRule). A gang preempts
the same way, on all three: every member's nomination, the victims once, the whole gang
on the freed GPUs.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from operators.allocator.pod_claims import GATE
from operators.allocator_controller.preempt_loop import FENCE_LABEL, FENCE_RULES
from operators.apiserver.testing import wait_for
from operators.preemption.nomination import NOMINATION_ANNOTATION
from tests.e2e.backends import Backend, RealBackend
from tests.e2e.test_allocator_e2e import SETTINGS, claims_path, pods_path
from tests.e2e.test_gangs_real import device_class, gang_object, node_slice, results
from tests.operator_threads import operator_threads

PREEMPTING = SimpleNamespace(**vars(SETTINGS), preemption=True, nomination_timeout=300.0)


def priority_of(b: Backend, value: int) -> dict[str, Any]:
    """The pod spec fields giving VALUE: a PriorityClass on a real server (its admission
    resolves spec.priority from it), spec.priority itself on the embedded one."""
    if b.name == "embedded":
        return {"priority": value}
    name = f"{b.ns}-p{value}"
    if b.get(f"/apis/scheduling.k8s.io/v1/priorityclasses/{name}") is None:
        b.create("/apis/scheduling.k8s.io/v1/priorityclasses", {
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value})
    return {"priorityClassName": name}


def gpu_pod(b: Backend, name: str, cls: str, priority: int, *, gated: bool = True,
            gang: str | None = None) -> None:
    b.create(claims_path(b), {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                              "metadata": {"name": f"{name}-gpu"}, "spec": {"devices": {"requests": [
                                  {"name": "gpu", "exactly": {"deviceClassName": cls}}]}}})
    meta: dict[str, Any] = {"name": name}
    if gang:
        meta["labels"] = {"resource.draco.dev/gang": gang}
    b.create(pods_path(b), {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {
        "schedulingGates": [{"name": GATE}] if gated else [], **priority_of(b, priority),
        "resourceClaims": [{"name": "gpu", "resourceClaimName": f"{name}-gpu"}],
        "containers": [{"name": "c", "image": "registry.invalid/app",
                        "resources": {"claims": [{"name": "gpu"}]}}],
        "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}]}})


def devices(b: Backend, pod: str) -> list[str]:
    return sorted(r["device"] for r in results(b, f"{pod}-gpu") or [])


def gated(b: Backend, pod: str) -> bool:
    found = b.get(f"{pods_path(b)}/{pod}") or {}
    return bool(found.get("spec", {}).get("schedulingGates"))


def release_orphaned_claims(b: Backend) -> None:
    """kube-controller-manager's part on the embedded server: a claim reserved only for
    pods that are gone is unreserved and deallocated."""
    listed = b.request("GET", claims_path(b))[1]
    live = {p["metadata"]["uid"] for p in b.request("GET", pods_path(b))[1]["items"]}
    for claim in listed["items"]:
        reserved = (claim.get("status") or {}).get("reservedFor") or []
        if reserved and not any(r.get("uid") in live for r in reserved):
            b.request("PUT", f"{claims_path(b)}/{claim['metadata']['name']}/status",
                      {**claim, "status": {}})


PREEMPTING_EVENT = re.compile(r"evicting (?P<victims>.+?) for devices (?P<devices>.+?): ")


def recorded(b: Backend, pod: str) -> dict[str, Any] | None:
    """POD's nomination: its annotation while it stands, else (the preemption may finish
    within a poll on a fast cluster, and the annotation go with it) the victims and
    devices its `Preempting` Event recorded."""
    found = b.get(f"{pods_path(b)}/{pod}") or {}
    text = (found.get("metadata", {}).get("annotations") or {}).get(NOMINATION_ANNOTATION)
    if text:
        return dict(json.loads(text))
    for event in b.events(b.ns):
        if event.get("reason") == "Preempting" and event.get("involvedObject", {}).get("name") == pod:
            match = PREEMPTING_EVENT.search(event.get("message", ""))
            if match:
                return {"victims": sorted(match["victims"].split(", ")),
                        "devices": sorted(match["devices"].split(", "))}
    return None


def standing(b: Backend, pod: str) -> bool:
    found = b.get(f"{pods_path(b)}/{pod}") or {}
    return NOMINATION_ANNOTATION in (found.get("metadata", {}).get("annotations") or {})


def test_a_high_priority_pod_preempts_and_gets_the_nominated_devices(
        backend: Backend, operator: Any) -> None:
    b = backend
    cls = device_class(b)
    node_slice(b, "node-0", [{"name": "gpu-0"}, {"name": "gpu-1"}])
    operator(("allocator", "narrowing"), PREEMPTING)  # the low-priority pods get both GPUs
    for i in range(2):
        gpu_pod(b, f"low-{i}", cls, 10)
    wait_for(lambda: all(devices(b, f"low-{i}") and not gated(b, f"low-{i}") for i in range(2)),
             timeout=60)
    held = {f"low-{i}": devices(b, f"low-{i}") for i in range(2)}
    gpu_pod(b, "vip", cls, 1000)
    gpu_pod(b, "rival", cls, 10)  # same moment, lower priority: must not get the freed GPU

    nomination = wait_for(lambda: recorded(b, "vip"), timeout=60)
    assert len(nomination["victims"]) == 1 and nomination["victims"][0].startswith(f"{b.ns}/low-")
    victim = nomination["victims"][0].split("/")[1]
    wanted = held[victim]  # the victim's GPU is the one nominated
    assert nomination["devices"] == [f"{b.driver}/{b.ns}-node-0/{wanted[0]}"]
    wait_for(lambda: b.get(f"{pods_path(b)}/{victim}") is None, timeout=90)
    # the victim's Preempted Event is posted after its deletion: waited for, not read once
    wait_for(lambda: {"Preempting", "Preempted"} <= {e.get("reason") for e in b.events(b.ns)},
             timeout=30, what="the Preempting and Preempted Events")
    if b.name == "embedded":
        release_orphaned_claims(b)
    wait_for(lambda: devices(b, "vip") == wanted and not gated(b, "vip"), timeout=90)
    if b.name == "real":  # kube-scheduler binds it where its claim is
        wait_for(lambda: (b.get(f"{pods_path(b)}/vip") or {}).get("spec", {}).get("nodeName")
                 == "node-0", timeout=60)
    assert devices(b, "rival") == [] and gated(b, "rival"), "the nominated GPU went to no one else"
    wait_for(lambda: not standing(b, "vip"), timeout=30)
    survivors = [f"low-{i}" for i in range(2) if f"low-{i}" != victim]
    assert all(b.get(f"{pods_path(b)}/{p}") is not None for p in survivors), "one victim only"


@pytest.fixture
def operator_on_137(real_137: RealBackend, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    yield from operator_threads(real_137.kubeconfig, monkeypatch)


def scheduled_condition(b: Backend, pod: str) -> dict[str, Any]:
    found = b.get(f"{pods_path(b)}/{pod}") or {}
    return next((c for c in (found.get("status") or {}).get("conditions") or []
                 if c.get("type") == "PodScheduled"), {})


@pytest.mark.real
def test_137_kube_scheduler_alone_leaves_it_pending_draco_preempts(
        real_137: RealBackend, operator_on_137: Any) -> None:
    b = real_137
    cls = device_class(b)
    node_slice(b, "node-0", [{"name": "gpu-0"}, {"name": "gpu-1"}])
    for i in range(2):
        gpu_pod(b, f"low-{i}", cls, 10, gated=False)  # kube-scheduler allocates these
    wait_for(lambda: all(devices(b, f"low-{i}") for i in range(2)), timeout=60)
    held = {f"low-{i}": devices(b, f"low-{i}") for i in range(2)}
    # kube-scheduler alone: its preemption cannot free devices, the pod stays pending
    gpu_pod(b, "alone", cls, 1000, gated=False)
    wait_for(lambda: scheduled_condition(b, "alone").get("reason") == "Unschedulable", timeout=60)
    time.sleep(5)  # give its preemption a chance to act (it cannot)
    assert scheduled_condition(b, "alone").get("status") == "False"
    assert all(b.get(f"{pods_path(b)}/low-{i}") is not None for i in range(2))
    b.request("DELETE", f"{pods_path(b)}/alone")
    # with draco: the gated pod preempts one of them and gets its GPU; an ungated pod
    # of lower priority, created at the same moment, is kept off the freed GPU by the
    # NoSchedule fence draco puts on it for kube-scheduler
    operator_on_137(("allocator", "narrowing"), PREEMPTING)
    fences = f"{FENCE_RULES}?labelSelector={FENCE_LABEL}"
    # The fence stands only from the nomination until vip is allocated, which can be the
    # same instant: a watch, opened before vip exists, sees it however briefly it stood.
    with b.watching(fences) as seen:
        gpu_pod(b, "vip", cls, 1000)
        gpu_pod(b, "rival", cls, 500, gated=False)
        uid = (b.get(f"{pods_path(b)}/vip") or {}).get("metadata", {}).get("uid")

        def fenced() -> list[dict[str, Any]]:
            return [r for r in (b.get(fences) or {}).get("items", [])
                    if r["metadata"]["labels"].get(FENCE_LABEL) == uid]

        rules = wait_for(lambda: [e["object"] for e in seen if e.get("type") == "ADDED"
                                  and e["object"]["metadata"]["labels"].get(FENCE_LABEL) == uid],
                         timeout=60, what="vip's fence rule to be created")
    taint = rules[0]["spec"]["taint"]  # the server adds timeAdded
    assert (taint["key"], taint["effect"], taint["value"]) == (
        "resource.draco.dev/nominated", "NoSchedule", rules[0]["metadata"]["labels"][FENCE_LABEL])
    wait_for(lambda: devices(b, "vip") and not gated(b, "vip"), timeout=120)
    gone = [p for p in held if b.get(f"{pods_path(b)}/{p}") is None]
    assert len(gone) == 1 and devices(b, "vip") == held[gone[0]]
    assert devices(b, "rival") == [], "kube-scheduler kept off the nominated GPU"
    wait_for(lambda: not fenced(), timeout=30)  # the fence goes with the nomination
    wait_for(lambda: (b.get(f"{pods_path(b)}/vip") or {}).get("spec", {}).get("nodeName") == "node-0",
             timeout=60)


def test_a_new_draco_finishes_the_nomination_it_finds(backend: Backend, operator: Any) -> None:
    """draco stops right after recording a nomination; the next one (a restart, a new
    leader) evicts no one else and gives the preemptor the nominated GPU."""
    b = backend
    cls = device_class(b)
    node_slice(b, "node-0", [{"name": "gpu-0"}, {"name": "gpu-1"}])
    first = operator(("allocator", "narrowing"), PREEMPTING)
    for i in range(2):
        gpu_pod(b, f"low-{i}", cls, 10)
    wait_for(lambda: all(devices(b, f"low-{i}") and not gated(b, f"low-{i}") for i in range(2)),
             timeout=60)
    gpu_pod(b, "vip", cls, 1000)

    nomination = wait_for(lambda: recorded(b, "vip"), timeout=60)
    first.stop()  # perhaps before its eviction: the next draco then evicts
    victim = nomination["victims"][0].split("/")[1]
    operator(("allocator", "narrowing"), PREEMPTING)
    wait_for(lambda: b.get(f"{pods_path(b)}/{victim}") is None, timeout=60)
    if b.name == "embedded":
        release_orphaned_claims(b)
    device = nomination["devices"][0].rsplit("/", 1)[1]
    wait_for(lambda: devices(b, "vip") == [device] and not gated(b, "vip"), timeout=90)
    survivor = "low-1" if victim == "low-0" else "low-0"
    assert b.get(f"{pods_path(b)}/{survivor}") is not None, "no victim beyond the nomination's"
    wait_for(lambda: not standing(b, "vip"), timeout=30)


def gang_preempts(b: Backend, operator: Any) -> None:
    """Two priority-10 pods hold both GPUs of node-0; a priority-1000 gang of two (minCount
    2) arrives with a priority-10 rival: both low pods go, the gang gets both GPUs
    together (`Allocated`), the rival none."""
    cls = device_class(b)
    node_slice(b, "node-0", [{"name": "gpu-0"}, {"name": "gpu-1"}])
    operator(("allocator", "narrowing"), PREEMPTING)
    for i in range(2):
        gpu_pod(b, f"low-{i}", cls, 10)
    wait_for(lambda: all(devices(b, f"low-{i}") and not gated(b, f"low-{i}") for i in range(2)),
             timeout=60)
    gang_object(b, "team", 2)
    for i in range(2):
        gpu_pod(b, f"t-{i}", cls, 1000, gang="team")
    gpu_pod(b, "rival", cls, 10)

    both = wait_for(lambda: (recorded(b, "t-0"), recorded(b, "t-1")) if recorded(b, "t-0")
                    and recorded(b, "t-1") else None, timeout=60)
    assert both[0]["victims"] == both[1]["victims"] == [f"{b.ns}/low-0", f"{b.ns}/low-1"]
    assert sorted(both[0]["devices"] + both[1]["devices"]) == [
        f"{b.driver}/{b.ns}-node-0/gpu-0", f"{b.driver}/{b.ns}-node-0/gpu-1"]
    wait_for(lambda: all(b.get(f"{pods_path(b)}/low-{i}") is None for i in range(2)), timeout=90)
    if b.name == "embedded":
        release_orphaned_claims(b)
    b.kubectl("wait", "--for=condition=Allocated", "gang/team", "--timeout=90s", timeout=120)
    assert sorted(devices(b, "t-0") + devices(b, "t-1")) == ["gpu-0", "gpu-1"]
    wait_for(lambda: not gated(b, "t-0") and not gated(b, "t-1"), timeout=60)
    assert devices(b, "rival") == [] and gated(b, "rival"), "the nominated GPUs went to no one else"
    wait_for(lambda: not standing(b, "t-0") and not standing(b, "t-1"), timeout=30)


def test_a_gang_preempts_and_is_placed_whole(backend: Backend, operator: Any) -> None:
    gang_preempts(backend, operator)


@pytest.mark.real
def test_137_a_gang_preempts_and_is_placed_whole(real_137: RealBackend, operator_on_137: Any) -> None:
    gang_preempts(real_137, operator_on_137)
