"""Differential: draco's allocator against the real kube-scheduler 1.37 and 1.36.

Every case of the allocation table (tests/allocator/allocation_cases.yaml) that upstream
can express becomes real objects on a 1.37 cluster — DeviceClasses, ResourceSlices on
kwok nodes, the claims, a claim holding the case's devices in use, and one pod using the
claims, pinned to the case's node by `kubernetes.io/hostname` — and kube-scheduler's
DynamicResources plugin (prioritized lists and device taints GA) allocates. The same
objects, as the API server stored them, go through `draco allocate --from FILE --claim …
--node NODE -o json`. Both must agree on the verdict (scheduled vs not) and, when
scheduled, on every claim's devices (upstream's first fit is deterministic: pools by
driver and name, slices by name, devices in slice order), nodeSelector and config.
The node-choice table (tests/allocator/node_cases.yaml) runs first, its pods not pinned
(unless the case names `only`), while both nodes are still empty so that
DynamicResources' KEP-4816 score decides among them: there the node is compared too,
except where the table marks a tie that kube-scheduler breaks at random.

The cluster is the test's own (`private_137`): classes without selectors see every
device of the cluster, and the cases label, taint and cordon its nodes, so no other
test may share it.

Speed: all cases share one namespace and most run at once; each case gets its own
drivers (`dNN-driver-a`), classes, slices and claims, so the default classes (which
select by driver) see only the case's devices. Two things cross case boundaries, as
upstream does it, and the rounds keep them apart: a class without selectors sees every
case's devices (such a case runs alone, and its slices are deleted afterwards), and an
`All` request fails on any incomplete or invalid pool its node reaches, whatever the
driver (cases with such pools run after the others, in a round of their own). draco
reads every object the cluster holds at the time, as kube-scheduler does. Table node
`node-1` is the cluster's node-1 and `node-2` its node-0.

Node taints and cordons (node cases with `taints`/`unschedulable` on a node and the
pod's `tolerations`): node taints are cluster-wide, so each such case runs in a round of
its own after the others, with the taints set on the real nodes before its pod exists
and removed after; the pods go into draco's input too, so that `draco allocate` filters
nodes by the pod's tolerations as the allocator controller does. Likewise the pod's own
nodeSelector and required node affinity (node cases with `podNodeSelector`/`podAffinity`,
over the table's node labels, which `labelled` puts on the real nodes).

Not expressible upstream, hence not compared: a time budget (draco's own), no node
(kube-scheduler always allocates for a node) and draco's tolerations annotation.

No verdict rests on elapsed time: kube-scheduler decides each pod once, from what its
informers hold at that moment, and retries an unschedulable pod only when an event it
cares about arrives. So before a round's pods exist the test makes sure kube-scheduler
already holds everything they need: each change of a node (labels, taints, cordons) is
followed by a probe pod selecting a fresh label of that node, and a round's classes,
slices and claims (and the slices deleted before it) by a probe pod whose claim needs a
class, slice and claim created after all of them; each informer delivers its objects
in order, so once kube-scheduler has bound a probe it has seen everything before it.
Probes tolerate every taint, request nothing (zero, not unset: kube-scheduler's scores
count an unset request as 100m CPU and 200 MB), use a device of their own that no case
can reach, and are deleted before the round's pods exist. A pod's first decision is
then its verdict: bound, or PodScheduled False; the round ends when every pod has one
and every claim of a bound pod has shown its allocation in the watch.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import re
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from operators.allocator import DEFAULT_BUDGET_S
from operators.apiserver.testing import wait_for
from operators.cli.allocate import document
from operators.cli.main import build_parser, main
from operators.cli.state import load_state
from operators.model import NamespacedName
from tests.allocator.build import (
    DEFAULT_CLASSES,
    case_inputs,
    claim_api,
    device_class_api,
    resource_slice_api,
)
from tests.allocator.test_allocation_table import CASES
from tests.e2e.backends import RealBackend

pytestmark = [pytest.mark.real, pytest.mark.timeout(600)]  # a hang guard: ~80 s alone, 4+ min on a loaded machine

NODES = {"node-1": "node-1", "node-2": "node-0", "node-a": "node-0", "node-b": "node-1"}
NODE_CASES: list[dict[str, Any]] = yaml.safe_load(
    (Path(__file__).parents[1] / "allocator" / "node_cases.yaml").read_text())
RESOURCE = "/apis/resource.k8s.io/v1"
ADMIN_LABEL = "resource.kubernetes.io/admin-access"
SYNC_LABEL = "e2e.draco.dev/sync"  # a fresh value per probe: what kube-scheduler must have seen
NOTHING = {"cpu": "0", "memory": "0"}  # a probe's requests: it weighs nothing in any score
DRIVER = re.compile(r"(?<![\w.-])(driver-[a-z])(?![\w-])")
# Cases the 1.37 API server refuses to store (validation), so upstream cannot run them;
# the test checks that the refusal still happens.
REFUSED = {
    "a constraint of neither kind is an error (unknown-constraint; the API refuses it)":
        'exactly one of "matchAttribute" or "distinctAttribute" is required',
    "a slice node selector with two terms is an error (the API refuses such slices)":
        "must have exactly one node selector term",
}


def not_expressible(case: Mapping[str, Any]) -> str | None:
    if "dracoOnly" in case:  # draco fails closed where upstream allocates
        return str(case["dracoOnly"])
    if "budget" in case:
        return "a time budget is draco's"
    if "node" in case and case["node"] is None:
        return "kube-scheduler always allocates for a node"
    if any("resource.draco.dev/tolerations" in (c.get("annotations") or {}) for c in case["claims"]):
        return "draco's tolerations annotation"
    return None


def unscoped(case: Mapping[str, Any]) -> bool:
    """Whether a class the case uses has no selectors (it would see other cases' devices)."""
    return any(not c.get("selectors") for c in case.get("classes", []))


def taints_nodes(case: Mapping[str, Any]) -> bool:
    """Whether the case taints or cordons a node (which every other pod would see)."""
    return any(n.get("taints") or n.get("unschedulable") for n in case.get("nodes", []))


def spoils_all(case: Mapping[str, Any]) -> bool:
    """Whether the case has an incomplete or invalid pool (an `All` request of any other
    case on the same node would fail on it)."""
    return any(p.incomplete or p.invalid for p in case_inputs(case)[2])


@dataclass
class Translated:
    """One table case as API objects, renamed so that cases cannot see each other."""

    index: int
    case: Mapping[str, Any]
    prefix: str
    node: str | None  # the node the pod is pinned to; None: kube-scheduler picks
    labels: dict[str, dict[str, str]]  # cluster node -> labels the case gives it
    classes: list[dict[str, Any]]
    slices: list[dict[str, Any]]
    claims: list[dict[str, Any]]
    holder: dict[str, Any] | None
    holder_results: list[dict[str, Any]]
    created: list[dict[str, Any]] = field(default_factory=list)
    refused: str | None = None

    @property
    def claim_names(self) -> list[str]:
        return [c["metadata"]["name"] for c in self.claims]

    @property
    def pod_name(self) -> str:
        return f"{self.prefix}-pod"


def _rename_drivers(obj: Any, prefix: str) -> Any:
    return json.loads(DRIVER.sub(lambda m: f"{prefix}-{m.group(1)}", json.dumps(obj)))


def translate(index: int, case: Mapping[str, Any], ns: str, *, placing: bool = False) -> Translated:
    """`placing`: a case of node_cases.yaml (the pod is not pinned unless `only`)."""
    p = f"{'n' if placing else 'd'}{index:02d}"
    classes = [device_class_api(c) for c in DEFAULT_CLASSES + case.get("classes", [])]
    for c in classes:
        c["metadata"]["name"] = f"{p}-{c['metadata']['name']}"
    slices = [resource_slice_api(s, i) for i, s in enumerate(case.get("slices", []))]
    for s in slices:
        s["metadata"]["name"] = f"{p}-{s['metadata']['name']}"
        spec = s["spec"]
        if "nodeName" in spec:
            spec["nodeName"] = NODES[spec["nodeName"]]
        for d in spec.get("devices", []):  # a counter slice has none
            if "nodeName" in d:
                d["nodeName"] = NODES[d["nodeName"]]
    claims = [claim_api(c) for c in case["claims"]]
    for c in claims:
        c["metadata"] = {"name": f"{p}-{c['metadata']['name']}", "namespace": ns,
                         **({"annotations": c["metadata"]["annotations"]}
                            if "annotations" in c["metadata"] else {})}
        for r in c["spec"]["devices"]["requests"]:
            for spec in [r["exactly"]] if "exactly" in r else r["firstAvailable"]:
                spec["deviceClassName"] = f"{p}-{spec['deviceClassName']}"
    holder = None
    results: list[dict[str, Any]] = []
    if case.get("inUse") or case.get("shared"):
        held = len(case.get("inUse", [])) + len(case.get("shared", []))
        holder = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                  "metadata": {"name": f"{p}-holder", "namespace": ns},
                  "spec": {"devices": {"requests": [{"name": "held", "exactly": {
                      "deviceClassName": f"{p}-class-a", "count": held}}]}}}
        for text in case.get("inUse", []):
            driver, pool, device = text.split("/")
            results.append({"request": "held", "driver": driver, "pool": pool, "device": device})
        for text in case.get("shared", []):  # shares of multi-allocatable devices
            ident, _, amounts = text.partition("=")
            driver, pool, device = ident.split("/")
            share: dict[str, Any] = {"request": "held", "driver": driver, "pool": pool,
                                     "device": device, "shareID": str(uuid.uuid4())}
            consumed = dict(x.split(":") for x in amounts.split(",") if x)
            if consumed:
                share["consumedCapacity"] = consumed
            results.append(share)
    node: str | None
    if placing:
        node = NODES[case["only"]] if "only" in case else None
        labels = {NODES[n["name"]]: n["labels"] for n in case["nodes"] if n.get("labels")}
    else:
        named = case.get("node") or {"name": "node-1"}
        node = NODES[named["name"]]
        labels = {node: named["labels"]} if named.get("labels") else {}
    return Translated(index, case, p, node, labels, _rename_drivers(classes, p),
                      _rename_drivers(slices, p), _rename_drivers(claims, p), holder,
                      _rename_drivers(results, p))


def create_case(backend: RealBackend, t: Translated) -> None:
    """Create the case's objects; a refusal by the API server is recorded, not raised."""
    claims_path = f"{RESOURCE}/namespaces/{backend.ns}/resourceclaims"
    steps = [(f"{RESOURCE}/deviceclasses", o) for o in t.classes]
    steps += [(f"{RESOURCE}/resourceslices", o) for o in t.slices]
    steps += [(claims_path, o) for o in t.claims]
    for path, obj in steps:
        code, body = backend.request("POST", path, obj)
        if code != 201:
            t.refused = f"{obj['kind']} {obj['metadata']['name']}: {code} {body.get('message', body)}"
            return
        t.created.append(body)
    if t.holder is not None:
        backend.create(claims_path, t.holder)
        held = backend.merge_patch(f"{claims_path}/{t.holder['metadata']['name']}/status", {
            "status": {"allocation": {"devices": {"results": t.holder_results}}}})
        t.created.append(held)


def pod(t: Translated) -> dict[str, Any]:
    selector = {**t.case.get("podNodeSelector", {}),
                **({"kubernetes.io/hostname": t.node} if t.node else {})}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": t.pod_name},
            "spec": {**({"nodeSelector": selector} if selector else {}),
                     **({"affinity": t.case["podAffinity"]} if t.case.get("podAffinity") else {}),
                     **({"tolerations": t.case["tolerations"]} if t.case.get("tolerations") else {}),
                     "terminationGracePeriodSeconds": 0,
                     "resourceClaims": [{"name": f"c{i}", "resourceClaimName": n}
                                        for i, n in enumerate(t.claim_names)],
                     "containers": [{"name": "c", "image": "registry.invalid/app"}]}}


def probe(name: str, node: str, labels: Mapping[str, str] | None = None,
          claim: str | None = None) -> dict[str, Any]:
    """A pod that only kube-scheduler's view decides: pinned to NODE (and LABELS), every
    taint and the cordon tolerated, nothing requested, and CLAIM if given."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": node, **(labels or {})},
                     "tolerations": [{"operator": "Exists"}],
                     "terminationGracePeriodSeconds": 0,
                     **({"resourceClaims": [{"name": "sync", "resourceClaimName": claim}]} if claim else {}),
                     "containers": [{"name": "c", "image": "registry.invalid/app",
                                     "resources": {"requests": NOTHING}}]}}


def bound(backend: RealBackend, probes: list[dict[str, Any]]) -> None:
    """Create the probes, wait until kube-scheduler bound every one, delete them."""
    pods_path = f"/api/v1/namespaces/{backend.ns}/pods"
    names = [p["metadata"]["name"] for p in probes]
    for p in probes:
        backend.create(pods_path, p)

    def node_of(name: str) -> str | None:
        return ((backend.get(f"{pods_path}/{name}") or {}).get("spec") or {}).get("nodeName")

    try:
        for name in names:
            wait_for(functools.partial(node_of, name), 60, what=f"kube-scheduler to bind the probe {name}")
    finally:
        for name in names:
            code, body = backend.request("DELETE", f"{pods_path}/{name}?gracePeriodSeconds=0")
            assert code in (200, 404), body


def scheduler_sees_nodes(backend: RealBackend, nodes: Iterable[str]) -> None:
    """kube-scheduler holds NODES as they are now: a fresh label on each, then a probe
    per node selecting it; its Node informer delivers updates in order, so binding the
    probe means every earlier update of the node (taints, cordon, labels) arrived too."""
    token = uuid.uuid4().hex[:10]
    nodes = sorted(set(nodes))
    for node in nodes:
        backend.merge_patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": {SYNC_LABEL: token}}})
    bound(backend, [probe(f"sync-{token}-{node}", node, {SYNC_LABEL: token}) for node in nodes])


def scheduler_sees_objects(backend: RealBackend, name: str, node: str) -> None:
    """kube-scheduler holds every class, slice and claim created (or deleted) so far: a
    class, a slice on NODE and a claim of the probe's own, made after all of them, and a
    probe using the claim; the probe binds only once kube-scheduler's informers for the
    three kinds delivered those, and each delivers in order. The probe's device is its
    own driver's (no case's class selects it) on a node no case with a class without
    selectors runs on; all of it is deleted again (nothing the cases see depends on
    when kube-scheduler notices that)."""
    driver = f"{name}.sync.example.com"
    klass = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
             "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}}
    sl = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
          "spec": {"driver": driver, "nodeName": node,
                   "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                   "devices": [{"name": "sync"}]}}
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
             "spec": {"devices": {"requests": [{"name": "sync", "exactly": {"deviceClassName": name}}]}}}
    made = [(f"{RESOURCE}/deviceclasses", klass), (f"{RESOURCE}/resourceslices", sl),
            (f"{RESOURCE}/namespaces/{backend.ns}/resourceclaims", claim)]
    for path, obj in made:
        backend.create(path, obj)
    try:
        bound(backend, [probe(name, node, claim=name)])
    finally:
        for path, _ in reversed(made):
            code, body = backend.request("DELETE", f"{path}/{name}")
            assert code in (200, 202, 404), body


def probe_node(cases: list[Translated]) -> str:
    """Where a round's probe device goes: a node that no case whose class has no
    selectors (which would see the device) runs on."""
    return "node-1" if any(unscoped(t.case) and t.node == "node-0" for t in cases) else "node-0"


def decided(p: dict[str, Any]) -> str | None:
    """What one state of the pod says: "scheduled", "unschedulable" or None (not yet).
    PodScheduled False is a verdict when filtering gave it (reason Unschedulable, or a
    SchedulerError of a filter plugin, such as the allocator's error for an `All`
    request over an incomplete pool): that answer only changes with the objects, which
    kube-scheduler already held. A SchedulerError of reserving or binding (a conflict
    writing the claim, say) is not: kube-scheduler retries the pod after a backoff."""
    if p["spec"].get("nodeName"):
        return "scheduled"
    for c in (p.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False" and (
                c.get("reason") == "Unschedulable" or "filter plugin" in c.get("message", "").lower()):
            return "unschedulable"
    return None


def verdicts(events: list[dict[str, Any]], names: set[str]) -> dict[str, tuple[str, str]]:
    """Per pod: ("scheduled", node) once any event shows it bound, else ("unschedulable",
    the scheduler's message) once its PodScheduled condition is False."""
    out: dict[str, tuple[str, str]] = {}
    for event in events:
        p = event["object"]
        name = p["metadata"]["name"]
        verdict = decided(p) if name in names else None
        if verdict is None or out.get(name, ("",))[0] == "scheduled":
            continue
        message = p["spec"].get("nodeName") or next(
            (c.get("message", "") for c in (p.get("status") or {}).get("conditions") or []
             if c.get("type") == "PodScheduled"), "")
        out[name] = (verdict, message)
    return out


@dataclass
class Answers:
    """What kube-scheduler decided: per pod its verdict and message, per claim the first
    allocation it wrote (from watch events, so a pod that upstream's device-taint eviction
    deletes right after binding still counts as scheduled, with its devices)."""

    verdicts: dict[str, tuple[str, str]] = field(default_factory=dict)
    allocations: dict[str, dict[str, Any]] = field(default_factory=dict)


def run_round(backend: RealBackend, cases: list[Translated]) -> Answers:
    """Create the cases' objects, make sure kube-scheduler holds them, then create their
    pods; wait until kube-scheduler decided every pod and every bound pod's claims
    showed their allocation."""
    pods_path = f"/api/v1/namespaces/{backend.ns}/pods"
    claims_path = f"{RESOURCE}/namespaces/{backend.ns}/resourceclaims"
    answers = Answers()
    with backend.watching(pods_path) as pod_events, backend.watching(claims_path) as claim_events:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda t: create_case(backend, t), cases))
        live = [t for t in cases if t.refused is None]
        scheduler_sees_objects(backend, f"sync-{cases[0].prefix}", probe_node(cases))
        with ThreadPoolExecutor(8) as pool:
            created = list(pool.map(lambda t: backend.create(pods_path, pod(t)), live))
        for t, body in zip(live, created, strict=True):
            t.created.append(body)  # draco reads the pod's tolerations from its input
        names = {t.pod_name for t in live}
        claims_of = {t.pod_name: t.claim_names for t in live}
        deadline = time.monotonic() + 60
        ready: set[str] = set()
        while True:
            answers.verdicts = verdicts(list(pod_events), names)
            events = list(claim_events)
            for event in events:
                c = event["object"]
                allocation = (c.get("status") or {}).get("allocation")
                if allocation is not None:
                    answers.allocations.setdefault(c["metadata"]["name"], allocation)
            report_ready(backend, events, ready)
            waiting = sorted(names - answers.verdicts.keys()) + sorted(
                claim for name, (verdict, _) in answers.verdicts.items() if verdict == "scheduled"
                for claim in claims_of[name] if claim not in answers.allocations)
            if not waiting:
                return answers
            assert time.monotonic() < deadline, \
                f"kube-scheduler did not decide (pods) or allocate (claims) {waiting} in 60 s"
            time.sleep(0.1)


def report_ready(backend: RealBackend, events: list[dict[str, Any]], done: set[str]) -> None:
    """Play the driver of devices with binding conditions (KEP-5007): once kube-scheduler
    allocated such a claim, report every binding condition True in `status.devices`, so
    that its PreBind (which polls every 5 s) lets the pod bind."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for event in events:
        c = event["object"]
        name = c["metadata"]["name"]
        results = (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
        waiting = [r for r in results if r.get("bindingConditions")]
        if name in done or not waiting:
            continue
        done.add(name)
        backend.merge_patch(f"{RESOURCE}/namespaces/{backend.ns}/resourceclaims/{name}/status", {
            "status": {"devices": [
                {"driver": r["driver"], "pool": r["pool"], "device": r["device"],
                 **({"shareID": r["shareID"]} if r.get("shareID") else {}),
                 "conditions": [{"type": t, "status": "True", "lastTransitionTime": now,
                                 "reason": "Ready", "message": "ready"} for t in r["bindingConditions"]]}
                for r in waiting]}})


def _results(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The fields both sides must agree on; a share ID only by being there (upstream
    draws a random one)."""
    return [{k: r[k] for k in ("request", "driver", "pool", "device")}
            | ({"adminAccess": True} if r.get("adminAccess") else {})
            | ({"shared": True} if r.get("shareID") else {})
            | ({"consumedCapacity": r["consumedCapacity"]} if r.get("consumedCapacity") else {})
            | ({"binding": r["bindingConditions"], "failure": r.get("bindingFailureConditions")}
               if r.get("bindingConditions") else {})
            for r in results]


class Draco:
    """`draco allocate --from WORLD --claim … --node NODE -o json` for many cases: the
    file is read once (what the command does before `document`), and the first case
    also goes through the whole command line, which must answer the same."""

    def __init__(self, world: Path) -> None:
        self.world = world
        args = build_parser().parse_args(["allocate", "--from", str(world), "-o", "json"])
        self.tracker, self.objects = load_state(args)
        self.checked_cli = False

    def answer(self, t: Translated, ns: str) -> dict[str, Any]:
        claims = [NamespacedName(ns, n) for n in t.claim_names]
        doc = json.loads(json.dumps(document(self.tracker, self.objects, claims, t.node,
                                             DEFAULT_BUDGET_S)))
        if not self.checked_cli:
            argv = ["allocate", "--from", str(self.world), "-o", "json"]
            argv += ["--node", t.node] if t.node else []
            for name in t.claim_names:
                argv += ["--claim", f"{ns}/{name}"]
            out = io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
                assert main(argv) == 0
            assert json.loads(out.getvalue()) == doc
            self.checked_cli = True
        return dict(doc["claims"])


def config_136(config: list[dict[str, Any]], requests: int) -> list[dict[str, Any]]:
    """Allocation config as kube-scheduler 1.37 writes it, from 1.36's: 1.36 keeps the
    `requests` of an entry that names every request of the claim (1.37 clears them:
    "all") and repeats a claim config once per allocated request it names (1.37 writes
    it once). The same configuration reaches the driver either way; draco writes 1.37's
    form on every version, and on 1.36 the two are compared in that form."""
    out: list[dict[str, Any]] = []
    for entry in config:
        entry = dict(entry)
        if len(entry.get("requests") or []) == requests:
            entry.pop("requests", None)
        if not out or out[-1] != entry:
            out.append(entry)
    return out


def compare(backend: RealBackend, t: Translated, answers: Answers, draco: Draco) -> list[str]:
    """What differs between kube-scheduler's and draco's answer for one case."""
    verdict = answers.verdicts[t.pod_name]
    ours = draco.answer(t, backend.ns)
    scheduled = verdict[0] == "scheduled"
    allocated = all(ours[f"{backend.ns}/{n}"]["allocated"] for n in t.claim_names)
    if scheduled != allocated:
        why = next((r["reason"] for r in ours.values() if r["reason"]), None)
        return [f"kube-scheduler: {verdict[0]} ({verdict[1]}); draco allocated={allocated} ({why})"]
    if not scheduled or t.case.get("ties"):
        return []
    diffs = []
    if t.node is None:
        mine_node = next(iter(ours.values()))["node"]
        if mine_node != verdict[1]:
            diffs.append(f"node: kube-scheduler {verdict[1]}, draco {mine_node}")
    old_config = backend.cluster.version.startswith("v1.36")
    for name in t.claim_names:
        theirs = answers.allocations[name]
        mine = ours[f"{backend.ns}/{name}"]
        their_config, my_config = theirs["devices"].get("config") or [], mine["config"]
        if old_config:
            requests = len(next(c for c in t.claims if c["metadata"]["name"] == name)
                           ["spec"]["devices"]["requests"])
            their_config, my_config = config_136(their_config, requests), config_136(my_config, requests)
        pairs = [("results", _results(theirs["devices"]["results"]), _results(mine["results"])),
                 ("nodeSelector", theirs.get("nodeSelector"), mine["nodeSelector"]),
                 ("config", their_config, my_config)]
        diffs += [f"{name} {what}: kube-scheduler {a}, draco {b}" for what, a, b in pairs if a != b]
    return diffs


@contextlib.contextmanager
def labelled(backend: RealBackend, cases: list[Translated]) -> Iterator[None]:
    """The table's node labels on the cluster's nodes, and admin access in the namespace,
    both held by the components that read them before the block runs."""
    labels: dict[str, dict[str, str]] = {}
    for t in cases:
        for node, node_labels in t.labels.items():
            for k, v in node_labels.items():
                assert labels.setdefault(node, {}).setdefault(k, v) == v, (node, k)
    backend.merge_patch(f"/api/v1/namespaces/{backend.ns}",
                        {"metadata": {"labels": {ADMIN_LABEL: "true"}}})
    admits_admin_access(backend)
    for node, node_labels in labels.items():
        backend.merge_patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": node_labels}})
    scheduler_sees_nodes(backend, labels)
    try:
        yield
    finally:
        for node, node_labels in labels.items():
            backend.merge_patch(f"/api/v1/nodes/{node}",
                                {"metadata": {"labels": dict.fromkeys(node_labels)}})
        scheduler_sees_nodes(backend, labels)


def admits_admin_access(backend: RealBackend) -> None:
    """kube-apiserver admits admin-access claims in the namespace: it checks the
    namespace's label in its own cache of namespaces, so a claim created right after
    the label could still be refused; a dry-run claim shows when it is not."""
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "admin-probe"},
             "spec": {"devices": {"requests": [{"name": "r", "exactly": {
                 "deviceClassName": "admin-probe", "adminAccess": True}}]}}}
    path = f"{RESOURCE}/namespaces/{backend.ns}/resourceclaims?dryRun=All"
    wait_for(lambda: backend.request("POST", path, claim)[0] == 201, 30,
             what="kube-apiserver to admit admin-access claims in the labelled namespace")


@contextlib.contextmanager
def tainted(backend: RealBackend, cases: list[Translated]) -> Iterator[None]:
    """The case's node taints and cordons on the real nodes (one tainting case per round),
    removed afterwards, kube-scheduler holding each state before the next step; nothing
    for the other rounds."""
    nodes = [n for t in cases if taints_nodes(t.case) for n in t.case["nodes"]]
    if not nodes:
        yield
        return
    assert len(cases) == 1, "a round that taints nodes has one case"
    changed = [NODES[n["name"]] for n in nodes if n.get("taints") or n.get("unschedulable")]
    for n in nodes:
        backend.merge_patch(f"/api/v1/nodes/{NODES[n['name']]}", {"spec": {
            "taints": n.get("taints") or None, "unschedulable": n.get("unschedulable") or None}})
    scheduler_sees_nodes(backend, changed)
    try:
        yield
    finally:
        for n in nodes:
            backend.merge_patch(f"/api/v1/nodes/{NODES[n['name']]}",
                                {"spec": {"taints": None, "unschedulable": None}})
        # uncordoning: the node lifecycle controller removes its unschedulable taint a
        # moment later; the next round must not see it
        wait_for(lambda: not any((n.get("spec") or {}).get("taints") or (n.get("spec") or {}).get("unschedulable")
                                 for n in (backend.get("/api/v1/nodes") or {})["items"]),
                 30, what="the nodes to be untainted again")
        scheduler_sees_nodes(backend, changed)


def delete_slices(backend: RealBackend, cases: list[Translated]) -> None:
    for t in cases:
        for sl in t.slices:
            code, body = backend.request("DELETE", f"{RESOURCE}/resourceslices/{sl['metadata']['name']}")
            assert code in (200, 404), body
        t.created = [o for o in t.created if o["kind"] != "ResourceSlice"]


def run_rounds(backend: RealBackend, rounds: list[list[Translated]], done: list[Translated],
               workdir: Path, keep_last: int) -> dict[str, list[str]]:
    """Each round: create, let kube-scheduler decide, ask draco over everything created so
    far; the slices of all but the last `keep_last` rounds are deleted afterwards."""
    mismatches: dict[str, list[str]] = {}
    for number, cases in enumerate(rounds):
        with tainted(backend, cases):
            nodes = [{"apiVersion": "v1", "kind": "Node", **n}
                     for n in (backend.get("/api/v1/nodes") or {})["items"]]
            answers = run_round(backend, cases)
        done += cases
        world = workdir / f"round-{cases[0].prefix}.json"
        world.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": nodes + [
            o for t in done for o in t.created]}))
        draco = Draco(world)
        for t in cases:
            if t.refused is None:
                diffs = compare(backend, t, answers, draco)
                if diffs:
                    mismatches[t.case["name"]] = diffs
        if number < len(rounds) - keep_last:
            delete_slices(backend, cases)
    return mismatches


def test_draco_allocates_as_kube_scheduler_137(private_137: RealBackend, tmp_path: Path) -> None:
    differential(private_137, tmp_path, "v1.37")


def test_draco_allocates_as_kube_scheduler_136(private_136: RealBackend, tmp_path: Path) -> None:
    """1.36: partitionable devices, consumable capacity and binding conditions beta and on
    by default, as in 1.37 (DeviceTaintRule's API is off; the table needs none)."""
    differential(private_136, tmp_path, "v1.36")


def differential(backend: RealBackend, tmp_path: Path, version: str) -> None:
    assert backend.cluster.version.startswith(version), backend.cluster.version
    # Node choice first, while both nodes are empty: kube-scheduler's other score plugins
    # then rate them alike and DynamicResources' KEP-4816 score decides.
    placing = [translate(i, c, backend.ns, placing=True) for i, c in enumerate(NODE_CASES)]
    assert not any(unscoped(t.case) or spoils_all(t.case) for t in placing)
    done: list[Translated] = []
    with labelled(backend, placing):
        rounds = [[t for t in placing if not taints_nodes(t.case)]]
        rounds += [[t] for t in placing if taints_nodes(t.case)]
        mismatches = run_rounds(backend, rounds, done, tmp_path, keep_last=0)
    # `since`: upstream's allocator changed its answer in that release; draco gives the
    # newer one (its reference is 1.37), so older kube-schedulers are not asked.
    minor = int(version.split(".")[1])
    translated = [translate(i, c, backend.ns) for i, c in enumerate(CASES)
                  if not_expressible(c) is None
                  and int(str(c.get("since", "1.0")).split(".")[1]) <= minor]
    rounds = [[t] for t in translated if unscoped(t.case)]
    rounds.append([t for t in translated if not unscoped(t.case) and not spoils_all(t.case)])
    rounds.append([t for t in translated if not unscoped(t.case) and spoils_all(t.case)])
    with labelled(backend, translated):
        mismatches |= run_rounds(backend, rounds, done, tmp_path, keep_last=2)
    refused = {t.case["name"]: t.refused or "" for t in translated if t.refused is not None}
    assert not mismatches, json.dumps(mismatches, indent=1)
    assert refused.keys() == REFUSED.keys(), json.dumps(refused, indent=1)
    for name, why in REFUSED.items():
        assert why in refused[name], refused[name]
    assert len(translated) - len(refused) >= 70
