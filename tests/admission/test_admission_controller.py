"""The devices check's controller against the fake API: what Kueue and a user would see
on the Workloads and AdmissionChecks (state, message, podSetUpdates, the reservation
annotation), across restarts, refused writes, evictions and a cluster without Kueue."""

from __future__ import annotations

import asyncio
import copy
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from structlog.testing import capture_logs

from operators.admission.reservation import RESERVATION_ANNOTATION
from operators.admission_controller.controller import KUEUE, AdmissionController, AdmissionSettings
from operators.cli.state import build_tracker
from tests.admission.kueue import (
    CHECK,
    NS,
    T0,
    admission_check,
    gpu_template,
    hosts,
    pod_set,
    workload,
)
from tests.fake_api import FakeAPI, Response, run
from tests.gangs.world import classes, gpus, member, node, node_slice

KUEUE_KINDS = ("Workload", "AdmissionCheck")
START = datetime(2026, 11, 28, tzinfo=UTC)


class KueueAPI(FakeAPI):
    """The fake API, serving Kueue's Workloads and AdmissionChecks too (when `kueue`)."""

    def __init__(self, kueue: bool = True) -> None:
        super().__init__()
        self.kueue = kueue
        self.templates: list[dict[str, Any]] = []

    @staticmethod
    def path_of(obj: dict[str, Any]) -> str:
        md = obj["metadata"]
        if obj["kind"] == "Workload":
            return f"{KUEUE}/namespaces/{md['namespace']}/workloads/{md['name']}"
        if obj["kind"] == "AdmissionCheck":
            return f"{KUEUE}/admissionchecks/{md['name']}"
        return FakeAPI.path_of(obj)

    def _get(self, path: str) -> Response:
        if path.startswith(KUEUE) and not self.kueue:
            return Response(404, {"reason": "NotFound"})
        if path == KUEUE:
            return Response(200, {"kind": "APIResourceList", "groupVersion": "kueue.x-k8s.io/v1beta2"})
        listed = {f"{KUEUE}/workloads": "/workloads/", f"{KUEUE}/admissionchecks": "/admissionchecks/"}
        if path in listed:
            return Response(200, {"items": [copy.deepcopy(o) for p, o in self.objects.items()
                                            if listed[path] in p]})
        if path == f"{KUEUE}/resourceflavors":
            return Response(200, {"items": []})
        if path == "/apis/resource.k8s.io/v1/resourceclaimtemplates":
            return Response(200, {"items": copy.deepcopy(self.templates)})
        return super()._get(path)

    def workload(self, name: str = "w") -> dict[str, Any]:
        return self.objects[f"{KUEUE}/namespaces/{NS}/workloads/{name}"]

    def check_of(self, name: str = "w") -> dict[str, Any]:
        (entry,) = [c for c in self.workload(name)["status"]["admissionChecks"] if c["name"] == CHECK]
        return entry


class Draco:
    """draco's devices check on one fake API; `restart()` starts a new one against it."""

    def __init__(self, objects: list[dict[str, Any]], *, kueue: bool = True,
                 settings: AdmissionSettings | None = None) -> None:
        self.api = KueueAPI(kueue)
        self.others = [o for o in objects if o["kind"] not in (*KUEUE_KINDS, "ResourceClaimTemplate")]
        self.api.nodes = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Node"}
        self.api.templates = [o for o in objects if o["kind"] == "ResourceClaimTemplate"]
        for obj in objects:
            if obj["kind"] in KUEUE_KINDS:
                self.api.add(obj)
        self.settings = settings or AdmissionSettings()
        self.now = 1000.0
        self.wall = START
        self.restart()

    def restart(self) -> None:
        self.tracker = build_tracker(self.others)
        self.controller = AdmissionController(self.tracker, self.api, self.settings,  # type: ignore[arg-type]
                                              clock=lambda: self.wall, monotonic=lambda: self.now)

    async def settle(self, rounds: int = 3) -> None:
        for _ in range(rounds):
            await self.controller.step()
            while self.controller.tasks:
                await asyncio.gather(*list(self.controller.tasks))

    def kueue_changes(self, name: str, change: Any) -> None:
        """Kueue writes the Workload; the watch tells draco."""
        path = KueueAPI.path_of({"kind": "Workload", "metadata": {"namespace": NS, "name": name}})
        self.api.touch(path, change)
        self.controller.workload_event("MODIFIED", self.api.objects[path])

    def add(self, obj: dict[str, Any]) -> None:
        self.api.add(obj)
        self.controller.workload_event("ADDED", self.api.objects[self.api.path_of(obj)])


def world(*workloads: dict[str, Any], gpus_per_node: int = 2) -> list[dict[str, Any]]:
    return [*classes(), node("n-1"), *node_slice("n-1", gpus(gpus_per_node)), gpu_template(),
            admission_check(), *workloads]


def workers(n: int) -> dict[str, Any]:
    return pod_set("workers", n, templates={"gpu": "gpu"})


def reservation(api: KueueAPI, name: str = "w") -> dict[str, Any] | None:
    text = (api.workload(name)["metadata"].get("annotations") or {}).get(RESERVATION_ANNOTATION)
    return json.loads(text) if text else None


def test_a_fitting_workload_is_ready_with_its_reservation_and_the_check_is_active() -> None:
    d = Draco(world(workload("w", [workers(2)])))
    run(d.settle())
    entry = d.api.check_of()
    assert entry["state"] == "Ready"
    assert entry["message"] == "devices reserved for 2 pods"
    assert entry["podSetUpdates"] == [{"name": "workers", "annotations": {"resource.draco.dev/workload": "w"}}]
    assert entry["lastTransitionTime"] == "2026-11-28T00:00:00Z"
    r = reservation(d.api)
    assert r is not None and r["uid"] == "uid-w"
    assert r["devices"] == [["driver-a", "n-1", "gpu-0"], ["driver-a", "n-1", "gpu-1"]]
    assert set(r["allocations"]["workers"]) == {"0", "1"}
    assert r["allocations"]["workers"]["0"]["gpu"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"] == [
        {"key": "metadata.name", "operator": "In", "values": ["n-1"]}]
    (active,) = d.api.objects[f"{KUEUE}/admissionchecks/{CHECK}"]["status"]["conditions"]
    assert (active["type"], active["status"], active["reason"], active["observedGeneration"]) == (
        "Active", "True", "Active", 1)
    # the annotation is written before the check turns Ready
    writes = [p for m, p, _ in d.api.calls if m == "PATCH" and "/workloads/" in p]
    assert writes == [f"{KUEUE}/namespaces/{NS}/workloads/w", f"{KUEUE}/namespaces/{NS}/workloads/w/status"]


def test_two_workloads_never_get_the_same_devices() -> None:
    d = Draco(world(workload("a", [workers(2)]), workload("b", [workers(1)])))
    run(d.settle())
    assert d.api.check_of("a")["state"] == "Ready"
    b = d.api.check_of("b")
    assert b["state"] == "Retry" and b["requeueAfterSeconds"] == 30
    assert "needs 1 free devices across the gang, the domain has 0" in b["message"]
    assert reservation(d.api, "b") is None


def test_more_than_the_cluster_has_is_rejected() -> None:
    d = Draco(world(workload("w", [workers(3)])))
    run(d.settle())
    entry = d.api.check_of()
    assert entry["state"] == "Rejected" and "can never fit" in entry["message"]
    assert "requeueAfterSeconds" not in entry


def test_only_workloads_with_quota_and_a_pending_check_of_draco_are_answered() -> None:
    d = Draco(world(workload("none", [workers(1)], quota=False),
                    workload("other", [workers(1)], checks=("someone-else",)),
                    workload("done", [workers(1)], state="Ready")))
    run(d.settle())
    assert [m for m, p, _ in d.api.calls if m == "PATCH" and "/workloads/" in p] == []
    assert d.controller.decisions == 0


def test_a_restarted_draco_keeps_the_reservation_and_never_places_twice() -> None:
    d = Draco(world(workload("a", [workers(1)]), gpus_per_node=2))
    run(d.settle())
    first = reservation(d.api, "a")
    d.restart()  # a new leader: nothing in memory
    d.add(workload("b", [workers(1)]))
    run(d.settle())
    assert reservation(d.api, "a") == first
    b = reservation(d.api, "b")
    assert b is not None and b["devices"] != first["devices"]  # type: ignore[index]
    # Kueue resets a's check to Pending (say, its own retry): answered from the reservation
    d.kueue_changes("a", lambda w: w["status"]["admissionChecks"][0].update(state="Pending"))
    run(d.settle())
    assert d.api.check_of("a")["state"] == "Ready"
    assert reservation(d.api, "a") == first
    assert d.controller.decisions == 1  # b only: a was never searched again


def test_a_refused_reservation_write_keeps_nothing_and_decides_again() -> None:
    d = Draco(world(workload("w", [workers(1)])))

    def kueue_writes(path: str) -> None:  # Kueue updates the Workload just before draco's write
        if "/workloads/" not in path:
            d.api.before_write = kueue_writes
            return
        d.api.touch(path, lambda w: w["metadata"].setdefault("labels", {}).update(x="y"))

    d.api.before_write = kueue_writes
    run(d.settle())
    assert d.api.check_of()["state"] == "Ready"
    assert reservation(d.api) is not None
    assert len(d.controller.reservations) == 1


def test_eviction_and_finishing_release_the_devices() -> None:
    d = Draco(world(workload("a", [workers(2)]), workload("b", [workers(2)])))
    run(d.settle())
    assert d.api.check_of("a")["state"] == "Ready" and d.api.check_of("b")["state"] == "Retry"

    def evicted(w: dict[str, Any]) -> None:
        w["status"]["conditions"].append({"type": "Evicted", "status": "True", "reason": "Preempted",
                                          "message": "", "lastTransitionTime": T0})

    d.kueue_changes("a", evicted)
    run(d.settle())
    assert reservation(d.api, "a") is None and len(d.controller.reservations) == 0
    d.kueue_changes("b", lambda w: w["status"]["admissionChecks"][0].update(state="Pending"))
    run(d.settle())
    assert d.api.check_of("b")["state"] == "Ready"


def test_a_reservation_no_pod_comes_for_is_released_after_the_timeout() -> None:
    d = Draco(world(workload("w", [workers(1)])), settings=AdmissionSettings(pod_timeout=60))
    run(d.settle())
    assert d.api.check_of()["state"] == "Ready"
    d.now += 61
    d.wall += timedelta(seconds=61)
    run(d.settle())
    entry = d.api.check_of()
    assert entry["state"] == "Retry" and "no pod of the Workload came within 60s" in entry["message"]
    assert reservation(d.api) is None and len(d.controller.reservations) == 0


def test_a_pod_that_came_keeps_the_reservation_past_the_timeout() -> None:
    d = Draco(world(workload("w", [workers(1)])), settings=AdmissionSettings(pod_timeout=60))
    run(d.settle())
    pod = member("w-pod", "none", [])[0]
    pod["metadata"]["labels"] = {}
    pod["metadata"]["annotations"] = {"resource.draco.dev/workload": "w"}
    d.tracker.apply({"type": "ADDED", "object": pod})
    d.now += 61
    run(d.settle())
    assert d.api.check_of()["state"] == "Ready" and reservation(d.api) is not None


def test_tas_keeps_its_pods_per_node() -> None:
    objs = [*classes(), node("n-1"), *node_slice("n-1", gpus(1)), node("n-2"), *node_slice("n-2", gpus(1)),
            gpu_template(), admission_check(),
            workload("w", [workers(2)], assignments={"workers": hosts(("n-1", 1), ("n-2", 1))})]
    d = Draco(objs)
    run(d.settle())
    r = reservation(d.api)
    assert r is not None and sorted(r["nodes"]["workers"].values()) == ["n-1", "n-2"]


def test_without_kueue_the_controller_says_so_once_and_stays_idle() -> None:
    d = Draco(world(), kueue=False, settings=AdmissionSettings(probe_interval=300))
    with capture_logs() as logs:
        delays = [run(d.controller.step()) for _ in range(3)]
        d.now += 301
        run(d.controller.step())
    said = [e for e in logs if "not served" in e["event"]]
    assert len(said) == 1 and delays == [300, 300, 300]
    assert [p for _, p, _ in d.api.calls] == [KUEUE, KUEUE]  # probed twice, 300 s apart
    d.api.kueue = True
    d.api.add(workload("w", [workers(1)]))
    d.now += 301
    with capture_logs() as logs:
        run(d.settle())
    assert any("served now" in e["event"] for e in logs)
    assert d.api.check_of()["state"] == "Ready"


def arriving_pod(name: str, workload_name: str = "w") -> list[dict[str, Any]]:
    """A pod Kueue started from the Workload (draco's gate, the podSetUpdates' annotation,
    Kueue's PodSet label) and the claim generated for it from the template."""
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": f"{name}-gpu", "namespace": NS, "uid": f"uid-{name}-gpu",
                          "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": name,
                                               "uid": f"uid-{name}", "controller": True}]},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "class-a"}}]}}}
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}",
                        "labels": {"kueue.x-k8s.io/podset": "workers"},
                        "annotations": {"resource.draco.dev/workload": workload_name}},
           "spec": {"schedulingGates": [{"name": "resource.draco.dev/allocation"}],
                    "containers": [{"name": "c", "image": "busybox"}],
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu"}]},
           "status": {"phase": "Pending",
                      "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": f"{name}-gpu"}]}}
    return [claim, pod]


def test_arriving_pods_get_exactly_the_reserved_devices_and_others_never_do() -> None:
    from operators.allocator_controller.holds import Holds
    from operators.model import DeviceID, NamespacedName

    d = Draco(world(workload("w", [workers(2)]), gpus_per_node=3))
    holds = Holds()  # the allocator controller's, shared as `draco run` shares it
    d.controller.attach(holds)
    run(d.settle())
    r = reservation(d.api)
    assert r is not None
    reserved = {DeviceID(*x) for x in r["devices"]}
    assert all(holds.holds_device(x) for x in reserved), "kept from every other allocation"
    assert not holds.holds_device(DeviceID("driver-a", "n-1", "gpu-2"))
    got = set()
    for name in ("job-0", "job-1"):
        claim, pod = arriving_pod(name)
        d.api.add(claim)
        d.tracker.apply({"type": "ADDED", "object": claim})
        d.tracker.apply({"type": "ADDED", "object": pod})
        # held at once, before any pass: the allocator skips a pod whose claims are held
        assert NamespacedName(NS, f"{name}-gpu") in holds
        run(d.settle())
        written = d.api.claim(NS, f"{name}-gpu")
        (result,) = written["status"]["allocation"]["devices"]["results"]
        got.add(DeviceID(result["driver"], result["pool"], result["device"]))
        assert written["status"]["reservedFor"] == [{"resource": "pods", "name": name, "uid": f"uid-{name}"}]
        d.tracker.apply({"type": "MODIFIED", "object": written})  # the watch shows it allocated
    assert got == reserved
    assert d.controller.arrivals.written == 2
    assert not any(holds.holds_device(x) for x in reserved), "the claims hold them now, the holds not"


def test_reservations_are_known_only_after_the_first_listing_or_without_kueue() -> None:
    # the allocator starts only then (cli.run.reservations_known): a restarted draco
    # never hands out, before its first listing, devices a Ready Workload keeps
    d = Draco(world())
    assert not d.controller.reservations_known
    run(d.controller.step())
    assert d.controller.reservations_known
    absent = Draco(world(), kueue=False)
    run(absent.controller.step())
    assert absent.controller.reservations_known  # 404: no Workload can keep anything


def test_an_unanswered_probe_is_not_taken_for_kueue_being_absent() -> None:
    d = Draco(world())
    real_get = d.api._get
    d.api._get = lambda path: Response(503, {"reason": "ServiceUnavailable"}) if path == KUEUE else real_get(path)  # type: ignore[method-assign]
    with capture_logs() as logs:
        try:
            run(d.controller.step())
        except RuntimeError as e:
            assert "cannot tell whether Kueue's API is served: /apis/kueue.x-k8s.io/v1beta2 answered 503" in str(e)
        else:
            raise AssertionError("a 503 must fail the pass")
    assert not [e for e in logs if "not served" in e["event"]]
    assert not d.controller.reservations_known
    d.api._get = real_get  # type: ignore[method-assign]
    run(d.controller.step())  # asked again at once, not after probe_interval
    assert d.controller.reservations_known and d.controller.served


def test_the_allocator_starts_after_the_sync_and_the_admission_checks_first_listing() -> None:
    from operators.cli.run import reservations_known

    order: list[str] = []
    check = Draco(world()).controller

    async def synced() -> None:
        order.append("synced")

    async def scenario() -> None:
        waiter = asyncio.ensure_future(reservations_known(synced, [check])())
        await asyncio.sleep(0.2)
        assert not waiter.done() and order == ["synced"]
        await check.step()
        await asyncio.wait_for(waiter, 5)
    run(scenario())
    assert check.reservations_known
