"""High availability on the real 1.34 cluster: two `draco run --leader-elect` processes.

Each process runs as a ServiceAccount of its own (a TokenRequest token in its
kubeconfig), so the real API server's audit log says which replica sent every request.
The oracle for "no pod evicted twice" is that log, not draco's own account: every
DELETE of a pod (or Eviction) by either replica is counted, whatever its answer.

"No device allocated twice" across a failover of the allocator (with narrowing): the
leader is killed with claim writes queued and in flight; the oracles are the claims as
a watch saw them throughout (no device ever in two claims, no claim re-allocated), the
final state, and the audit log (no write by the dead replica after the kill, none by
the standby before it took the Lease, one allocation write per claim). Run with enough
devices for every pod, and with fewer: the pods beyond the supply stay gated.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from operators.allocator.pod_claims import GATE
from operators.allocator_controller.claim_writer import FINALIZER
from operators.apiserver.runner import free_port
from operators.apiserver.testing import wait_for
from tests.e2e.backends import ROOT, RealBackend
from tests.e2e.test_eviction import RULES, make_devices, make_pod_with_claim

pytestmark = pytest.mark.real

PODS = 100
FAST_LEASE = ["--leader-elect-lease-duration", "4", "--leader-elect-renew-deadline", "3",
              "--leader-elect-retry-period", "1"]
LEASES = "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"



class Replica:
    """One `python -m operators run` process as its own ServiceAccount."""

    def __init__(self, b: RealBackend, name: str, workdir: Path, extra: list[str],
                 controllers: str = "eviction") -> None:
        self.b = b
        self.name = name
        self.user = f"system:serviceaccount:{b.ns}:{name}"
        self.health = free_port()
        self.log = workdir / f"{name}.log"
        self.binding = f"draco-ha-{b.ns}-{name}"
        b.create(f"/api/v1/namespaces/{b.ns}/serviceaccounts", {
            "apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}})
        b.create("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": self.binding},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": b.ns}]})
        token = b.create(f"/api/v1/namespaces/{b.ns}/serviceaccounts/{name}/token", {
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600}})["status"]["token"]
        kubeconfig = workdir / f"{name}.kubeconfig"
        kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "draco",
            "clusters": [{"name": "c", "cluster": {
                "server": b.url, "certificate-authority": str(b.cluster.dir / "pki" / "ca.crt")}}],
            "users": [{"name": name, "user": {"token": token}}],
            "contexts": [{"name": "draco", "context": {"cluster": "c", "user": name}}]}))
        env = {k: v for k, v in os.environ.items() if not k.startswith("DRACO_")}
        env.update({"KUBECONFIG": str(kubeconfig), "POD_NAME": name, "PYTHONUNBUFFERED": "1"})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "operators", "run", "--controllers", controllers, "--leader-elect",
             "--leader-elect-namespace", b.ns, "--health-port", str(self.health),
             "--health-address", "127.0.0.1", "--log-format", "json", *extra],
            cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=self.log.open("w"), stderr=subprocess.STDOUT)

    def readyz(self) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health}/readyz?verbose", timeout=2) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()
        except OSError as exc:
            return 0, str(exc)

    def logs(self) -> str:
        return self.log.read_text()[-6000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.b.request("DELETE", f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{self.binding}")


@pytest.fixture
def replicas(real: RealBackend, tmp_path: Path) -> Iterator[Any]:
    started: list[Replica] = []

    def start(name: str, extra: list[str], controllers: str = "eviction") -> Replica:
        r = Replica(real, name, tmp_path, extra, controllers)
        started.append(r)
        return r

    yield start
    for r in started:
        r.stop()


def lease(b: RealBackend) -> dict[str, Any]:
    return ((b.get(f"{LEASES.format(ns=b.ns)}/draco") or {}).get("spec")) or {}


def holder(b: RealBackend) -> str:
    return str(lease(b).get("holderIdentity") or "")


def wait_leading(r: Replica, timeout: float = 60) -> None:
    def leading() -> bool:
        assert r.proc.poll() is None, f"{r.name} exited {r.proc.returncode}:\n{r.logs()}"
        code, body = r.readyz()
        return code == 200 and "(leader)" in body
    wait_for(leading, timeout, 0.1, what=f"{r.name} to lead and be ready")


def audit_events(b: RealBackend, users: set[str]) -> list[dict[str, Any]]:
    """The namespace's requests by USERS, one event per request (its last stage logged).

    Not only ResponseComplete: a request whose client died mid-flight may end as Panic,
    and it still happened. The policy omits RequestReceived; a long-running request
    (a watch) also logs ResponseStarted, superseded by its later stage."""
    out: dict[str, dict[str, Any]] = {}
    with b.cluster.audit_log.open() as fh:
        for line in fh:
            if b.ns not in line:
                continue
            event = json.loads(line)
            if event.get("user", {}).get("username") in users and event.get("stage") != "RequestReceived":
                out[event["auditID"]] = event
    return list(out.values())


def evictions(events: list[dict[str, Any]], ns: str) -> list[dict[str, Any]]:
    """DELETEs of pods and Evictions (pods/eviction creates) in the namespace."""
    found = []
    for e in events:
        ref = e.get("objectRef") or {}
        if ref.get("resource") != "pods" or ref.get("namespace") != ns or not ref.get("name"):
            continue
        if (e["verb"] == "delete" and not ref.get("subresource")) or (
                e["verb"] == "create" and ref.get("subresource") == "eviction"):
            found.append(e)
    return found


def stamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def kill(leader: Replica) -> tuple[float, float]:
    """SIGKILL the leader; returns the last renewal the test saw before (the standby must
    wait the lease duration from it, or from a later one) and the wall time just after
    the signal was sent (the process can send nothing after it)."""
    seen_renewal = stamp(lease(leader.b)["renewTime"])
    leader.proc.send_signal(signal.SIGKILL)
    killed = time.time()
    leader.proc.wait(10)
    return seen_renewal, killed


def take_over(b: RealBackend, standby: Replica, seen_renewal: float, killed: float) -> float:
    """Wait for STANDBY to take the Lease: not before the dead leader's lease expired, and
    at most the lease duration plus two jittered retry periods (plus 5 s for a loaded
    machine: a bound on correctness, not a speed check) after the kill: the standby counts the lease duration from when it saw the
    last renewal (up to one retry period late, as client-go does: clocks are never
    compared) and tries again up to one retry period after that expired. Returns the
    acquireTime it wrote."""
    wait_for(lambda: holder(b).startswith(f"{standby.name}_"), 30, 0.05,
             what="the standby to take the Lease")
    took_over = time.time()
    spec = lease(b)
    acquired = stamp(spec["acquireTime"])
    assert spec["leaseTransitions"] == 1 and spec["leaseDurationSeconds"] == 4
    assert acquired - seen_renewal >= 4 - 0.05, "taken before the leader's lease had expired"
    assert took_over - killed <= 4 + 2 * 1 * (1 + 1.2) + 5, f"takeover took {took_over - killed:.1f} s"
    print(f"\ntakeover: Lease taken {took_over - killed:.2f} s after the kill "
          f"(acquireTime {acquired - seen_renewal:.2f} s after the last renewal seen)")
    return acquired


def test_standby_takes_over_mid_eviction_and_no_pod_is_evicted_twice(
        real: RealBackend, replicas: Any) -> None:
    b = real
    make_devices(b, [f"d{i}" for i in range(PODS)])
    for i in range(PODS):
        make_pod_with_claim(b, f"p{i:03d}", f"d{i}")
    # Slow enough that the eviction is still running when the leader dies.
    slow = ["--qps", "15", "--burst", "1", *FAST_LEASE]
    a = replicas("draco-a", slow)
    wait_leading(a)
    bb = replicas("draco-b", slow)
    wait_for(lambda: bb.readyz()[0] == 200, 60, 0.1, what="the standby to answer /readyz")
    code, body = bb.readyz()
    assert "standby" in body and "(leader)" not in body, body  # Ready, but not acting
    assert holder(b).startswith("draco-a_")

    b.create(RULES, {"apiVersion": "resource.draco.dev/v1alpha1", "kind": "DeviceTaintRule",
                     "metadata": {"name": f"ha-{b.ns}"},
                     "spec": {"deviceSelector": {"driver": b.driver},
                              "taint": {"key": "example.com/maintenance", "effect": "NoExecute"}}})
    pods = f"/api/v1/namespaces/{b.ns}/pods"

    def evicted() -> int:
        items = (b.get(pods) or {}).get("items") or []
        return PODS - sum(1 for p in items if not p["metadata"].get("deletionTimestamp"))

    wait_for(lambda: evicted() >= 15, 60, 0.05, what="the leader to evict some pods")
    seen_renewal, killed = kill(a)
    done_at_kill = evicted()
    assert done_at_kill < PODS, "the eviction finished before the kill: lower --qps"
    acquired = take_over(b, bb, seen_renewal, killed)

    wait_for(lambda: not (b.get(pods) or {}).get("items"), 120, 0.2,
             what=f"every pod to be evicted; standby log:\n{bb.logs()}")
    wait_for(lambda: any(c["type"] == "EvictionInProgress" and c["status"] == "False"
                         for c in ((b.get(f"{RULES}/ha-{b.ns}") or {}).get("status") or {}).get("conditions", [])),
             60, 0.2, what="EvictionInProgress=False from the new leader")
    wait_leading(bb, 10)

    # The audit log: one eviction per pod, each answered 200, A's before the kill, B's
    # after it acquired the Lease (never two replicas acting).
    users = {a.user, bb.user}
    found: list[dict[str, Any]] = []

    def all_logged() -> bool:
        found[:] = evictions(audit_events(b, users), b.ns)
        return len({e["objectRef"]["name"] for e in found}) >= PODS
    wait_for(all_logged, 30, 0.5, what="the audit log to show every eviction")
    per_pod = Counter(e["objectRef"]["name"] for e in found)
    twice = {name: n for name, n in per_pod.items() if n > 1}
    assert not twice, f"pods evicted more than once: {twice}"
    assert set(per_pod) == {f"p{i:03d}" for i in range(PODS)}
    assert {e["responseStatus"]["code"] for e in found} == {200}
    by_a = [e for e in found if e["user"]["username"] == a.user]
    by_b = [e for e in found if e["user"]["username"] == bb.user]
    assert by_a and by_b, (len(by_a), len(by_b))
    assert max(stamp(e["requestReceivedTimestamp"]) for e in by_a) <= killed
    assert min(stamp(e["requestReceivedTimestamp"]) for e in by_b) >= acquired
    # Every request of B's that writes happened after it acquired the Lease.
    writes_b = [e for e in audit_events(b, {bb.user})
                if e["verb"] in ("create", "update", "patch", "delete")
                and (e.get("objectRef") or {}).get("resource") != "leases"]
    assert min(stamp(e["requestReceivedTimestamp"]) for e in writes_b) >= acquired

    bb.proc.send_signal(signal.SIGTERM)
    assert bb.proc.wait(20) == 0, bb.logs()


def test_sigterm_stops_promptly_releases_the_lease_and_the_standby_takes_over_at_once(
        real: RealBackend, replicas: Any) -> None:
    b = real
    # Default durations: a standby that had to wait out the lease would need 15 s.
    a = replicas("draco-a", [])
    wait_leading(a)
    standby = replicas("draco-b", [])
    wait_for(lambda: standby.readyz()[0] == 200, 60, 0.1, what="the standby to answer /readyz")
    time.sleep(1)
    assert holder(b).startswith("draco-a_")
    a.proc.send_signal(signal.SIGTERM)
    sent = time.time()
    assert a.proc.wait(20) == 0, a.logs()
    stopped = time.time() - sent
    # kopf, given our stop flag but holding the signal itself, used to wait 5 s for its
    # own flag waiter before giving up on it: every stop took > 5 s
    assert stopped < 4, f"took {stopped:.1f} s to stop"
    lines = [json.loads(line) for line in a.log.read_text().splitlines() if line.startswith("{")]
    assert any(line.get("event") == "released the leader lease" for line in lines), a.logs()
    wait_for(lambda: holder(b).startswith("draco-b_"), 10, 0.05, what="the standby to take the released Lease")
    took = time.time() - sent
    assert took < 15 - 5, f"the standby waited {took:.1f} s: the Lease was not released"
    wait_leading(standby, 30)
    assert lease(b)["leaseTransitions"] == 1


# --------------------------------------------------------------------------- allocation

CLAIMS = 60
HA_CLASS = "ha-gpu"
WRITES = ("create", "update", "patch", "delete", "deletecollection")
# How long after the kill a request the dead leader had sent may still be received: its
# bytes were in the socket before the signal, but the API server reads them when it is
# scheduled (2 cores shared with the whole cluster).
IN_FLIGHT = 0.5


def allocation_fixture(b: RealBackend, devices: int) -> None:
    """DEVICES devices spread over the kwok nodes' ResourceSlices, and CLAIMS gated pods,
    each with a claim of its own for one device."""
    b.create("/apis/resource.k8s.io/v1/deviceclasses", {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": HA_CLASS},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{b.driver}"'}}]}})
    # the cluster's own kwok nodes, however many it was started with (CI's has 2)
    nodes = sorted(n["metadata"]["name"] for n in (b.get("/api/v1/nodes") or {}).get("items") or [])
    assert nodes, "the test cluster has no nodes"
    for n, node in enumerate(nodes):
        names = [f"gpu-{i}" for i in range(devices) if i % len(nodes) == n]
        b.create("/apis/resource.k8s.io/v1/resourceslices", {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{b.ns}-{node}"},
            "spec": {"driver": b.driver, "nodeName": node,
                     "pool": {"name": f"{b.ns}-{node}", "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": d} for d in names]}})


def gated_pods(b: RealBackend) -> None:
    for i in range(CLAIMS):
        b.create(f"/apis/resource.k8s.io/v1/namespaces/{b.ns}/resourceclaims", {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": f"c{i:02d}"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": HA_CLASS}}]}}})
        b.create(f"/api/v1/namespaces/{b.ns}/pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i:02d}"}, "spec": {
                "schedulingGates": [{"name": GATE}],
                "resourceClaims": [{"name": "gpu", "resourceClaimName": f"c{i:02d}"}],
                "containers": [{"name": "c", "image": "registry.invalid/app",
                                "resources": {"claims": [{"name": "gpu"}]}}]}})


def devices_of(claim: dict[str, Any]) -> list[tuple[str, str, str]]:
    allocation = (claim.get("status") or {}).get("allocation") or {}
    return [(r["driver"], r["pool"], r["device"]) for r in (allocation.get("devices") or {}).get("results") or []]


def allocation_node(claim: dict[str, Any]) -> str:
    terms = claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"]
    return str(terms[0]["matchFields"][0]["values"][0])


def writes_in(events: list[dict[str, Any]], ns: str) -> list[dict[str, Any]]:
    """Every write in the namespace: claims, their status, pods, pod status, Events."""
    return [e for e in events if e["verb"] in WRITES and (e.get("objectRef") or {}).get("namespace") == ns]


@pytest.mark.parametrize("devices", [64, 40], ids=["enough-devices", "fewer-devices-than-pods"])
def test_standby_takes_over_mid_allocation_and_no_device_is_allocated_twice(
        real: RealBackend, replicas: Any, devices: int) -> None:
    b = real
    claims_path = f"/apis/resource.k8s.io/v1/namespaces/{b.ns}/resourceclaims"
    pods_path = f"/api/v1/namespaces/{b.ns}/pods"
    served = min(devices, CLAIMS)
    allocation_fixture(b, devices)
    controllers = "allocator,narrowing"
    # The leader is slow (10 requests a second), so it dies with writes queued and in flight.
    a = replicas("draco-a", ["--qps", "10", "--burst", "1", *FAST_LEASE], controllers)
    wait_leading(a)
    bb = replicas("draco-b", FAST_LEASE, controllers)
    wait_for(lambda: bb.readyz()[0] == 200, 60, 0.1, what="the standby to answer /readyz")
    assert holder(b).startswith("draco-a_")

    def claims() -> list[dict[str, Any]]:
        return list((b.get(claims_path) or {}).get("items") or [])

    def allocated() -> list[dict[str, Any]]:
        return [c for c in claims() if devices_of(c)]

    with b.watching(claims_path) as seen:
        started = time.time()
        gated_pods(b)
        wait_for(lambda: len(allocated()) >= 8, 60, 0.05, what=f"the leader to allocate some claims:\n{a.logs()}")
        seen_renewal, killed = kill(a)
        at_kill = len(allocated())
        assert at_kill < served, "the allocation finished before the kill: lower --qps"
        acquired = take_over(b, bb, seen_renewal, killed)

        def finished() -> bool:
            pods = {p["metadata"]["name"]: p for p in (b.get(pods_path) or {}).get("items") or []}
            done = [p for p in pods.values() if not p["spec"].get("schedulingGates")]
            refused = [p for p in pods.values() if any(
                c["type"] == "DracoAllocation" and c["status"] == "False"
                for c in (p.get("status") or {}).get("conditions") or [])]
            return len(done) == served and len(refused) == CLAIMS - served
        wait_for(finished, 30, 0.2, what=f"the standby to finish; its log:\n{bb.logs()}")
        finished_at = time.time()
        wait_leading(bb, 10)
        final = {c["metadata"]["name"]: c for c in claims()}
        last = {(n, c["metadata"]["resourceVersion"]) for n, c in final.items() if devices_of(c)}
        wait_for(lambda: last <= {(e["object"]["metadata"]["name"], e["object"]["metadata"]["resourceVersion"])
                                  for e in list(seen)}, 30, 0.05,
                 what="the watch to deliver every allocated claim's last update")

    # 1. No device in two claims, neither at the end nor at any moment the watch saw; no
    #    claim ever re-allocated or deallocated.
    owner: dict[tuple[str, str, str], str] = {}
    first: dict[str, list[tuple[str, str, str]]] = {}
    for event in seen:
        claim = event["object"]
        name = claim["metadata"]["name"]
        got = devices_of(claim)
        if name in first:
            assert got == first[name], f"{name} re-allocated or deallocated: {first[name]} then {got}"
        elif got:
            first[name] = got
        for device in got:
            assert owner.setdefault(device, name) == name, f"{device} allocated to {owner[device]} and {name}"
    taken = [d for c in final.values() for d in devices_of(c)]
    assert len(taken) == len(set(taken)) == served, sorted(taken)
    assert {n for n, c in final.items() if devices_of(c)} == set(first)

    # 2. What upstream's readers rely on: reserved for its pod, and every pod that lost
    #    its gate narrowed to its claim's node; the pods beyond the supply still gated,
    #    told why, and their claims untouched by any allocation.
    pods = {p["metadata"]["name"]: p for p in (b.get(pods_path) or {}).get("items") or []}
    for i in range(CLAIMS):
        claim, pod = final[f"c{i:02d}"], pods[f"p{i:02d}"]
        if devices_of(claim):
            assert [r["uid"] for r in claim["status"]["reservedFor"]] == [pod["metadata"]["uid"]]
            assert not pod["spec"].get("schedulingGates"), pod["metadata"]["name"]
            terms = pod["spec"]["affinity"]["nodeAffinity"][
                "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                               "values": [allocation_node(claim)]}]}]
        else:
            assert [g["name"] for g in pod["spec"]["schedulingGates"]] == [GATE]
            assert not (claim.get("status") or {}).get("reservedFor")

    # 3. The audit log (requestReceivedTimestamp: when the API server took the request,
    #    whatever its answer or whether the client lived to read it): every write by the
    #    killed replica was received before the kill
    #    (plus IN_FLIGHT for bytes already sent), every write by the standby after it
    #    acquired the Lease, and each allocated claim got exactly one successful status
    #    write (its allocation), by one of the two.
    events = audit_events(b, {a.user, bb.user})
    writes = writes_in(events, b.ns)
    by_a = [e for e in writes if e["user"]["username"] == a.user]
    by_b = [e for e in writes if e["user"]["username"] == bb.user]
    last_a = max(stamp(e["requestReceivedTimestamp"]) for e in by_a)
    assert last_a <= killed + IN_FLIGHT, f"the killed replica wrote {last_a - killed:.3f} s after the kill"
    assert last_a < acquired
    assert min(stamp(e["requestReceivedTimestamp"]) for e in by_b) >= acquired
    status_ok = [e for e in writes if (e.get("objectRef") or {}).get("subresource") == "status"
                 and e["objectRef"]["resource"] == "resourceclaims"
                 and 200 <= (e.get("responseStatus") or {}).get("code", 0) < 300]
    per_claim = Counter(e["objectRef"]["name"] for e in status_ok)
    assert per_claim == Counter({n: 1 for n in first}), per_claim

    # 4. The delete-protection finalizer only on allocated claims, except where a writer
    #    died between its two writes: kube-scheduler 1.34 also adds the finalizer with
    #    one update and the allocation with a second (continuing when it finds the
    #    finalizer already there), and the resource-claim controller removes it from an
    #    unallocated claim only once the claim is deleted. Only the killed replica may
    #    leave that state behind.
    finalized_by_a = {e["objectRef"]["name"] for e in by_a if e["objectRef"]["resource"] == "resourceclaims"
                      and not e["objectRef"].get("subresource") and e["verb"] in ("update", "patch")}
    bare = {n for n, c in final.items() if FINALIZER in (c["metadata"].get("finalizers") or [])
            and not devices_of(c)}
    assert bare <= finalized_by_a, f"finalizer without allocation not left by the killed replica: {bare}"
    assert all(FINALIZER in c["metadata"]["finalizers"] for c in final.values() if devices_of(c))

    allocated_by = Counter("a" if e["user"]["username"] == a.user else "b" for e in status_ok)
    # Claims the leader had finalized but not yet allocated when it died: the standby
    # found them half-written and finished them (or, beyond the supply, left them so).
    interrupted = finalized_by_a - {e["objectRef"]["name"] for e in status_ok if e["user"]["username"] == a.user}
    print(f"devices {devices}, claims {CLAIMS}: allocated {served} "
          f"(draco-a {allocated_by['a']} before the kill, draco-b {allocated_by['b']}); "
          f"{at_kill} seen allocated at the kill, {killed - started:.1f} s after the pods; "
          f"killed replica's last write {last_a - killed:+.3f} s from the kill; "
          f"standby finished {finished_at - killed:.1f} s after the kill; "
          f"left half-written by the kill: {len(interrupted)}, finalizer without allocation at the end: {len(bare)}")
    bb.proc.send_signal(signal.SIGTERM)
    assert bb.proc.wait(20) == 0, bb.logs()
