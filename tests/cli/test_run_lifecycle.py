"""`draco run`'s life with --leader-elect, in process against the embedded API server:
a stop releases the Lease, a lost Lease stops the controllers at once (exit 1), and a
standby runs nothing while another replica's Lease is valid."""

from __future__ import annotations

import argparse
import asyncio
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from operators.apiserver.testing import EmbeddedCluster, wait_for
from operators.cli.lifecycle import Process, operate
from operators.cli.run import build
from operators.kube.feed import SyncGate
from operators.kube.leader import micro_time
from operators.kube.supervision import default_supervisor
from tests.apiserver.http import call

NS = "default"
LEASE = ("coordination.k8s.io", "v1", "leases", "draco")


def args(**over: Any) -> argparse.Namespace:
    base = dict(qps=200.0, burst=400, gate_webhook_port=0, health_port=0, health_address="127.0.0.1",
                leader_elect=True, leader_elect_namespace=NS, leader_elect_name="draco",
                leader_elect_identity="me", leader_elect_lease_duration=2,
                leader_elect_renew_deadline=1.5, leader_elect_retry_period=0.25)
    base.update(over)
    return argparse.Namespace(**base)


class Running:
    """`operate()` on its own loop in a thread (no signal handlers in a test process)."""

    def __init__(self, a: argparse.Namespace, on_lost: Callable[[], None] = lambda: None) -> None:
        self.process = Process(["patches"], SyncGate(), default_supervisor())
        self.registry, _, _ = build(["patches"], SimpleNamespace(**vars(a)), gate=self.process.gate)
        self.loop = asyncio.new_event_loop()
        self.stop = asyncio.Event()
        self.code: int | None = None
        self.lost = threading.Event()

        def lost() -> None:
            self.lost.set()
            on_lost()

        def main() -> None:
            asyncio.set_event_loop(self.loop)
            self.code = self.loop.run_until_complete(
                operate(self.registry, self.process, a, stop=self.stop, on_lost=lost))

        self.thread = threading.Thread(target=main, daemon=True)
        self.thread.start()

    def request_stop(self) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)

    def join(self, timeout: float = 20) -> int | None:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "operate() did not return"
        return self.code


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[EmbeddedCluster]:
    c = EmbeddedCluster(tmp_path)
    monkeypatch.setenv("KUBECONFIG", str(c.kubeconfig))
    try:
        yield c
    finally:
        c.thread.stop()


def spec(c: EmbeddedCluster) -> dict[str, Any]:
    return dict(((c.get(*LEASE[:3], LEASE[3], namespace=NS) or {}).get("spec")) or {})


def test_stop_releases_the_lease_after_the_controllers_stopped(cluster: EmbeddedCluster) -> None:
    run = Running(args())
    wait_for(lambda: spec(cluster).get("holderIdentity") == "me", 10, what="the Lease to be taken")
    wait_for(lambda: run.process.kopf_ready.is_set() and run.process.gate.done.is_set(), 20,
             what="kopf to start and sync")
    assert run.process.supervisor.readiness(["patches"]) == (True, "")
    run.request_stop()
    assert run.join() == 0
    released = spec(cluster)
    assert (released["holderIdentity"], released["leaseDurationSeconds"]) == ("", 1)
    assert run.process.operator is not None and run.process.operator.done()
    assert run.process.supervisor.readiness(["patches"])[0] is False  # its loop was stopped


def test_a_lost_lease_stops_the_controllers_and_exits_1(cluster: EmbeddedCluster) -> None:
    run = Running(args())
    wait_for(lambda: run.process.kopf_ready.is_set(), 20, what="kopf to start")
    # Someone else writes the Lease (by hand, or a replica that saw it expire): the
    # leader must stop at its next renewal, without waiting out the renew deadline.
    url = f"{cluster.url}/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/draco"
    code, current = call(url)
    assert code == 200
    current["spec"]["holderIdentity"] = "usurper"
    code, body = call(url, "PUT", current)
    assert code == 200, body
    assert run.join() == 1
    assert run.lost.is_set()
    assert run.process.operator is not None and run.process.operator.done()
    assert spec(cluster)["holderIdentity"] == "usurper"  # not released: it was not ours


def test_a_standby_runs_nothing_while_the_leaders_lease_is_valid(cluster: EmbeddedCluster) -> None:
    now = micro_time(datetime.now(UTC))
    cluster.inject("coordination.k8s.io", "v1", "leases", {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "draco", "namespace": NS},
        "spec": {"holderIdentity": "leader", "leaseDurationSeconds": 30, "acquireTime": now,
                 "renewTime": now, "leaseTransitions": 3}}, namespace=NS)
    run = Running(args())
    wait_for(lambda: run.process.elector is not None and run.process.elector.leader() == "leader", 10,
             what="the standby to see the leader")
    assert run.process.leadership() == (True, "standby; leader leader")
    assert run.process.operator is None and not run.process.elector.leading
    run.request_stop()
    assert run.join() == 0
    assert spec(cluster)["holderIdentity"] == "leader"
    assert spec(cluster)["leaseTransitions"] == 3
