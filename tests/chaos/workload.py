"""The chaos run's world and its stream of work, as data: a seeded plan of timed actions
and the API objects each one creates. Pure: no I/O, the same seed gives the same plan.

The world: every node publishes `per_node` GPUs of the test's own driver in a pool of
its own, half of them in clique `x`, half in clique `y` (a device attribute), so a gang
can be kept to one node (node-label topology, `kubernetes.io/hostname`), to one clique
across nodes (device-attribute topology), or both. Every pod has one claim of `count`
GPUs and draco's gate; priorities come from PriorityClasses (the real server resolves
them): 10 and 100 for ordinary work, 1000 for preemptors.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

GATE = "resource.draco.dev/allocation"
GANG_LABEL = "resource.draco.dev/gang"
HOSTNAME = "kubernetes.io/hostname"
CLIQUES = ("x", "y")
PRIORITIES = (10, 100, 1000)
RULES = "/apis/resource.draco.dev/v1alpha1/devicetaintrules"
POLICIES = "/apis/resource.draco.dev/v1alpha1/devicehealthpolicies"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"
CLASSES = "/apis/resource.k8s.io/v1/deviceclasses"
PRIORITY_CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"
SIGNAL_KEY = "chaos.draco.dev/xid"  # what the "driver" publishes on a failing GPU
HEALTH_TAINT = "health.draco.dev/unhealthy"
DRAIN_TAINT = "chaos.draco.dev/drain"
# How long a gang reserves its best partial placement before single pods may use it:
# short, so that the settled end state has no reservation left (see invariants).
GANG_WAIT_S = 5


@dataclass(frozen=True)
class World:
    ns: str
    driver: str
    nodes: tuple[str, ...]
    per_node: int = 8

    @property
    def device_class(self) -> str:
        return f"chaos-{self.ns}"

    @property
    def attribute(self) -> str:
        """The clique attribute, qualified as a Gang's deviceAttribute names it."""
        return f"{self.driver}/clique"

    def pool(self, node: str) -> str:
        return f"{self.ns}-{node}"

    def node_of_pool(self, pool: str) -> str:
        return pool[len(self.ns) + 1:]

    @staticmethod
    def device(index: int) -> str:
        return f"gpu-{index}"

    def clique(self, index: int) -> str:
        return CLIQUES[0] if index < self.per_node // 2 else CLIQUES[1]

    def devices(self) -> list[tuple[str, str, str]]:
        """(node, device, clique) of every GPU."""
        return [(n, self.device(i), self.clique(i)) for n in self.nodes for i in range(self.per_node)]

    def priority_class(self, value: int) -> str:
        return f"{self.ns}-p{value}"

    def claims(self) -> str:
        return f"/apis/resource.k8s.io/v1/namespaces/{self.ns}/resourceclaims"

    def pods(self) -> str:
        return f"/api/v1/namespaces/{self.ns}/pods"

    def gangs(self) -> str:
        return f"/apis/resource.draco.dev/v1alpha1/namespaces/{self.ns}/gangs"


@dataclass(frozen=True)
class Action:
    """One step of the stream at `at` seconds. kinds: gang, single, rule, unrule, signal,
    recover, finish, kill, apiserver."""

    at: float
    kind: str
    name: str = ""
    params: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True)
class Size:
    duration: float
    gangs: int
    singles: int
    preemptors: int
    rules: int
    signals: int
    kills: int
    apiserver_restarts: int = 1
    finish_every: float = 8.0  # a job ends (its pods deleted) about this often


def gang_shape(rng: random.Random, world: World, topology: str) -> tuple[int, int]:
    """Members (2-8) and GPUs per member that fit the largest domain of TOPOLOGY."""
    room = {"node": world.per_node, "clique": len(world.nodes) * world.per_node // 2,
            "both": world.per_node // 2, "none": len(world.nodes) * world.per_node}[topology]
    members = rng.randint(2, min(8, room))
    count = 1 if members * 2 > room else rng.choice((1, 2))
    return members, count


def plan(seed: int, size: Size, world: World) -> list[Action]:
    """The whole run's actions, sorted by time."""
    rng = random.Random(seed)
    out: list[Action] = []

    def moment() -> float:
        return round(rng.uniform(0, size.duration * 0.9), 2)

    for i in range(size.gangs):
        topology = rng.choice(("node", "clique", "both", "none"))
        members, count = gang_shape(rng, world, topology)
        min_count = members if members == 2 or rng.random() < 0.7 else members - 1
        out.append(Action(moment(), "gang", f"g{i:02d}", {
            "members": members, "min_count": min_count, "count": count, "topology": topology,
            "priority": rng.choice((10, 100))}))
    for i in range(size.singles):
        out.append(Action(moment(), "single", f"s{i:02d}", {
            "count": rng.choice((1, 1, 2)), "priority": rng.choice((10, 10, 100))}))
    for i in range(size.preemptors):
        if rng.random() < 0.3:  # a gang of two preempts as a whole
            out.append(Action(moment(), "gang", f"pg{i:02d}", {
                "members": 2, "min_count": 2, "count": 1, "topology": "none", "priority": 1000}))
        else:
            out.append(Action(moment(), "single", f"p{i:02d}", {"count": 1, "priority": 1000}))
    for kind, undo, n in (("rule", "unrule", size.rules), ("signal", "recover", size.signals)):
        for i in range(n):
            at = moment()
            target = {"node": rng.choice(world.nodes), "device": world.device(rng.randrange(world.per_node))}
            out.append(Action(at, kind, f"{kind}{i:02d}", target))
            out.append(Action(round(at + rng.uniform(4, 10), 2), undo, f"{kind}{i:02d}", target))
    t = size.finish_every
    while t < size.duration:
        out.append(Action(round(t + rng.uniform(-1, 1), 2), "finish", params={"units": rng.choice((1, 1, 2))}))
        t += size.finish_every
    for k in range(size.kills):  # spread out, so that every failover ends before the next kill
        slot = size.duration / max(size.kills, 1)
        out.append(Action(round(slot * k + rng.uniform(0.3, 0.8) * slot, 2), "kill"))
    for _ in range(size.apiserver_restarts):
        out.append(Action(round(rng.uniform(0.3, 0.7) * size.duration, 2), "apiserver"))
    return sorted(out, key=lambda a: (a.at, a.kind, a.name))


# --------------------------------------------------------------------------- objects


def setup_objects(world: World) -> list[tuple[str, dict[str, Any]]]:
    """(collection, object) to create before the run: the class, the slices, the
    priority classes, the health policy."""
    out: list[tuple[str, dict[str, Any]]] = [(CLASSES, {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": world.device_class},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{world.driver}"'}}]}})]
    for node in world.nodes:
        out.append((SLICES, slice_object(world, node, {})))
    for value in PRIORITIES:
        out.append((PRIORITY_CLASSES, {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                       "metadata": {"name": world.priority_class(value)}, "value": value}))
    out.append((POLICIES, {
        "apiVersion": "resource.draco.dev/v1alpha1", "kind": "DeviceHealthPolicy",
        "metadata": {"name": f"chaos-{world.ns}"},
        "spec": {"deviceSelector": {"driver": world.driver},
                 "signals": [{"sliceTaint": {"key": SIGNAL_KEY}}],
                 "taint": {"key": HEALTH_TAINT, "effect": "NoExecute"},
                 "for": "0s", "clearAfter": "2s"}}))
    return out


def slice_object(world: World, node: str, signals: dict[str, str]) -> dict[str, Any]:
    """NODE's slice; SIGNALS: device -> the XID its driver reports (a NoSchedule taint)."""
    devices = []
    for i in range(world.per_node):
        name = world.device(i)
        device: dict[str, Any] = {"name": name, "attributes": {"clique": {"string": world.clique(i)}}}
        if name in signals:
            device["taints"] = [{"key": SIGNAL_KEY, "value": signals[name], "effect": "NoSchedule"}]
        devices.append(device)
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": world.pool(node)},
            "spec": {"driver": world.driver, "nodeName": node,
                     "pool": {"name": world.pool(node), "generation": 1, "resourceSliceCount": 1},
                     "devices": devices}}


def pod_objects(world: World, pod: str, count: int, priority: int,
                gang: str | None = None) -> list[tuple[str, dict[str, Any]]]:
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": f"{pod}-gpu"},
             "spec": {"devices": {"requests": [
                 {"name": "gpu", "exactly": {"deviceClassName": world.device_class, "count": count}}]}}}
    meta: dict[str, Any] = {"name": pod}
    if gang:
        meta["labels"] = {GANG_LABEL: gang}
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {
        "schedulingGates": [{"name": GATE}], "priorityClassName": world.priority_class(priority),
        "terminationGracePeriodSeconds": 1,
        "resourceClaims": [{"name": "gpu", "resourceClaimName": f"{pod}-gpu"}],
        "containers": [{"name": "c", "image": "registry.invalid/app", "resources": {"claims": [{"name": "gpu"}]}}],
        "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}]}}
    return [(world.claims(), claim), (world.pods(), body)]


def member_names(action: Action) -> list[str]:
    return [f"{action.name}-{i}" for i in range(int(action.params["members"]))]


def gang_objects(world: World, action: Action) -> list[tuple[str, dict[str, Any]]]:
    p = action.params
    topology = {"node": {"nodeLabel": HOSTNAME}, "clique": {"deviceAttribute": world.attribute},
                "both": {"nodeLabel": HOSTNAME, "deviceAttribute": world.attribute}, "none": {}}[p["topology"]]
    spec: dict[str, Any] = {"minCount": p["min_count"], "waitSeconds": GANG_WAIT_S}
    if topology:
        spec["topology"] = topology
    out: list[tuple[str, dict[str, Any]]] = [(world.gangs(), {
        "apiVersion": "resource.draco.dev/v1alpha1", "kind": "Gang", "metadata": {"name": action.name},
        "spec": spec})]
    for pod in member_names(action):
        out += pod_objects(world, pod, p["count"], p["priority"], gang=action.name)
    return out


def rule_object(world: World, action: Action) -> dict[str, Any]:
    node, device = action.params["node"], action.params["device"]
    return {"apiVersion": "resource.draco.dev/v1alpha1", "kind": "DeviceTaintRule",
            "metadata": {"name": f"{world.ns}-{action.name}"},
            "spec": {"deviceSelector": {"driver": world.driver, "pool": world.pool(node), "device": device},
                     "taint": {"key": DRAIN_TAINT, "effect": "NoExecute"}}}


__all__ = ["Action", "Size", "World", "gang_objects", "member_names", "plan", "pod_objects",
           "rule_object", "setup_objects", "slice_object"]
