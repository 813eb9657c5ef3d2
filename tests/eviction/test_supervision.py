"""A failure in any step of the eviction controller costs that one object, never the
controller: it is logged, counted in draco_controller_errors_total, reported on the
object, and the other pods are still evicted and the other rules still get status.

Fake clock and a recording API client: no server, no sleeping.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from operators.cli.state import build_tracker
from operators.eviction import index as index_module
from operators.eviction import rule_writer
from operators.eviction.controller import EvictionController, EvictionSettings
from operators.kube.client import Response
from operators.kube.supervision import Supervisor, error_count
from tests.eviction.test_controller_clock import RecordingClient

T0 = datetime(2026, 1, 1, tzinfo=UTC)
NOW = T0 + timedelta(hours=1)
DRIVER = "gpu.example.com"
PODS = ("a", "b", "c")


def objects(seconds: dict[str, int] | None = None) -> list[dict[str, Any]]:
    """Pods a, b, c on devices da, db, dc of one node; rules `bad` (on da) and `good` (on db)."""
    seconds = seconds or {}
    out: list[dict[str, Any]] = [{
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
        "spec": {"driver": DRIVER, "nodeName": "n1", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": f"d{p}", "taints": [{"key": "k", "effect": "NoExecute", "timeAdded": "2026-01-01T00:00:00Z"}]}
                             for p in PODS]}}]
    for p in PODS:
        result: dict[str, Any] = {"request": "gpu", "driver": DRIVER, "pool": "p", "device": f"d{p}"}
        if p in seconds:
            result["tolerations"] = [{"key": "k", "operator": "Exists", "effect": "NoExecute",
                                      "tolerationSeconds": seconds[p]}]
        out.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                    "metadata": {"name": f"c{p}", "namespace": "ns", "uid": f"uc{p}"},
                    "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
                    "status": {"allocation": {"devices": {"results": [result]}},
                               "reservedFor": [{"resource": "pods", "name": p, "uid": f"u{p}"}]}})
        out.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": p, "namespace": "ns", "uid": f"u{p}"},
                    "spec": {"nodeName": "n1", "resourceClaims": [{"name": "gpu", "resourceClaimName": f"c{p}"}],
                             "containers": [{"name": "c", "image": "i"}]},
                    "status": {"phase": "Running"}})
    for name, device in (("bad", "da"), ("good", "db")):
        out.append({"apiVersion": "resource.draco.dev/v1alpha1", "kind": "DeviceTaintRule",
                    "metadata": {"name": name, "uid": f"uid-{name}", "generation": 1,
                                 "creationTimestamp": "2026-01-01T00:00:00Z"},
                    "spec": {"deviceSelector": {"device": device},
                             "taint": {"key": "k", "effect": "NoExecute", "timeAdded": "2026-01-01T00:00:00Z"}}})
    return out


def events(client: RecordingClient) -> list[tuple[str, str, str, str]]:
    """(reason, kind, name, type) of every Event posted."""
    return [(b["reason"], b["involvedObject"]["kind"], b["involvedObject"]["name"], b["type"])
            for m, p, b in client.calls if m == "POST" and p.endswith("/events")]


def status_writes(client: RecordingClient) -> set[str]:
    return {p.split("/")[-2] for m, p, _ in client.calls if m == "PATCH" and "devicetaintrules" in p
            and p.endswith("/status")}


def run_passes(controller: EvictionController, passes: int = 3) -> None:
    async def scenario() -> None:
        for _ in range(passes):
            await controller.step()
            await asyncio.gather(*controller.tasks)

    asyncio.run(scenario())


def controller_for(client: RecordingClient, objs: list[dict[str, Any]] | None = None,
                   **settings: Any) -> EvictionController:
    tracker = build_tracker(objs or objects())
    return EvictionController(tracker, client, EvictionSettings(status_interval=0, retry_after=0, **settings),  # type: ignore[arg-type]
                              clock=lambda: NOW)


def failing_for(name: str, real: Callable[..., Any], pick: Callable[..., str]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if pick(*args, **kwargs) == name:
            raise RuntimeError(f"injected failure for {name}")
        return real(*args, **kwargs)
    return wrapper


def test_a_claim_whose_decision_raises_is_skipped_and_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    before = error_count("eviction", "plan")
    monkeypatch.setattr(index_module, "safe_claim_eviction", failing_for(
        "ca", index_module.safe_claim_eviction, lambda tracker, claim, *_: claim.meta.name))
    client = RecordingClient()
    run_passes(controller_for(client))
    assert sorted(client.deleted()) == ["/api/v1/namespaces/ns/pods/b", "/api/v1/namespaces/ns/pods/c"]
    assert error_count("eviction", "plan") == before + 1  # reported once, not once per pass
    assert ("DeviceTaintEvictionFailed", "ResourceClaim", "ca", "Warning") in events(client)
    assert {"bad", "good"} <= status_writes(client)


def test_a_pod_whose_decision_raises_is_skipped_and_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    before = error_count("eviction", "plan")
    monkeypatch.setattr(index_module, "pod_eviction", failing_for(
        "a", index_module.pod_eviction, lambda tracker, key, *_: key.name))
    client = RecordingClient()
    run_passes(controller_for(client))
    assert sorted(client.deleted()) == ["/api/v1/namespaces/ns/pods/b", "/api/v1/namespaces/ns/pods/c"]
    assert error_count("eviction", "plan") == before + 1
    assert ("DeviceTaintEvictionFailed", "Pod", "a", "Warning") in events(client)


def test_an_eviction_that_raises_is_retried_and_the_others_go(monkeypatch: pytest.MonkeyPatch) -> None:
    before = error_count("eviction", "evict")
    client = RecordingClient()
    controller = controller_for(client)
    real = controller._evict_one
    calls: list[str] = []

    async def flaky(pod: Any) -> bool:
        calls.append(pod.pod.name)
        if pod.pod.name == "a" and calls.count("a") == 1:
            raise RuntimeError("injected failure")
        return await real(pod)

    monkeypatch.setattr(controller, "_evict_one", flaky)
    run_passes(controller)
    assert sorted(client.deleted()) == [f"/api/v1/namespaces/ns/pods/{p}" for p in PODS]  # a on its retry
    assert error_count("eviction", "evict") == before + 1
    assert ("DeviceTaintEvictionFailed", "Pod", "a", "Warning") in events(client)


def test_a_rule_whose_status_raises_does_not_stop_the_other_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    before = error_count("eviction", "rule-status")
    monkeypatch.setattr(rule_writer.rule_status, "compute", failing_for(
        "bad", rule_writer.rule_status.compute, lambda tracker, rule, *_, **__: rule.name))
    client = RecordingClient()
    run_passes(controller_for(client))
    assert status_writes(client) == {"good"}
    assert len(client.deleted()) == 3
    assert error_count("eviction", "rule-status") >= before + 1
    assert ("DeviceTaintEvictionFailed", "DeviceTaintRule", "bad", "Warning") in events(client)


def test_an_event_that_cannot_be_posted_fails_nothing_else() -> None:
    before = error_count("draco-device-taint-eviction", "event")

    class NoEvents(RecordingClient):
        async def post(self, path: str, body: Any) -> Response:
            if path.endswith("/events"):
                raise ConnectionError("injected: events are down")
            return await super().post(path, body)

    client = NoEvents()
    run_passes(controller_for(client))
    assert len(client.deleted()) == 3 and {"bad", "good"} <= status_writes(client)
    assert error_count("draco-device-taint-eviction", "event") > before


def test_a_failed_pass_is_counted_and_the_loop_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    before = error_count("eviction", "pass")
    client = RecordingClient()
    controller = controller_for(client)
    real = controller._dispatch
    failures = [1]

    def dispatch(now: datetime) -> None:
        if failures:
            failures.pop()
            raise RuntimeError("injected failure of a whole pass")
        real(now)

    monkeypatch.setattr(controller, "_dispatch", dispatch)

    async def scenario() -> None:
        task = asyncio.create_task(controller.run())
        for _ in range(3000):
            if len(client.deleted()) == 3:
                break
            await asyncio.sleep(0.01)
        task.cancel()

    asyncio.run(scenario())
    assert len(client.deleted()) == 3
    assert error_count("eviction", "pass") == before + 1


def test_the_int64_maximum_toleration_neither_crashes_nor_evicts() -> None:
    client = RecordingClient()
    controller = controller_for(client, objects({"a": 9223372036854775807, "b": 300000000000, "c": 60}))
    run_passes(controller)
    assert client.deleted() == ["/api/v1/namespaces/ns/pods/c"]
    assert controller.index.next_due() is None  # a and b never come due


def test_huge_settings_do_not_overflow() -> None:
    client = RecordingClient()
    controller = controller_for(client, grace_period=1e300)
    controller.settings.retry_after = float("inf")
    run_passes(controller)
    assert len(client.deleted()) == 3


def test_a_disruption_budget_refusal_is_not_marking_for_deletion() -> None:
    class Budget(RecordingClient):
        refuse = True

        async def post(self, path: str, body: Any) -> Response:
            if path.endswith("/eviction"):
                self.calls.append(("POST", path, body))
                if self.refuse:
                    return Response(429, {"message": "Cannot evict pod as it would violate the pod's disruption budget."})
                return Response(201, {})
            return await super().post(path, body)

    client = Budget()
    controller = controller_for(client, use_eviction_api=True)
    run_passes(controller, passes=4)
    reasons = [e for e in events(client) if e[1] == "Pod"]
    assert ("DeviceTaintManagerEviction", "Pod", "a", "Normal") not in reasons
    refused = [e for e in reasons if e[0] == "DeviceTaintEvictionRefused"]
    assert sorted(e[2] for e in refused) == ["a", "b", "c"]  # one each, though refused on every pass
    assert all(e[3] == "Warning" for e in refused)
    client.refuse = False
    run_passes(controller, passes=2)
    marked = [e[2] for e in events(client) if e[0] == "DeviceTaintManagerEviction"]
    assert sorted(marked) == ["a", "b", "c"]


def test_the_supervisor_restarts_a_crashed_loop_and_reports_readiness() -> None:
    supervisor = Supervisor(restart_delay=0.05)
    before = error_count("demo", "loop")
    runs: list[int] = []
    seen_dead: list[bool] = []

    async def loop() -> None:
        runs.append(1)
        if len(runs) == 1:
            raise RuntimeError("injected crash")
        await asyncio.sleep(3600)

    async def scenario() -> None:
        state = supervisor.start("demo-loop", loop, controller="demo")
        await asyncio.sleep(0.01)
        seen_dead.append(supervisor.is_alive())  # crashed, waiting to restart
        for _ in range(3000):
            await asyncio.sleep(0.01)
            if len(runs) == 2:
                break
        await asyncio.sleep(0.01)
        seen_dead.append(supervisor.is_alive())
        assert supervisor.status()[0]["restarts"] == 1
        assert "injected crash" in supervisor.status()[0]["lastError"]
        await supervisor.stop(state)
        seen_dead.append(supervisor.is_alive())  # stopped on purpose: nothing unhealthy left

    asyncio.run(scenario())
    assert seen_dead == [False, True, True]
    assert error_count("demo", "loop") == before + 1


def test_the_tracker_feed_skips_an_event_it_cannot_take() -> None:
    from operators.kube.feed import SyncGate, feed_handler
    from operators.tracker import Tracker

    before = error_count("feed", "Pod")
    tracker = Tracker()
    gate = SyncGate()
    gate.expected["Pod"] = {("ns", "odd"), ("ns", "fine")}
    seen: dict[str, set[tuple[str, str]]] = {}
    feed = feed_handler(tracker, "Pod", seen, gate)
    pod = objects()[2]

    async def scenario() -> None:
        gate.primed.set()
        await feed(event={"type": "BOOKMARK", "object": {**pod, "metadata": {**pod["metadata"], "name": "odd"}}})
        await feed(event={"type": "ADDED", "object": {**pod, "metadata": {**pod["metadata"], "name": "fine"}}})

    asyncio.run(scenario())
    assert [p.name for p in tracker.pods()] == ["fine"]
    assert error_count("feed", "Pod") == before + 1
    assert gate.done.is_set()  # the skipped object does not hold the initial sync back


def listing(*answers: Any) -> Any:
    """A client whose list calls give ANSWERS in turn (the last one from then on)."""
    queue = list(answers)

    class Client:
        calls = 0

        async def get(self, path: str) -> Response:
            Client.calls += 1
            answer = queue.pop(0) if len(queue) > 1 else queue[0]
            if isinstance(answer, Exception):
                raise answer
            return answer

    return Client()


POD_P = {"metadata": {"namespace": "ns", "name": "p"}}


def test_an_initial_sync_list_that_fails_is_retried_and_holds_the_gate_until_it_succeeds() -> None:
    """Deciding without every claim (a 403, a refused connection) could give one device to
    two claims, so the gate stays shut and says why until the list succeeds."""
    from operators.kube.feed import SyncGate

    client = listing(RuntimeError("injected: no credentials"), Response(403, {}),
                     Response(200, {"items": [POD_P]}))
    gate = SyncGate()
    gate.recheck_after = 0.0
    states: list[str] = []

    def delay(attempt: int) -> float:
        if not gate.primed.is_set():
            states.append(gate.missing())
        assert not gate.done.is_set()
        return 0.0

    async def scenario() -> None:
        priming = asyncio.create_task(gate.prime(["Pod"], client, {}, delay=delay))
        while not gate.primed.is_set():
            await asyncio.sleep(0)
        # listed at last: the gate now waits for the feed to deliver that pod
        assert not gate.done.is_set() and gate.missing() == "waiting for {'Pod': 1}"
        gate.observe("Pod", POD_P)
        await priming

    asyncio.run(scenario())
    assert states == ["cannot list Pod (RuntimeError: injected: no credentials; retrying)",
                      "cannot list Pod (HTTP 403; retrying)"]
    assert gate.done.is_set()


def test_an_object_deleted_before_the_watch_delivered_it_does_not_hold_the_gate_forever() -> None:
    from operators.kube.feed import SyncGate

    # listed with pod p; p is gone before kopf's watch lists, so no event ever names it
    client = listing(Response(200, {"items": [POD_P]}), Response(200, {"items": []}))
    gate = SyncGate()
    gate.recheck_after = 0.0
    asyncio.run(asyncio.wait_for(gate.prime(["Pod"], client, {}, delay=lambda attempt: 0.0), 5))
    assert gate.done.is_set() and client.calls == 2


def test_while_the_watch_still_delivers_the_initial_sync_lists_nothing_again() -> None:
    """Relisting is for an object deleted before the watch listed it, i.e. a stalled
    sync; while objects keep arriving (10,000 claims take kopf many seconds) a relist
    would only cost a full list each time."""
    from operators.kube.feed import SyncGate

    pods = [{**POD_P, "metadata": {**POD_P["metadata"], "name": f"p{i}"}} for i in range(4)]
    client = listing(Response(200, {"items": pods}))
    gate = SyncGate()
    gate.recheck_after = 0.0
    arriving = iter(pods)

    def deliver_one(attempt: int) -> float:
        """Called before each recheck period: the watch delivers one more object in it."""
        gate.observe("Pod", next(arriving))
        return 0.0

    asyncio.run(asyncio.wait_for(gate.prime(["Pod"], client, {}, delay=deliver_one), 5))
    assert gate.done.is_set() and client.calls == 1


def test_waiting_for_the_initial_sync_has_no_time_limit_by_default() -> None:
    from operators.kube.feed import SyncGate

    gate = SyncGate()
    gate.warn_every = 0.01

    async def scenario() -> tuple[bool, bool]:
        waiter = asyncio.create_task(gate.wait())
        await asyncio.sleep(0.1)  # several warning periods: still waiting
        still = not waiter.done()
        gate.primed.set()
        gate._check()
        return still, await waiter

    assert asyncio.run(scenario()) == (True, True)
    assert asyncio.run(SyncGate().wait(timeout=0.02)) is False


def test_a_restarted_loop_hears_tracker_changes_again() -> None:
    client = RecordingClient()
    objs = objects({"c": 7200})
    controller = controller_for(client, objs)

    async def until(check: Callable[[], bool]) -> bool:
        for _ in range(3000):
            if check():
                return True
            await asyncio.sleep(0.01)
        return False

    async def scenario() -> None:
        first = asyncio.create_task(controller.run())
        assert await until(lambda: len(client.deleted()) == 2)
        first.cancel()  # what a crash or a supervisor restart does to the loop
        await asyncio.gather(first, return_exceptions=True)
        second = asyncio.create_task(controller.run())
        passes = controller.passes
        assert await until(lambda: controller.passes > passes)
        claim = next(o for o in objs if o["metadata"]["name"] == "cc")
        claim["status"]["allocation"]["devices"]["results"][0]["tolerations"][0]["tolerationSeconds"] = 0
        controller.tracker.apply({"type": "MODIFIED", "object": claim})
        assert await until(lambda: "/api/v1/namespaces/ns/pods/c" in client.deleted())
        second.cancel()
        await asyncio.gather(second, return_exceptions=True)

    asyncio.run(scenario())


def test_the_initial_sync_task_ends_as_soon_as_the_sync_is_done() -> None:
    """A priming task asleep until its next recheck would hold kopf's shutdown back (kopf
    waits up to 5 s for such tasks): SIGTERM and every test teardown paid it."""
    from operators.kube.feed import SyncGate

    gate = SyncGate()
    gate.recheck_after = 30.0
    client = listing(Response(200, {"items": [POD_P]}))

    async def scenario() -> float:
        priming = asyncio.create_task(gate.prime(["Pod"], client, {}, delay=lambda attempt: 0.0))
        while not gate.primed.is_set():
            await asyncio.sleep(0)
        await asyncio.sleep(0.05)  # asleep in its recheck wait now
        started = asyncio.get_running_loop().time()
        gate.observe("Pod", POD_P)
        await asyncio.wait_for(priming, 2)
        return asyncio.get_running_loop().time() - started

    assert asyncio.run(scenario()) < 0.5
