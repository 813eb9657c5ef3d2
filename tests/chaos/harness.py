"""The chaos run on a real cluster: two `draco run --leader-elect` replicas with every
controller (preemption too), the seeded stream of `workload.plan`, the leader SIGKILLed
at its planned moments (the killed replica restarted at once, a new candidate) and the
kube-apiserver restarted once; the invariants of `invariants` checked from the API
while it runs and on the settled end. `run()` returns a `Report`; its `violations` are
empty on a pass.

Threads: the driver (this one) plays the plan; `_watch_claims` follows every claim
change; `_observe` lists pods, claims, gangs and fences, reads the Lease and scrapes both
replicas' metrics about twice a second; `_supervise` polls readiness, restarts a replica
that exited on its own (a leader that cannot renew exits 1, as documented) and times
the recoveries.
"""

from __future__ import annotations

import json
import random
import threading
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.chaos import invariants as inv
from tests.chaos import workload as wl
from tests.chaos.processes import LEASE_S, RETRY_S, Replica, leader_value, restart_apiserver
from tests.e2e.backends import Backend

FENCES = "/apis/resource.k8s.io/v1/devicetaintrules"
DRACO_RULES = wl.RULES
# How long a half-written gang or a stale nomination may last: one failover (the lease,
# two jittered retries) plus the new leader's initial sync and first pass, with room for
# a loaded 2-core machine. The API server's own outage is not counted.
FAILOVER_S = LEASE_S + 2 * RETRY_S * 2.2
SLACK_S = 20.0


@dataclass
class Report:
    seed: int
    violations: list[str] = field(default_factory=list)
    created: Counter[str] = field(default_factory=Counter)
    kills: int = 0
    apiserver_restarts: int = 0
    recoveries: list[float] = field(default_factory=list)  # kill -> a new leader ready, seconds
    apiserver_recoveries: list[float] = field(default_factory=list)  # back up -> a leader ready
    outages: list[tuple[float, float]] = field(default_factory=list)  # the API server down, up
    self_exits: list[str] = field(default_factory=list)
    leader_changes: int = 0
    decisions: Counter[str] = field(default_factory=Counter)
    final: Counter[str] = field(default_factory=Counter)
    longest_half_gang: float = 0.0
    longest_stale_nomination: float = 0.0
    tracebacks: int = 0
    seconds: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)  # wall seconds of each part
    timeline: list[str] = field(default_factory=list)  # kills, restarts, leaders, exits

    def summary(self) -> str:
        rec = self.recoveries
        return json.dumps({
            "seed": self.seed, "seconds": round(self.seconds, 1), "kills": self.kills,
            "apiserver_restarts": self.apiserver_restarts, "recoveries": len(rec),
            "recover_p50_s": round(inv.percentile(rec, 50), 2) if rec else None,
            "recover_p99_s": round(inv.percentile(rec, 99), 2) if rec else None,
            "apiserver_recover_s": [round(x, 1) for x in self.apiserver_recoveries],
            "apiserver_down_s": [round(b - a, 1) for a, b in self.outages],
            "leader_changes": self.leader_changes, "self_exits": len(self.self_exits),
            "decisions": dict(self.decisions), "created": dict(self.created), "final": dict(self.final),
            "longest_half_gang_s": round(self.longest_half_gang, 1),
            "longest_stale_nomination_s": round(self.longest_stale_nomination, 1),
            "tracebacks": self.tracebacks, "violations": len(self.violations),
            "phases_s": {k: round(v, 1) for k, v in self.phases.items()}}, sort_keys=True)


class Chaos:
    def __init__(self, b: Backend, cluster_dir: Path, workdir: Path, seed: int, size: wl.Size,
                 settle: float = 60.0) -> None:
        self.b = b
        self.cluster_dir = cluster_dir
        self.workdir = workdir
        self.size = size
        self.settle = settle
        nodes = tuple(sorted(n["metadata"]["name"] for n in (b.get("/api/v1/nodes") or {}).get("items") or []
                             if (n["metadata"].get("labels") or {}).get("type") == "kwok"))
        assert nodes, "the cluster has no kwok nodes"
        self.world = wl.World(ns=b.ns, driver=b.driver, nodes=nodes)
        self.plan = wl.plan(seed, size, self.world)
        self.rng = random.Random(seed + 1)
        self.report = Report(seed)
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.t0 = time.monotonic()
        self.ledger = inv.ClaimLedger()
        self.half_gangs = inv.Persistence()
        self.stale = inv.Persistence()
        self.outages: list[tuple[float, float]] = []
        self.holders: list[str] = []
        self.scrapes: list[tuple[float, str, float]] = []
        self.rounds: list[tuple[float, dict[str, float]]] = []
        self.leader: str = ""  # the life ready as leader, as the supervisor last saw it
        self.pending_kill: tuple[float, str] | None = None
        self.pending_outage: float | None = None
        self.signals: dict[str, dict[str, str]] = {n: {} for n in nodes}
        self.replicas: list[Replica] = []

    def now(self) -> float:
        return time.monotonic() - self.t0

    def violation(self, message: str) -> None:
        with self.lock:
            if message not in self.report.violations:
                self.report.violations.append(message)

    # ------------------------------------------------------------------ the run

    def run(self) -> Report:
        began = time.monotonic()
        for path, obj in wl.setup_objects(self.world):
            self.post(path, obj)
        self.replicas = [Replica(self.b, name, self.workdir, []) for name in ("draco-a", "draco-b")]
        threads = [threading.Thread(target=f, daemon=True, name=f.__name__)
                   for f in (self._watch_claims, self._observe, self._supervise)]
        try:
            for r in self.replicas:
                r.start()
            self.t0 = time.monotonic()
            for t in threads:
                t.start()
            self.wait(lambda: bool(self.leader), 90, "a first leader")
            self.t0 = time.monotonic()
            phases = self.report.phases
            phases["start"] = self.t0 - began
            for action in self.plan:
                delay = action.at - self.now()
                if delay > 0:
                    time.sleep(delay)
                self.act(action)
            phases["stream"] = self.now()
            self.settle_down()
            phases["settle"] = self.now() - phases["stream"]
            self.stop.set()
            self.final_checks()
            phases["checks"] = self.now() - phases["stream"] - phases["settle"]
        finally:
            self.stop.set()
            self.report.seconds = self.now()
            for t in threads:
                t.join(10)
            for r in self.replicas:
                r.stop()
                self.report.tracebacks += sum(
                    (self.workdir / f"{r.name}-{life}.log").read_text(errors="replace").count("Traceback")
                    for life in range(1, r.lives + 1) if (self.workdir / f"{r.name}-{life}.log").exists())
            for value in wl.PRIORITIES:
                self.b.request("DELETE", f"{wl.PRIORITY_CLASSES}/{self.world.priority_class(value)}")
        return self.report

    def wait(self, check: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                tails = "\n".join(f"--- {r.life}\n{r.tail()}" for r in self.replicas)
                raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}\n{tails}")
            time.sleep(0.1)

    # ------------------------------------------------------------------ API writes

    def send(self, method: str, path: str, body: Any = None, ok: tuple[int, ...] = (200, 201),
             content_type: str = "application/json") -> Any:
        """A write that survives a moment of API outage (retried for 30 s); OK codes
        include 409/404 where a retried request may already have done its work."""
        deadline = time.monotonic() + 30
        while True:
            try:
                code, answer = self.b.request(method, path, body, content_type)
            except Exception as exc:  # noqa: BLE001 - connection refused, reset, cut short
                code, answer = 0, str(exc)
            if code in ok:
                return answer
            if code not in (0, 429, 500, 503, 504) or time.monotonic() > deadline:
                raise AssertionError(f"{method} {path} answered {code}: {answer}")
            time.sleep(0.5)

    def post(self, path: str, obj: dict[str, Any]) -> None:
        self.send("POST", path, obj, ok=(201, 409))
        self.report.created[obj["kind"]] += 1

    def act(self, action: wl.Action) -> None:
        w = self.world
        if action.kind == "gang":
            for path, obj in wl.gang_objects(w, action):
                self.post(path, obj)
        elif action.kind == "single":
            for path, obj in wl.pod_objects(w, action.name, action.params["count"], action.params["priority"]):
                self.post(path, obj)
        elif action.kind == "rule":
            self.post(DRACO_RULES, wl.rule_object(w, action))
        elif action.kind == "unrule":
            self.send("DELETE", f"{DRACO_RULES}/{w.ns}-{action.name}", ok=(200, 202, 404))
        elif action.kind in ("signal", "recover"):
            node, device = action.params["node"], action.params["device"]
            if action.kind == "signal":
                self.signals[node][device] = "79"
                self.report.created["HealthSignal"] += 1
            else:
                self.signals[node].pop(device, None)
            spec = wl.slice_object(w, node, self.signals[node])["spec"]
            self.send("PATCH", f"{wl.SLICES}/{w.pool(node)}", {"spec": {"devices": spec["devices"]}},
                      ok=(200,), content_type="application/merge-patch+json")
        elif action.kind == "finish":
            self.finish(int(action.params["units"]))
        elif action.kind == "kill":
            self.kill()
        elif action.kind == "apiserver":
            self.restart_apiserver()

    def finish(self, units: int) -> None:
        """Jobs that end: UNITS placed single pods or whole placed gangs are deleted, with
        their claims, so that waiting work gets room."""
        try:
            pods = self.items(self.world.pods())
            claims = inv.by_name(self.items(self.world.claims()))
        except Exception:  # noqa: BLE001 - a moment of outage: no job ends this time
            return
        done: dict[str, list[str]] = {}
        for pod in pods:
            if not inv.live(pod):
                continue
            gang = ((pod["metadata"].get("labels") or {}).get(wl.GANG_LABEL))
            done.setdefault(f"gang/{gang}" if gang else inv.name_of(pod), []).append(inv.name_of(pod))
        whole = sorted(u for u, names in done.items() if all(
            inv.placed(next(p for p in pods if inv.name_of(p) == n), claims) for n in names))
        for unit in self.rng.sample(whole, min(units, len(whole))):
            for name in done[unit]:
                self.send("DELETE", f"{self.world.pods()}/{name}", ok=(200, 202, 404))
                self.send("DELETE", f"{self.world.claims()}/{name}-gpu", ok=(200, 202, 404))
            self.report.created["Finished"] += 1

    def items(self, path: str) -> list[dict[str, Any]]:
        code, body = self.b.request("GET", path)
        if code != 200:
            raise AssertionError(f"GET {path} answered {code}")
        return list(body.get("items") or [])

    # ------------------------------------------------------------------ chaos

    def kill(self) -> None:
        """SIGKILL the replica ready as leader (waiting for one), once its draco_leader
        was scraped at 1; start it again at once as a new candidate."""
        def leader_known() -> bool:  # and the previous failover over
            return self.pending_kill is None and any(r.life == self.leader for r in self.replicas)

        self.wait(leader_known, 90, "a leader to kill")
        life = self.leader
        victim = next(r for r in self.replicas if r.life == life)
        try:
            self.wait(lambda: any(lf == life and v == 1 for _, lf, v in self.scrapes), 10,
                      f"{life}'s draco_leader at 1")
        except AssertionError as exc:
            self.violation(f"{life} led without saying so in draco_leader: {str(exc).splitlines()[0]}")
        with self.lock:
            victim.kill()
            self.pending_kill = (self.now(), life)
            self.report.kills += 1
            self.report.timeline.append(f"{self.now():.1f} s: SIGKILL {life}")
            victim.start()

    def restart_apiserver(self) -> None:
        # down longer than the renew deadline and the lease: the leader must give up
        # (it exits 1, as documented) and both replicas find their way back
        down, up = restart_apiserver(self.cluster_dir, self.b, down_for=LEASE_S + 1)
        self.outages.append((down - self.t0, up - self.t0))
        self.report.outages.append((down - self.t0, up - self.t0))
        self.pending_outage = up - self.t0
        self.report.apiserver_restarts += 1
        self.report.timeline.append(f"{down - self.t0:.1f} s: kube-apiserver killed, ready again at "
                                    f"{up - self.t0:.1f} s")

    # ------------------------------------------------------------------ threads

    def _supervise(self) -> None:
        exited: set[str] = set()
        while not self.stop.is_set():
            leaders = []
            for r in self.replicas:
                with self.lock:
                    proc = r.proc
                    if proc is not None and proc.poll() is not None:
                        if r.life not in exited:
                            exited.add(r.life)
                            self.report.self_exits.append(
                                f"{r.life} exited {proc.returncode} at {self.now():.1f} s: "
                                f"{r.tail(3).replace(chr(10), ' | ')[-400:]}")
                            self.report.timeline.append(f"{self.now():.1f} s: {r.life} exited {proc.returncode}")
                        if time.monotonic() - r.started_at >= 2:  # as a kubelet backs off, briefly
                            r.start()
                if r.leading():
                    leaders.append(r.life)
            if len(leaders) > 1:
                self.violation(f"at {self.now():.1f} s {' and '.join(leaders)} were both ready as leader")
            current = leaders[0] if leaders else ""
            if current and current != self.leader:
                self.report.leader_changes += 1
                self.report.timeline.append(f"{self.now():.1f} s: {current} ready as leader")
            self.leader = current
            now = self.now()
            if current and self.pending_kill is not None and current != self.pending_kill[1]:
                self.report.recoveries.append(now - self.pending_kill[0])
                self.pending_kill = None
            if current and self.pending_outage is not None:
                self.report.apiserver_recoveries.append(now - self.pending_outage)
                self.pending_outage = None
            self.stop.wait(0.2)

    def _observe(self) -> None:
        lease = f"/apis/coordination.k8s.io/v1/namespaces/{self.b.ns}/leases/draco"
        fences = f"{FENCES}?labelSelector={inv.FENCE_LABEL}"
        started: set[str] = set()
        while not self.stop.is_set():
            t = self.now()
            values = {}
            for r in list(self.replicas):
                value = leader_value(r.scrape(), self.b.ns)
                if value is not None:
                    values[r.life] = value
                    self.scrapes.append((t, r.life, value))
            self.rounds.append((t, values))
            try:
                code, held = self.b.request("GET", lease)
                if code == 200:
                    self.holders.append(str((held.get("spec") or {}).get("holderIdentity") or ""))
                pods = self.items(self.world.pods())
                claims = inv.by_name(self.items(self.world.claims()))
                gangs = self.items(self.world.gangs())
                rules = [r for r in self.items(fences) if self.b.owns(FENCES, r)]
            except Exception:  # noqa: BLE001 - the API server restarting: sampled next time
                self.stop.wait(0.5)
                continue
            for problem in inv.double_allocations(claims.values()):
                self.violation(f"listed at {t:.1f} s: {problem}")
            self.half_gangs.observe(t, inv.incomplete_gangs(gangs, pods, claims))
            for key, problem in inv.started_gangs(gangs, pods, claims).items():
                if key not in started:
                    started.add(key)
                    if problem:
                        self.violation(f"at {t:.1f} s {key}: {problem}")
            self.stale.observe(t, inv.stale_preemption(pods, claims, rules))
            self.stop.wait(0.5)

    def _watch_claims(self) -> None:
        path = self.world.claims()
        while not self.stop.is_set():
            try:
                code, listed = self.b.request("GET", path)
                if code != 200:
                    raise OSError(f"list answered {code}")
                self.ledger.reset()
                for claim in listed.get("items") or []:
                    self.ledger.apply("ADDED", claim)
                rv = listed["metadata"]["resourceVersion"]
                url = f"{self.b.url}{path}?watch=1&resourceVersion={rv}&timeoutSeconds=120"
                with urllib.request.urlopen(url, timeout=30, context=self.b.ssl_context) as resp:
                    for line in resp:
                        if self.stop.is_set():
                            return
                        if not line.strip():
                            continue
                        event = json.loads(line)
                        if event.get("type") == "ERROR":
                            break
                        for problem in self.ledger.apply(event["type"], event["object"]):
                            self.violation(f"watched at {self.now():.1f} s: {problem}")
            except Exception:  # noqa: BLE001 - the watch ended or the server went: list again
                self.stop.wait(0.5)

    # ------------------------------------------------------------------ the end

    def snapshot(self) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]], list[dict[str, Any]], list[str]]:
        w = self.world
        pods = self.items(w.pods())
        claims = inv.by_name(self.items(w.claims()))
        gangs = self.items(w.gangs())
        slices = [s for s in self.items(wl.SLICES) if self.b.owns(wl.SLICES, s)]
        rules = [r for path in (DRACO_RULES, FENCES) for r in self.items(path) if self.b.owns(path, r)]
        fences = [r for r in rules if inv.FENCE_LABEL in (r["metadata"].get("labels") or {})]
        problems = (inv.unplaced_that_fit(w, pods, claims, gangs, slices, rules)
                    + list(inv.incomplete_gangs(gangs, pods, claims).values())
                    + [f"{k}: {v}" for k, v in inv.stale_preemption(pods, claims, fences).items()]
                    + inv.double_allocations(claims.values()))
        return pods, claims, gangs, problems

    def settle_down(self) -> None:
        """No more chaos: once the last failover is over, wait (up to `settle` seconds)
        until the end state shows no problem three checks in a row."""
        self.wait(lambda: self.pending_kill is None and self.pending_outage is None and bool(self.leader),
                  90, "the last failover to end")
        deadline = time.monotonic() + self.settle
        clean = 0
        while clean < 3 and time.monotonic() < deadline:
            try:
                clean = clean + 1 if not self.snapshot()[3] else 0
            except Exception:  # noqa: BLE001 - a moment of outage
                clean = 0
            time.sleep(1)

    def final_checks(self) -> None:
        pods, claims, gangs, problems = self.snapshot()
        for problem in problems:
            self.violation(f"at the end: {problem}")
        limit = FAILOVER_S + SLACK_S
        for problem in self.half_gangs.exceeded(limit, self.outages) + self.stale.exceeded(limit, self.outages):
            self.violation(problem)
        self.report.longest_half_gang = self.half_gangs.longest()
        self.report.longest_stale_nomination = self.stale.longest()
        for problem in inv.unobserved_leaders(self.holders, self.scrapes) + inv.both_leading(self.rounds):
            self.violation(problem)
        live = [p for p in pods if inv.live(p)]
        self.report.final.update({
            "pods": len(live), "placed": sum(1 for p in live if inv.placed(p, claims)),
            "bound": sum(1 for p in live if (p.get("spec") or {}).get("nodeName")),
            "gangs": len(gangs), "gangs_started": sum(
                1 for g in gangs if any(not inv.gated(p) for p in inv.members(g, live)))})
        users = {r.user for r in self.replicas}
        events = self.audit(users)
        deletions = inv.draco_deletions(events, users, self.b.ns)
        for problem in inv.deleted_twice(deletions):
            self.violation(problem)
        d = self.report.decisions
        d["allocations_watched"] = self.ledger.allocations
        d["pods_deleted"] = sum(deletions.values())
        for e in events:
            ref = e.get("objectRef") or {}
            code = int((e.get("responseStatus") or {}).get("code") or 0)
            if e.get("verb") not in ("create", "update", "patch", "delete") or not 200 <= code < 300:
                continue
            resource = ref.get("resource")
            if resource == "resourceclaims" and ref.get("subresource") == "status":
                d["claim_status_writes"] += 1
            elif resource == "pods" and not ref.get("subresource") and e["verb"] in ("update", "patch"):
                d["pod_writes"] += 1
            elif resource == "devicetaintrules":
                d["rule_writes"] += 1
            elif resource == "gangs":
                d["gang_status_writes"] += 1

    def audit(self, users: set[str]) -> list[dict[str, Any]]:
        """The replicas' requests (their last stage), from the cluster's audit log."""
        log = Path(json.loads((self.cluster_dir / "cluster.json").read_text())["audit_log"])
        out: dict[str, dict[str, Any]] = {}
        with log.open() as fh:
            for line in fh:
                if self.b.ns not in line:
                    continue
                event = json.loads(line)
                if (event.get("user") or {}).get("username") in users:
                    out[event["auditID"]] = event
        return list(out.values())


__all__ = ["Chaos", "Report"]
