"""Hostile objects through the real 1.37 API server, with `draco run` (every controller)
running: a seeded stream of Gangs, DeviceHealthPolicies, DeviceTaintRules,
ResourceSlicePatches (and upstream's PodGroups where the server serves them) with odd
and extreme values, created and updated.

Each object ends as its row in tests/hostile/cases.py says: refused by the server with a
message naming the field, or accepted and then reported by draco on the object
(condition, Event, or the status' problems), or served like any other. Meanwhile the
rest of the work goes on: well-formed canaries created after the hostile batch get
their condition, their status and their devices; draco neither exits nor logs a
traceback. The run prints its seed and a table of how each kind's objects ended.

    DRACO_HOSTILE_SEED=N        replay a run
    DRACO_HOSTILE_COUNT=N       more objects (default 100; 500 tries every row)
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from operators.allocator.pod_claims import GATE
from operators.apiserver.runner import free_port
from operators.apiserver.testing import wait_for
from tests.e2e.backends import ROOT, RealBackend, quoted
from tests.hostile.cases import KINDS, Ctx, KindSpec
from tests.hostile.generate import Case, generate, settings

pytestmark = pytest.mark.real

SLICES = "/apis/resource.k8s.io/v1/resourceslices"
CLASSES = "/apis/resource.k8s.io/v1/deviceclasses"
PODGROUPS = "/apis/scheduling.k8s.io/v1beta1/podgroups"
DEVICES = ("dev-0", "dev-1", "dev-2", "dev-3")
SETTLE_S = 40.0  # after the batch, how long accepted objects may take to get their report


class Draco:
    """`python -m operators run` with every controller (preemption too), leading in the
    test's namespace, its JSON log captured."""

    def __init__(self, b: RealBackend, workdir: Path) -> None:
        self.health = free_port()
        self.log = workdir / "draco.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("DRACO_")}
        env.update({"KUBECONFIG": str(b.kubeconfig), "POD_NAME": "draco-hostile", "PYTHONUNBUFFERED": "1"})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "operators", "run", "--leader-elect", "--leader-elect-namespace", b.ns,
             "--preemption", "--health-port", str(self.health), "--health-address", "127.0.0.1",
             "--log-format", "json"],
            cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=self.log.open("w"), stderr=subprocess.STDOUT)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def alive(self) -> None:
        assert self.proc.poll() is None, f"draco run exited {self.proc.returncode}:\n{self.text()[-6000:]}"

    def wait_leading(self, timeout: float = 60) -> None:
        def leading() -> bool:
            self.alive()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.health}/readyz?verbose", timeout=2) as r:
                    return r.status == 200 and "(leader)" in r.read().decode()
            except OSError:
                return False
        wait_for(leading, timeout, 0.1, what="draco run to lead and be ready")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@pytest.fixture
def draco(real_137: RealBackend, tmp_path: Path) -> Iterator[Draco]:
    process = Draco(real_137, tmp_path)
    try:
        yield process
    finally:
        process.stop()


# -- the world the hostile objects point at ---------------------------------------------


def world(b: RealBackend) -> Ctx:
    """A class and a slice of the test's driver (one device carries the slice taint the
    health policies watch), and the same for the canaries' own driver."""
    ctx = Ctx(b.id, b.ns, b.driver, b.domain, DEVICES, f"{b.domain}/bad")
    for driver, devices in ((b.driver, DEVICES), (b.driver_for("canary"), ("c0",))):
        b.create(CLASSES, {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                           "metadata": {"name": f"hx-{driver.split('.')[0]}-{b.id}"},
                           "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}})
        b.create(SLICES, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                          "metadata": {"name": f"{b.ns}-{driver.split('.')[0]}"},
                          "spec": {"driver": driver, "nodeName": b.node,
                                   "pool": {"name": f"{b.ns}-pool", "generation": 1, "resourceSliceCount": 1},
                                   "devices": [{"name": d, "attributes": {f"{b.domain}/index": {"int": i}},
                                                **({"taints": [{"key": ctx.signal_key, "value": "x",
                                                                "effect": "NoSchedule"}]} if d == "dev-1" else {})}
                                               for i, d in enumerate(devices)]}})
    return ctx


def gated_pod(b: RealBackend, name: str, device_class: str, *, labels: dict[str, str] | None = None,
              spec: dict[str, Any] | None = None) -> None:
    b.create(f"/apis/resource.k8s.io/v1/namespaces/{b.ns}/resourceclaims", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": f"{name}-gpu"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}]}}})
    b.create(f"/api/v1/namespaces/{b.ns}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}},
        "spec": {"schedulingGates": [{"name": GATE}], **(spec or {}),
                 "resourceClaims": [{"name": "gpu", "resourceClaimName": f"{name}-gpu"}],
                 "containers": [{"name": "c", "image": "registry.invalid/app",
                                 "resources": {"claims": [{"name": "gpu"}]}}],
                 "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}]}})


# -- sending a case --------------------------------------------------------------------


@dataclass
class Sent:
    case: Case
    code: int = 0
    message: str = ""
    stored: dict[str, Any] = field(default_factory=dict)  # the object as accepted
    outcome: str = ""  # refused | reported | handled | silent
    detail: str = ""

    @property
    def accepted(self) -> bool:
        return self.code in (200, 201)


def _message(body: Any) -> str:
    return str(body.get("message") if isinstance(body, dict) else body)


def send(b: RealBackend, spec: KindSpec, case: Case) -> Sent:
    collection = spec.collection(b.ns)
    query = "?fieldValidation=Strict" if case.strict else ""
    out = Sent(case)
    if case.op == "update":
        code, body = b.request("POST", collection, case.base)
        assert code == 201, f"{case.describe()}: the well-formed object it updates was refused: {_message(body)}"
        path = f"{collection}/{quoted(case.name)}"
        for _ in range(10):  # as a user's client does: draco may have written it meanwhile
            hostile = json.loads(json.dumps(case.body))
            hostile["metadata"]["resourceVersion"] = body["metadata"]["resourceVersion"]
            code, answer = b.request("PUT", f"{path}{query}", hostile)
            if code != 409:
                break
            body = b.get(path) or body
        body = answer
    else:
        code, body = b.request("POST", f"{collection}{query}", case.body)
    out.code = code
    if code in (200, 201):
        out.stored = dict(body)
    else:
        out.message = _message(body)
    return out


def add_member(b: RealBackend, sent: Sent, device_class: str) -> None:
    """One gated member for an accepted group (fewer than its minCount)."""
    name = f"hx-{b.id}-m{sent.case.seq}"
    if sent.case.kind == "Gang":
        gated_pod(b, name, device_class, labels={"resource.draco.dev/gang": sent.case.name})
    else:
        gated_pod(b, name, device_class, spec={"schedulingGroup": {"podGroupName": sent.case.name}})


# -- how an accepted object ended ------------------------------------------------------


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == kind:
            return dict(c)
    return None


def _events(b: RealBackend, sent: Sent) -> list[dict[str, Any]]:
    namespace = b.ns if KINDS[sent.case.kind].namespaced else "default"
    return [e for e in b.events(namespace)
            if (e.get("involvedObject") or {}).get("name") == sent.case.name
            and (e.get("involvedObject") or {}).get("kind") == sent.case.kind]


def judge(b: RealBackend, sent: Sent) -> tuple[str, str] | None:
    """("reported", reason) or ("handled", what), or None while draco has not said."""
    case = sent.case
    path = f"{KINDS[case.kind].collection(b.ns)}/{quoted(case.name)}"
    obj = b.get(path)
    if obj is None:
        return None
    generation = obj["metadata"].get("generation")
    if case.kind == "DeviceTaintRule":
        cond = _condition(obj, "EvictionInProgress")
        if cond and cond.get("observedGeneration") == generation:
            return "handled", f"EvictionInProgress={cond['status']} {cond['reason']}"
        return None
    if case.kind == "ResourceSlicePatch":
        cond = _condition(obj, "Faulty")
        if not cond or cond.get("observedGeneration") != generation:
            return None
        if cond["status"] == "True":
            return "reported", cond["reason"]
        return "handled", f"Faulty=False, {obj['status'].get('matchedDevices')} devices"
    if case.kind == "DeviceHealthPolicy":
        status = obj.get("status") or {}
        cond = _condition(obj, "Throttled")
        if cond and cond.get("reason") == "InvalidPolicy":
            events = [e["reason"] for e in _events(b, sent)]
            return "reported", "InvalidPolicy" + (" (Event)" if "InvalidPolicy" in events else "")
        if status.get("observedGeneration") != generation:
            return None
        problems = status.get("problems") or []
        if problems:
            events = [e["reason"] for e in _events(b, sent)]
            return "reported", str(problems[0]) + (" (Event SignalProblem)" if "SignalProblem" in events else "")
        return "handled", f"Throttled={cond['status'] if cond else '?'}, {status.get('selected')} selected"
    if case.kind == "Gang":
        cond = _condition(obj, "Allocated")
        if not cond or cond.get("observedGeneration") != generation:
            return None
        return ("handled" if cond["status"] == "True" else "reported"), cond["reason"]
    # a PodGroup: its status is upstream's; draco reports on its member, a gated pod,
    # with its DracoAllocation condition (and an Event)
    member = b.get(f"/api/v1/namespaces/{b.ns}/pods/hx-{b.id}-m{case.seq}") or {}
    cond = _condition(member, "DracoAllocation")
    if cond is None:
        return None
    if cond["reason"] == "GangNotFound":  # the pod came before its group reached draco: not yet
        sent.detail = f"stuck at {cond['reason']}: {cond.get('message')}"
        return None
    return "reported", cond["reason"]


def matches(sent: Sent) -> bool:
    exp = sent.case.expect
    if exp.outcome == "refused":
        return sent.outcome == "refused" and exp.field in sent.message
    if sent.outcome != exp.outcome:
        return False
    return exp.outcome == "handled" or any(r in sent.detail for r in exp.reasons)


def table(results: list[Sent], seed: int, count: int) -> str:
    kinds = sorted({s.case.kind for s in results})
    cols = ("refused", "reported", "handled", "silent", "unexpected")
    rows = [f"hostile objects, seed {seed}, count {count} "
            f"(replay: DRACO_HOSTILE_SEED={seed} DRACO_HOSTILE_COUNT={count})",
            f"{'kind':<20}{'tried':>7}{'create':>8}{'update':>8}" + "".join(f"{c:>12}" for c in cols)]
    for kind in kinds:
        mine = [s for s in results if s.case.kind == kind]
        ends = Counter(s.outcome for s in mine)
        ops = Counter(s.case.op for s in mine)
        bad = sum(1 for s in mine if not matches(s))
        rows.append(f"{kind:<20}{len(mine):>7}{ops['create']:>8}{ops['update']:>8}"
                    + "".join(f"{ends[c]:>12}" for c in cols[:-1]) + f"{bad:>12}")
    return "\n".join(rows)


def log_findings(text: str) -> tuple[list[str], list[str]]:
    """(lines carrying an exception with its traceback, other error lines) of draco's log:
    JSON lines with `exc_info` or `exception` (how structlog and kopf log one), and any
    raw `Traceback` an uncaught one prints."""
    tracebacks, errors = [], []
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            if "Traceback" in line:
                tracebacks.append(line)
            continue
        if not isinstance(entry, dict):
            continue
        if "exc_info" in entry or "exception" in entry or "Traceback" in line:
            tracebacks.append(line)
        elif entry.get("level") in ("error", "critical"):
            errors.append(line)
    return tracebacks, errors


def served_kinds(b: RealBackend) -> list[str]:
    kinds = ["DeviceTaintRule", "ResourceSlicePatch", "DeviceHealthPolicy", "Gang"]
    if b.cluster.served((PODGROUPS,)):
        kinds.append("PodGroup")
    return kinds


@pytest.mark.timeout(600)
def test_hostile_objects_are_refused_or_reported_and_the_rest_goes_on(
        real_137: RealBackend, draco: Draco, capsys: pytest.CaptureFixture[str]) -> None:
    b = real_137
    seed, count = settings()
    kinds = served_kinds(b)
    served = f"kinds: {', '.join(kinds)}" + (
        "" if "PodGroup" in kinds else " (PodGroup left out: this server does not serve scheduling.k8s.io/v1beta1)")
    ctx = world(b)
    hostile_class = f"hx-gpu-{b.id}"
    canary_driver = b.driver_for("canary")
    draco.wait_leading()
    results: list[Sent] = []
    started = time.monotonic()
    for case in generate(seed, count, ctx, kinds):
        sent = send(b, KINDS[case.kind], case)
        if not sent.accepted:
            sent.outcome, sent.detail = "refused", sent.message
        results.append(sent)
    sent_s = time.monotonic() - started
    # then the groups' members: one each, fewer than any minCount. Only after a pause, so
    # that draco has seen each group's last write before its member: a member arriving in
    # the same instant gets two decisions written concurrently by draco, and the older can
    # land last (a Gang's status one generation behind, a PodGroup member's condition left
    # at GangNotFound; see the report of issue 45)
    time.sleep(1.0)
    for sent in results:
        if sent.accepted and sent.case.kind in ("Gang", "PodGroup"):
            add_member(b, sent, hostile_class)

    # the canaries: well-formed objects after the hostile batch, of a driver of their own
    canary = f"hx-{b.id}-canary"
    b.create(f"/apis/{KINDS['DeviceTaintRule'].api}/devicetaintrules", {
        "apiVersion": KINDS["DeviceTaintRule"].api, "kind": "DeviceTaintRule", "metadata": {"name": canary},
        "spec": {"deviceSelector": {"driver": canary_driver, "device": "c0"},
                 "taint": {"key": f"{b.domain}/canary", "effect": "None"}}})
    b.create(f"/apis/{KINDS['ResourceSlicePatch'].api}/resourceslicepatches", {
        "apiVersion": KINDS["ResourceSlicePatch"].api, "kind": "ResourceSlicePatch", "metadata": {"name": canary},
        "spec": {"devices": {"filter": {"driver": canary_driver},
                             "attributes": {f"{b.domain}/canary": {"bool": True}}}}})
    b.create(f"/apis/{KINDS['DeviceHealthPolicy'].api}/devicehealthpolicies", {
        "apiVersion": KINDS["DeviceHealthPolicy"].api, "kind": "DeviceHealthPolicy", "metadata": {"name": canary},
        "spec": {"deviceSelector": {"driver": canary_driver}, "signals": [{"sliceTaint": {"key": ctx.signal_key}}],
                 "taint": {"key": f"{b.domain}/unhealthy", "effect": "None"}}})
    gated_pod(b, canary, f"hx-canary-{b.id}")

    # every accepted object ends with draco's word on it
    pending = [s for s in results if s.accepted]
    deadline = time.monotonic() + SETTLE_S
    while pending and time.monotonic() < deadline:
        draco.alive()
        for s in list(pending):
            verdict = judge(b, s)
            if verdict is not None:
                s.outcome, s.detail = verdict
                pending.remove(s)
        if pending:
            time.sleep(0.5)
    for s in pending:
        s.outcome, s.detail = "silent", s.detail or "draco wrote nothing about it"

    def canary_claim() -> list[Any]:
        claim = b.get(f"/apis/resource.k8s.io/v1/namespaces/{b.ns}/resourceclaims/{canary}-gpu") or {}
        return list(((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or [])

    wait_for(canary_claim, 30, what="the canary pod's claim allocated")
    wait_for(lambda: not (b.get(f"/api/v1/namespaces/{b.ns}/pods/{canary}") or {})["spec"].get("schedulingGates"),
             30, what="the canary pod ungated")
    wait_for(lambda: _condition(b.get(f"/apis/{KINDS['DeviceTaintRule'].api}/devicetaintrules/{canary}") or {},
                                "EvictionInProgress"), 30, what="the canary rule's EvictionInProgress condition")
    wait_for(lambda: (_condition(b.get(f"/apis/{KINDS['ResourceSlicePatch'].api}/resourceslicepatches/{canary}")
                                 or {}, "Faulty") or {}).get("status") == "False",
             30, what="the canary patch's Faulty=False")
    wait_for(lambda: ((b.get(f"/apis/{KINDS['DeviceHealthPolicy'].api}/devicehealthpolicies/{canary}") or {})
                      .get("status") or {}).get("selected") == 1, 30, what="the canary policy's status")
    total_s = time.monotonic() - started

    summary = table(results, seed, count)
    with capsys.disabled():
        print(f"\n{summary}\n{served}\n(sent in {sent_s:.1f} s, settled with canaries served in {total_s:.1f} s)")
    draco.alive()
    tracebacks, errors = log_findings(draco.text())
    if errors:
        print(f"draco logged {len(errors)} error line(s), e.g. {errors[0][:500]}")
    assert not tracebacks, f"draco logged {len(tracebacks)} exception(s) with a traceback, e.g.:\n" + \
        "\n".join(t[:1500] for t in tracebacks[:3])
    wrong = [f"{s.case.describe()}: expected {s.case.expect.outcome} "
             f"{s.case.expect.field or ','.join(s.case.expect.reasons)}, got {s.outcome}: {s.detail[:300]}"
             for s in results if not matches(s)]
    assert not wrong, f"{len(wrong)} of {len(results)} hostile objects ended otherwise than their row says " \
                      f"(seed {seed}):\n" + "\n".join(wrong) + f"\n\n{summary}\n{served}"
