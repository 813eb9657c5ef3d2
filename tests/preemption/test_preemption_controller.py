"""The allocator with `--preemption`, against the fake API: a high-priority gated pod gets
the devices of a lower-priority running pod, the nomination is recorded on it before the
victim is touched, a competing lower-priority pod does not take the freed device, and a
draco killed between the nomination and the eviction is finished by the next one with the
same victims."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from operators.allocator_controller.controller import AllocatorSettings
from operators.preemption.nomination import NOMINATION_ANNOTATION
from tests.fake_api import Response, run
from tests.gangs.test_gang_controller import Cluster as GangCluster
from tests.gangs.test_gang_controller import KillableAPI, Killed
from tests.gangs.world import NS, classes, gpus, node, node_slice
from tests.preemption.test_victims import preemptor, running


class API(KillableAPI):
    """The fake API plus pod deletion (graceful deletion is instant here) and a kill
    switch before the Nth pod deletion."""

    def __init__(self) -> None:
        super().__init__()
        self.deletes_left: int | None = None
        self.delete_delay = 0.0  # seconds a pod deletion takes to answer

    async def request(self, method: str, path: str, body: Any = None, content_type: str = "") -> Response:
        if self.dead:
            raise Killed
        if method == "DELETE" and "/pods/" in path:
            if self.delete_delay:
                await asyncio.sleep(self.delete_delay)
            if self.deletes_left is not None:
                if self.deletes_left == 0:
                    self.dead = True
                    raise Killed
                self.deletes_left -= 1
            self.calls.append((method, path, body))
            obj = self.objects.get(path)
            if obj is None:
                return Response(404, {"message": "not found"})
            uid = ((body or {}).get("preconditions") or {}).get("uid")
            if uid not in (None, obj["metadata"]["uid"]):
                return Response(409, {"message": "uid precondition"})
            del self.objects[path]
            return Response(200, obj)
        if method == "GET" and path == "/apis/policy/v1/poddisruptionbudgets":
            return Response(200, {"items": []})
        return await super().request(method, path, body, content_type)


class Cluster(GangCluster):
    """The gang tests' cluster (fake API, tracker, allocator and narrowing, restartable),
    with preemption on and pods that can be deleted."""

    settings = AllocatorSettings(preemption=True)
    api: API

    def new_api(self) -> API:
        return API()

    def start(self) -> None:
        self.api.deletes_left = None
        super().start()

    def echo(self) -> None:
        """Every stored object's watch event; deleted pods' DELETED events."""
        stored = set(self.api.objects)
        for pod in list(self.tracker.pods()):
            path = f"/api/v1/namespaces/{pod.meta.namespace}/pods/{pod.meta.name}"
            if path not in stored:
                self.tracker.apply({"type": "DELETED", "object": {
                    "apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": pod.meta.name, "namespace": pod.meta.namespace,
                                 "uid": pod.meta.uid}}})
        super().echo()

    def release_claims_of_gone_pods(self) -> None:
        """What kube-controller-manager's resource claim controller does: a claim whose
        pod is gone loses its reservation and its allocation."""
        pods = {p["metadata"]["uid"] for p in self.api.objects.values() if p["kind"] == "Pod"}
        for path, obj in list(self.api.objects.items()):
            if obj["kind"] != "ResourceClaim":
                continue
            reserved = (obj.get("status") or {}).get("reservedFor") or []
            if reserved and not any(r["uid"] in pods for r in reserved):
                self.api.touch(path, lambda o: o.update(status={}))
        self.echo()

    def pod(self, name: str) -> dict[str, Any] | None:
        return self.api.objects.get(f"/api/v1/namespaces/{NS}/pods/{name}")

    def nomination(self, name: str) -> dict[str, Any] | None:
        pod = self.pod(name)
        text = ((pod or {}).get("metadata", {}).get("annotations") or {}).get(NOMINATION_ANNOTATION)
        return json.loads(text) if text else None

    def devices(self, claim: str) -> list[str]:
        alloc = (self.api.claim(NS, claim).get("status") or {}).get("allocation")
        return [r["device"] for r in alloc["devices"]["results"]] if alloc else []


def world() -> list[dict[str, Any]]:
    """One GPU on node a, held by a priority-0 pod; a priority-100 gated pod wants it, and
    a priority-0 gated pod created at the same moment wants it too."""
    other = preemptor("other", priority=0)
    return [*classes(), node("a"), *node_slice("a", gpus(1)),
            *running("low", "a", "gpu-0", priority=0), *preemptor("vip", priority=100), *other]


def test_the_victim_goes_and_the_preemptor_gets_its_device() -> None:
    c = Cluster(world())
    run(c.settle())
    nomination = c.nomination("vip")
    assert nomination is not None
    assert nomination["victims"] == [f"{NS}/low"]
    assert nomination["devices"] == ["driver-a/a/gpu-0"] and nomination["node"] == "a"
    assert c.pod("low") is None, "the victim was deleted"
    marks = [b for m, p, b in c.api.calls if m == "PATCH" and p.endswith("/pods/low/status")]
    assert marks and marks[0]["status"]["conditions"][0]["reason"] == "PreemptionByDraco"
    nominated_at = next(i for i, (m, p, _) in enumerate(c.api.calls)
                        if m == "PATCH" and p.endswith("/pods/vip"))
    deleted_at = next(i for i, (m, p, _) in enumerate(c.api.calls) if m == "DELETE")
    assert nominated_at < deleted_at, "the nomination is in the API before the victim is touched"
    assert c.devices("vip-claim") == [] and c.devices("other-claim") == []
    c.release_claims_of_gone_pods()  # the victim's claim is freed
    run(c.settle())
    assert c.devices("vip-claim") == ["gpu-0"]
    assert c.devices("other-claim") == [], "the nominated device went to no one else"
    assert c.nomination("vip") is None, "the nomination ends with the allocation"
    reasons = {e["reason"] for e in c.api.events}
    assert {"Preempting", "Preempted"} <= reasons


def test_no_preemption_when_off_or_for_never_or_equal_priority() -> None:
    for policy, priority in ((None, 0), ("Never", 100)):
        objs = [o for o in world() if o["metadata"]["name"] not in ("vip", "vip-claim")]
        objs += preemptor("vip", priority=priority, policy=policy)
        c = Cluster(objs)
        run(c.settle())
        assert c.nomination("vip") is None and c.pod("low") is not None, (policy, priority)
    c = Cluster(world())
    c.allocator.settings = AllocatorSettings(preemption=False)
    run(c.settle())
    assert c.nomination("vip") is None and c.pod("low") is not None


def test_a_new_draco_finishes_the_same_nomination() -> None:
    objs = [*classes(), node("a"), *node_slice("a", gpus(2)),
            *running("low-1", "a", "gpu-0", priority=0), *running("low-2", "a", "gpu-1", priority=1),
            *preemptor("vip", priority=100, count=2)]
    c = Cluster(objs)
    c.api.deletes_left = 1  # dies before the second victim's deletion
    run(c.settle())
    first = c.nomination("vip")
    assert first is not None and sorted(first["victims"]) == [f"{NS}/low-1", f"{NS}/low-2"]
    assert c.pod("low-1") is None and c.pod("low-2") is not None
    c.start()  # a newly elected draco, from the API's objects
    run(c.settle())
    assert c.pod("low-2") is None, "the next draco evicts the nomination's remaining victim"
    assert c.nomination("vip") == first, "same nomination, no new victims"
    c.release_claims_of_gone_pods()
    run(c.settle())
    assert sorted(c.devices("vip-claim")) == ["gpu-0", "gpu-1"]
    assert c.nomination("vip") is None


def test_an_unreadable_nomination_is_replaced_by_a_new_one() -> None:
    objs = world()
    for obj in objs:
        if obj["kind"] == "Pod" and obj["metadata"]["name"] == "vip":
            obj["metadata"]["annotations"] = {NOMINATION_ANNOTATION: "{not json"}
    c = Cluster(objs)
    run(c.settle())
    nomination = c.nomination("vip")
    assert nomination is not None and nomination["victims"] == [f"{NS}/low"]
