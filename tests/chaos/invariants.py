"""The chaos run's invariants, as pure functions over API objects listed from the server
(plain dicts, as the API returns them) and over what the harness recorded (watch events,
audit events, Lease holders, metric scrapes). Each returns what it found wrong, as
messages a person can act on; an empty result is a pass.

- No device in two allocated claims, at any moment a watch saw (`ClaimLedger`) and in
  any listing (`double_allocations`).
- No gang left half-placed: members allocated but fewer than `minCount`, none of them
  ungated yet (`incomplete_gangs`). A leader killed between two member writes leaves
  exactly that; the next leader completes or releases it (docs/controllers/gangs.md),
  so it may last one failover, never longer (`Persistence`).
- No nomination and no fence rule once its preemptor is placed or gone
  (`stale_preemption`): a fence whose preemptor is gone is removed by the next sweep, a
  nomination whose preemptor got its devices is removed with the allocation.
- No pod deleted or evicted twice by draco (`deleted_twice`, from the audit log).
- Every gang and pod that fits ends placed (`unplaced_that_fit`, on the settled state).
- Every leader seen in the Lease said so in `draco_leader`, and no two replicas said so
  at once (`unobserved_leaders`, `both_leading`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.chaos.workload import GANG_LABEL, HOSTNAME, World

Obj = Mapping[str, Any]
Device = tuple[str, str, str]  # driver, pool, device
NOMINATION = "resource.draco.dev/nomination"
FENCE_LABEL = "resource.draco.dev/nominated-for"
BLOCKING = ("NoSchedule", "NoExecute")


# --------------------------------------------------------------------------- object reads


def name_of(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def key_of(obj: Obj) -> str:
    md = obj.get("metadata") or {}
    return f"{md.get('namespace') or ''}/{md.get('name') or ''}"


def allocated_devices(claim: Obj) -> list[Device]:
    allocation = (claim.get("status") or {}).get("allocation") or {}
    return [(str(r.get("driver")), str(r.get("pool")), str(r.get("device")))
            for r in (allocation.get("devices") or {}).get("results") or []]


def gated(pod: Obj) -> bool:
    return bool((pod.get("spec") or {}).get("schedulingGates"))


def claim_names(pod: Obj) -> list[str]:
    return [str(c.get("resourceClaimName")) for c in (pod.get("spec") or {}).get("resourceClaims") or []
            if c.get("resourceClaimName")]


def live(pod: Obj) -> bool:
    return not (pod.get("metadata") or {}).get("deletionTimestamp")


def allocated(pod: Obj, claims: Mapping[str, Obj]) -> bool:
    """Every claim of POD has its devices."""
    names = claim_names(pod)
    return bool(names) and all(allocated_devices(claims.get(n) or {}) for n in names)


def placed(pod: Obj, claims: Mapping[str, Obj]) -> bool:
    """Allocated and ungated: draco's part is done (kube-scheduler binds)."""
    return allocated(pod, claims) and not gated(pod)


def by_name(objs: Iterable[Obj]) -> dict[str, Obj]:
    return {name_of(o): o for o in objs}


# --------------------------------------------------------------------------- devices


def double_allocations(claims: Iterable[Obj]) -> list[str]:
    owner: dict[Device, str] = {}
    found = []
    for claim in claims:
        for device in allocated_devices(claim):
            other = owner.setdefault(device, key_of(claim))
            if other != key_of(claim):
                found.append(f"device {'/'.join(device)} allocated to {other} and {key_of(claim)}")
    return found


@dataclass
class ClaimLedger:
    """Claims' allocations as a watch delivers them, checked after every event: a device
    may pass from one claim to another only after the first let it go (deallocated or
    deleted) in the server's order of events."""

    devices: dict[str, list[Device]] = field(default_factory=dict)  # claim key -> devices
    owner: dict[Device, str] = field(default_factory=dict)
    events: int = 0
    allocations: int = 0  # transitions from no devices to some: allocation decisions seen

    def apply(self, kind: str, claim: Obj) -> list[str]:
        self.events += 1
        key = key_of(claim)
        before = self.devices.pop(key, [])
        for device in before:
            if self.owner.get(device) == key:
                del self.owner[device]
        if kind == "DELETED":
            return []
        now = allocated_devices(claim)
        if now and not before:
            self.allocations += 1
        found = []
        for device in now:
            other = self.owner.setdefault(device, key)
            if other != key:
                found.append(f"device {'/'.join(device)} allocated to {other} and {key} "
                             f"(resourceVersion {(claim.get('metadata') or {}).get('resourceVersion')})")
        self.devices[key] = now
        return found

    def reset(self) -> None:
        """A fresh listing follows (the watch was lost): start over from it."""
        self.devices.clear()
        self.owner.clear()


# --------------------------------------------------------------------------- gangs


def members(gang: Obj, pods: Iterable[Obj]) -> list[Obj]:
    ns = (gang.get("metadata") or {}).get("namespace")
    return [p for p in pods if ((p.get("metadata") or {}).get("labels") or {}).get(GANG_LABEL) == name_of(gang)
            and (p.get("metadata") or {}).get("namespace") == ns]


def min_count(gang: Obj) -> int:
    return int((gang.get("spec") or {}).get("minCount") or 0)


def incomplete_gangs(gangs: Iterable[Obj], pods: Iterable[Obj], claims: Mapping[str, Obj]) -> dict[str, str]:
    """Gangs whose placement is half-written: some members allocated but fewer than
    minCount, and none ungated (a gang that started and then lost members to an
    eviction or a preemption is a disruption, not a half-written placement)."""
    pods = list(pods)
    out = {}
    for gang in gangs:
        mine = members(gang, pods)
        done = [p for p in mine if allocated(p, claims)]
        if done and len(done) < min_count(gang) and all(gated(p) for p in mine):
            out[f"gang {key_of(gang)}"] = (f"{len(done)} of minCount {min_count(gang)} members allocated "
                                           f"({', '.join(sorted(name_of(p) for p in done))}), none ungated")
    return out


def started_gangs(gangs: Iterable[Obj], pods: Iterable[Obj], claims: Mapping[str, Obj]) -> dict[str, str]:
    """Gangs with an ungated member, each with "" when at least minCount members had
    their devices, else what was wrong. Meant for the first sample in which a gang is
    seen started: narrowing ungates members only once minCount of them are allocated."""
    pods = list(pods)
    out = {}
    for gang in gangs:
        mine = members(gang, pods)
        if not any(not gated(p) for p in mine):
            continue
        done = [p for p in mine if allocated(p, claims)]
        out[f"gang {key_of(gang)}"] = "" if len(done) >= min_count(gang) else (
            f"members ungated while {len(done)} of minCount {min_count(gang)} had their devices")
    return out


# --------------------------------------------------------------------------- preemption


def stale_preemption(pods: Iterable[Obj], claims: Mapping[str, Obj], fences: Iterable[Obj]) -> dict[str, str]:
    """Nominations (the annotation, status.nominatedNodeName) on pods that are placed,
    and fence rules whose preemptor is gone or placed."""
    out = {}
    by_uid = {str((p.get("metadata") or {}).get("uid")): p for p in pods}
    for pod in by_uid.values():
        nominated = NOMINATION in ((pod.get("metadata") or {}).get("annotations") or {})
        node = (pod.get("status") or {}).get("nominatedNodeName")
        if (nominated or node) and placed(pod, claims):
            out[f"nomination {key_of(pod)}"] = "placed, yet " + (
                "its nomination annotation stands" if nominated else f"nominatedNodeName {node} stands")
    for rule in fences:
        uid = str(((rule.get("metadata") or {}).get("labels") or {}).get(FENCE_LABEL) or "")
        pod = by_uid.get(uid)
        if pod is None:
            out[f"fence {name_of(rule)}"] = f"its preemptor (uid {uid}) is gone"
        elif placed(pod, claims):
            out[f"fence {name_of(rule)}"] = f"its preemptor {key_of(pod)} is placed"
    return out


# --------------------------------------------------------------------------- over time


@dataclass
class Persistence:
    """How long each problem (by key) lasted without a break, sampled: a problem seen in
    consecutive samples counts from its first one. Time the API server was down (when
    nobody could act) is not counted."""

    since: dict[str, float] = field(default_factory=dict)
    last: dict[str, str] = field(default_factory=dict)
    runs: dict[str, list[tuple[float, float]]] = field(default_factory=dict)  # key -> (start, end)

    def observe(self, now: float, problems: Mapping[str, str]) -> None:
        for key in list(self.since):
            if key not in problems:
                del self.since[key]
        for key, message in problems.items():
            start = self.since.setdefault(key, now)
            self.last[key] = message
            runs = self.runs.setdefault(key, [])
            if runs and runs[-1][0] == start:
                runs[-1] = (start, now)
            else:
                runs.append((start, now))

    def exceeded(self, limit: float, outages: Sequence[tuple[float, float]] = ()) -> list[str]:
        """Problems that lasted longer than LIMIT seconds (outages not counted)."""
        out = []
        for key, runs in sorted(self.runs.items()):
            lasted = max(end - start - outage_overlap(start, end, outages) for start, end in runs)
            if lasted > limit:
                out.append(f"{key} lasted {lasted:.1f} s (limit {limit:.0f} s): {self.last[key]}")
        return out

    def longest(self) -> float:
        return max((end - start for runs in self.runs.values() for start, end in runs), default=0.0)


def outage_overlap(start: float, end: float, outages: Sequence[tuple[float, float]]) -> float:
    """Seconds of [start, end] the API server was down."""
    return sum(max(0.0, min(b, end) - max(a, start)) for a, b in outages)


# --------------------------------------------------------------------------- deletions


def draco_deletions(events: Iterable[Obj], users: set[str], ns: str) -> Counter[str]:
    """Pods of NS that draco's replicas deleted or evicted with success (audit events)."""
    found: Counter[str] = Counter()
    for e in events:
        ref = e.get("objectRef") or {}
        if (e.get("user") or {}).get("username") not in users or ref.get("resource") != "pods" \
                or ref.get("namespace") != ns or not ref.get("name"):
            continue
        code = int((e.get("responseStatus") or {}).get("code") or 0)
        deletes = e.get("verb") == "delete" and not ref.get("subresource")
        evicts = e.get("verb") == "create" and ref.get("subresource") == "eviction"
        if (deletes or evicts) and 200 <= code < 300:
            found[str(ref["name"])] += 1
    return found


def deleted_twice(deletions: Counter[str]) -> list[str]:
    return [f"pod {name} deleted or evicted {n} times by draco" for name, n in sorted(deletions.items()) if n > 1]


# --------------------------------------------------------------------------- the settled end


def tainted(world: World, slices: Iterable[Obj], rules: Iterable[Obj]) -> set[Device]:
    """Devices no pod of the run may get: a NoSchedule or NoExecute taint in their slice
    or from any DeviceTaintRule (draco's or upstream's) whose selector matches them."""
    out: set[Device] = set()
    every: list[Device] = []
    for s in slices:
        spec = s.get("spec") or {}
        pool = str((spec.get("pool") or {}).get("name"))
        for d in spec.get("devices") or []:
            device = (str(spec.get("driver")), pool, str(d.get("name")))
            every.append(device)
            if any(t.get("effect") in BLOCKING for t in d.get("taints") or []):
                out.add(device)
    for rule in rules:
        spec = rule.get("spec") or {}
        if (spec.get("taint") or {}).get("effect") not in BLOCKING:
            continue
        sel = spec.get("deviceSelector") or {}
        if not sel:
            continue
        for device in every:
            if all(sel.get(k) in (None, v) for k, v in zip(("driver", "pool", "device"), device, strict=True)):
                out.add(device)
    return out


def free_devices(world: World, claims: Iterable[Obj], blocked: set[Device]) -> dict[str, list[str]]:
    """node -> cliques of its GPUs that no claim holds and no taint blocks."""
    held = {d for c in claims for d in allocated_devices(c)}
    out: dict[str, list[str]] = {n: [] for n in world.nodes}
    for node, name, clique in world.devices():
        device = (world.driver, world.pool(node), name)
        if device not in held and device not in blocked:
            out[node].append(clique)
    return out


def count_of(pod: Obj, claims: Mapping[str, Obj]) -> int:
    total = 0
    for name in claim_names(pod):
        for req in ((claims.get(name) or {}).get("spec") or {}).get("devices", {}).get("requests") or []:
            total += int((req.get("exactly") or {}).get("count") or 1)
    return total


def room(free: Mapping[str, list[str]], count: int, nodes: Iterable[str], clique: str | None) -> int:
    """How many pods of COUNT GPUs fit on NODES (each on one node), within CLIQUE."""
    return sum(sum(1 for c in free[n] if clique in (None, c)) // max(count, 1) for n in nodes if n in free)


def domains(world: World, gang: Obj) -> list[tuple[list[str], str | None]]:
    topology = (gang.get("spec") or {}).get("topology") or {}
    by_node = topology.get("nodeLabel") == HOSTNAME
    by_clique = topology.get("deviceAttribute") == world.attribute
    node_sets = [[n] for n in world.nodes] if by_node else [list(world.nodes)]
    cliques: list[str | None] = ["x", "y"] if by_clique else [None]
    return [(ns, c) for ns in node_sets for c in cliques]


def unplaced_that_fit(world: World, pods: Iterable[Obj], claims: Mapping[str, Obj], gangs: Iterable[Obj],
                      slices: Iterable[Obj], rules: Iterable[Obj]) -> list[str]:
    """On a settled state: pods and gangs still waiting although the free, untainted GPUs
    would take them. Gangs: the core (minCount members) in one domain, each member on
    one node; a gang with fewer live members than minCount waits by design. Members
    beyond minCount of a placed gang count as single pods in the gang's domain."""
    # a pod whose claim is gone (a job ending: its pod, then its claim deleted) waits for it
    pods = [p for p in pods if live(p) and all(n in claims for n in claim_names(p))]
    free = free_devices(world, claims.values(), tainted(world, slices, rules))
    found = []
    in_gangs: set[str] = set()
    for gang in gangs:
        mine = members(gang, pods)
        in_gangs |= {name_of(p) for p in mine}
        waiting = [p for p in mine if not placed(p, claims)]
        if not waiting or len(mine) < min_count(gang):
            continue
        count = max(count_of(p, claims) for p in waiting)
        done = [p for p in mine if allocated(p, claims)]
        if len(done) >= min_count(gang):
            stuck = [name_of(p) for p in done if gated(p)]
            if stuck:
                found.append(f"gang {key_of(gang)}: {', '.join(sorted(stuck))} allocated, "
                             f"minCount reached, still gated")
                continue
            nodes, clique = placed_domain(world, gang, done, claims)
            if room(free, count, nodes, clique) >= 1:
                found.append(f"gang {key_of(gang)}: member {name_of(waiting[0])} waits, and its domain has room")
            continue
        need = min_count(gang) - len(done)
        for nodes, clique in domains(world, gang):
            if room(free, count, nodes, clique) >= need and not done:
                found.append(f"gang {key_of(gang)}: {need} members of {count} GPU(s) fit in "
                             f"{'+'.join(nodes)}{'/' + clique if clique else ''} and wait")
                break
    for pod in pods:
        if name_of(pod) in in_gangs or placed(pod, claims):
            continue
        if allocated(pod, claims):
            found.append(f"pod {key_of(pod)}: allocated but still gated")
        elif room(free, count_of(pod, claims), world.nodes, None) >= 1:
            found.append(f"pod {key_of(pod)}: {count_of(pod, claims)} GPU(s) are free on one node and it waits")
    return found


def placed_domain(world: World, gang: Obj, done: Iterable[Obj],
                  claims: Mapping[str, Obj]) -> tuple[list[str], str | None]:
    """The domain a placed gang's devices fixed: its nodes and clique (None: any)."""
    topology = (gang.get("spec") or {}).get("topology") or {}
    devices = [d for p in done for n in claim_names(p) for d in allocated_devices(claims.get(n) or {})]
    nodes = sorted({world.node_of_pool(d[1]) for d in devices})
    clique = None
    if topology.get("deviceAttribute") == world.attribute and devices:
        clique = world.clique(int(devices[0][2].rsplit("-", 1)[1]))
    return (nodes if topology.get("nodeLabel") == HOSTNAME else list(world.nodes)), clique


# --------------------------------------------------------------------------- leadership


def unobserved_leaders(holders: Iterable[str], scrapes: Iterable[tuple[float, str, float]]) -> list[str]:
    """Lease holders (identities `<life>_<suffix>`) whose process never exported
    draco_leader 1 in a scrape (scrapes: time, life, value)."""
    said = {life for _, life, value in scrapes if value == 1}
    return [f"{holder} held the Lease but its draco_leader was never seen at 1"
            for holder in dict.fromkeys(holders) if holder and holder.rsplit("_", 1)[0] not in said]


def both_leading(rounds: Iterable[tuple[float, Mapping[str, float]]]) -> list[str]:
    """Scrape rounds (time, life -> value) in which two processes both said 1."""
    return [f"at {t:.1f} s {', '.join(sorted(k for k, v in values.items() if v == 1))} all said draco_leader 1"
            for t, values in rounds if sum(1 for v in values.values() if v == 1) > 1]


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank percentile (q in 0..100); NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


__all__ = ["ClaimLedger", "Persistence", "both_leading", "deleted_twice", "double_allocations",
           "draco_deletions", "incomplete_gangs", "percentile", "stale_preemption", "unobserved_leaders",
           "unplaced_that_fit"]
