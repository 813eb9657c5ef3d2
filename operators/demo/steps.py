"""The demo's steps: each one acts, then waits until the API shows that what it
narrated happened, within a timeout; otherwise it stops the demo with StepFailed."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from operators.demo import scenario as sc
from operators.demo.api import Api
from operators.demo.narrate import Narrator

T = TypeVar("T")
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
CONDITION = "EvictionInProgress"


class StepFailed(Exception):
    """A step did not happen as narrated; the message says what was expected and seen."""


@dataclass
class Views:
    """draco's view commands, run in-process against the demo's cluster."""

    allocate: Callable[[str], dict[str, Any]]  # "ns/name" -> that claim's `draco allocate` record
    evictions: Callable[[], tuple[str, dict[str, Any]]]  # `draco evictions`: (table, document)


@dataclass
class Context:
    api: Api
    names: sc.Names
    real: bool
    say: Narrator
    views: Views
    timeout: float
    bind: Callable[[str, str, str], None] | None = None  # (namespace, pod, node): no scheduler here
    uids: dict[str, str] = field(default_factory=dict)

    def wait(self, what: str, check: Callable[[], T | None], seen: Callable[[], str] | None = None,
             timeout: float | None = None) -> tuple[T, float]:
        """Poll `check` until it returns something; (that, seconds waited)."""
        limit = self.timeout if timeout is None else timeout
        start = time.monotonic()
        while True:
            value = check()
            if value:
                return value, time.monotonic() - start
            if time.monotonic() - start > limit:
                detail = f"; seen: {seen()}" if seen is not None else ""
                raise StepFailed(f"{what}: did not happen within {limit:g} s{detail}")
            time.sleep(0.1)


# -- reading objects ---------------------------------------------------------------------

def results(claim: dict[str, Any] | None) -> list[dict[str, Any]]:
    alloc = ((claim or {}).get("status") or {}).get("allocation") or {}
    return list((alloc.get("devices") or {}).get("results") or [])


def reserved_for(claim: dict[str, Any] | None) -> list[str]:
    return [r.get("name", "") for r in ((claim or {}).get("status") or {}).get("reservedFor") or []]


def gates(pod: dict[str, Any]) -> list[str]:
    return [g.get("name", "") for g in pod.get("spec", {}).get("schedulingGates") or []]


def describe_terms(selector: dict[str, Any] | None) -> str:
    terms = []
    for term in (selector or {}).get("nodeSelectorTerms") or []:
        parts = [f"{r['key']} {r['operator']} {','.join(r.get('values') or [])}"
                 for r in (term.get("matchFields") or []) + (term.get("matchExpressions") or [])]
        terms.append(" and ".join(parts))
    return " or ".join(terms) or "(any node)"


def _requirement_holds(req: dict[str, Any], value: str | None) -> bool:
    op, values = req.get("operator"), req.get("values") or []
    if op == "In":
        return value in values
    if op == "NotIn":
        return value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    return False  # Gt/Lt: not in the demo's affinities


def node_matches(selector: dict[str, Any] | None, node: dict[str, Any]) -> bool:
    """Whether a required node affinity admits the node (for the demo's own binding)."""
    meta = node.get("metadata") or {}
    labels = meta.get("labels") or {}
    terms = (selector or {}).get("nodeSelectorTerms") or []
    return not terms or any(
        all(_requirement_holds(r, meta.get("name") if r.get("key") == "metadata.name" else None)
            for r in term.get("matchFields") or [])
        and all(_requirement_holds(r, labels.get(r.get("key"))) for r in term.get("matchExpressions") or [])
        for term in terms)


def devices_of(found: list[dict[str, Any]]) -> str:
    return ", ".join(f"{r['pool']}/{r['device']}" for r in found)


def condition(rule: dict[str, Any] | None) -> dict[str, Any] | None:
    return next((c for c in ((rule or {}).get("status") or {}).get("conditions") or []
                 if c.get("type") == CONDITION), None)


# -- the steps ---------------------------------------------------------------------------

def the_cluster(ctx: Context) -> None:
    n = ctx.names
    ctx.say.table([
        (n.node_a, "2 x H100 80Gi", f"driver {sc.GPU_DRIVER}, pool {n.node_a}"),
        (n.node_b, "2 x A100 40Gi", f"driver {sc.GPU_DRIVER}, pool {n.node_b}"),
        (n.fabric_pool, "1 x FPGA", f"driver {sc.FABRIC_DRIVER}: network-attached, reachable from both nodes"),
        ("classes", f"{sc.GPU_CLASS}, {sc.FPGA_CLASS}", "DeviceClasses selecting each driver's devices"),
    ])
    for obj in sc.devices(n):
        ctx.api.create(obj)
    slices = [o["metadata"]["name"] for o in sc.devices(n) if o["kind"] == "ResourceSlice"]
    _, took = ctx.wait("the ResourceSlices to be served",
                       lambda: all(ctx.api.get("ResourceSlice", s) for s in slices))
    ctx.say.ok(f"{len(slices)} ResourceSlices and 2 DeviceClasses created", took)
    if ctx.real:
        def ready(name: str) -> bool:
            node = ctx.api.get("Node", name) or {}
            return any(c.get("type") == "Ready" and c.get("status") == "True"
                       for c in (node.get("status") or {}).get("conditions") or [])
        _, took = ctx.wait("the demo's nodes to be Ready", lambda: ready(n.node_a) and ready(n.node_b))
        ctx.say.ok(f"{n.node_a} and {n.node_b} are Ready (kwok plays their kubelets)", took)


def the_patch(ctx: Context) -> None:
    ctx.say.say(f"ResourceSlicePatch {sc.PATCH} gives every H100 the attribute example.com/tier=premium. "
                "The ResourceSlices stay as the driver published them: the attribute exists only in "
                "draco's device view, which draco's allocator uses.")
    ctx.api.create(sc.slice_patch())

    def faulty(status: dict[str, Any]) -> dict[str, Any]:
        return next((c for c in status.get("conditions") or [] if c.get("type") == "Faulty"), {})

    def reported() -> dict[str, Any] | None:
        # The reporter may first count the patch against a device view that has not seen the
        # slices' watch events yet (separate watch streams) and correct itself when they arrive,
        # so wait for the expected report rather than taking the first one.
        status = (ctx.api.get("ResourceSlicePatch", sc.PATCH) or {}).get("status") or {}
        good = status.get("matchedDevices") == 2 and faulty(status).get("status") == "False"
        return status if good else None

    def seen() -> str:
        status = (ctx.api.get("ResourceSlicePatch", sc.PATCH) or {}).get("status") or {}
        if "matchedDevices" not in status:
            return "no status yet"
        cond = faulty(status)
        return (f"matchedDevices={status['matchedDevices']}, Faulty={cond.get('status')} "
                f"{cond.get('message', '')}").rstrip()

    status, took = ctx.wait(f"{sc.PATCH}'s status to report 2 matched devices and no faults", reported, seen)
    ctx.say.ok(f"status: matchedDevices=2, Faulty=False ({faulty(status).get('reason')})", took)


def _create_workload(ctx: Context, pod: str, claim: dict[str, Any]) -> None:
    ctx.api.create(claim)
    created = ctx.api.create(sc.gated_pod(pod, claim["metadata"]["name"], ctx.names))
    ctx.uids[pod] = created["metadata"]["uid"]


def _allocated(ctx: Context, pod: str, claim: str) -> tuple[list[dict[str, Any]], dict[str, Any], float]:
    ns = ctx.names.namespace

    def done() -> dict[str, Any] | None:
        found = ctx.api.get("ResourceClaim", claim, ns)
        return found if results(found) and pod in reserved_for(found) else None

    def seen() -> str:
        found = ctx.api.get("ResourceClaim", claim, ns)
        if not results(found):
            return f"claim {claim} is not allocated"
        return f"claim {claim} is allocated ({devices_of(results(found))}) but reserved for {reserved_for(found)}"

    found, took = ctx.wait(f"draco's allocator to allocate claim {claim} for pod {pod}", done, seen)
    return results(found), found, took


def _narrowed(ctx: Context, pod: str, claim: dict[str, Any]) -> None:
    ns = ctx.names.namespace

    def done() -> dict[str, Any] | None:
        found = ctx.api.get("Pod", pod, ns) or {}
        return found if found and sc.GATE not in gates(found) else None

    def seen() -> str:
        found = ctx.api.get("Pod", pod, ns)
        if not found:
            return f"pod {pod} is gone"
        conds = [f"{c.get('type')}={c.get('status')} {c.get('reason', '')}".strip()
                 for c in (found.get("status") or {}).get("conditions") or []]
        return f"gates {gates(found)}" + (f", conditions {conds}" if conds else "")

    found, took = ctx.wait(f"draco's narrowing controller to ungate pod {pod}", done, seen)
    affinity = ((found["spec"].get("affinity") or {}).get("nodeAffinity") or {}).get(REQUIRED)
    wanted = ((claim.get("status") or {}).get("allocation") or {}).get("nodeSelector")
    if wanted and not affinity:
        raise StepFailed(f"pod {pod} was ungated without the node affinity of its allocation "
                         f"({describe_terms(wanted)})")
    ctx.say.ok(f"{'narrowed':<10} node affinity {describe_terms(affinity)}; draco's gate removed", took)
    if ctx.bind is not None:
        nodes = [nd for nd in (ctx.names.node_a, ctx.names.node_b)
                 if node_matches(affinity, ctx.api.get("Node", nd) or {})]
        if not nodes:
            raise StepFailed(f"pod {pod}: no node of the demo matches its node affinity {describe_terms(affinity)}")
        ctx.bind(ns, pod, nodes[0])
        bound, took = ctx.wait(f"pod {pod} to be bound to {nodes[0]}",
                               lambda: (ctx.api.get("Pod", pod, ns) or {}).get("spec", {}).get("nodeName"))
        ctx.say.ok(f"{'bound':<10} to {bound} by the demo itself: the embedded server has no scheduler", took)
    if ctx.real:
        bound, took = ctx.wait(f"kube-scheduler to bind pod {pod}",
                               lambda: (ctx.api.get("Pod", pod, ns) or {}).get("spec", {}).get("nodeName"))
        ctx.say.ok(f"{'bound':<10} kube-scheduler put {pod} on {bound} (spec.nodeName)", took)


def inference(ctx: Context) -> None:
    n = ctx.names
    ctx.say.say(f"Pod inference-0 is created with draco's scheduling gate {sc.GATE}: kube-scheduler "
                "leaves it alone until draco has allocated its claim and narrowed it to the right nodes. "
                "Its claim asks for one GPU with tier=premium, which only the patch provides.")
    if not ctx.real:
        ctx.say.say("The embedded server has no scheduler: once draco ungates a pod, the demo binds it to "
                    "the first node its affinity allows, as kube-scheduler would (draco demo --cluster-dir "
                    "shows kube-scheduler doing it).")
    _create_workload(ctx, "inference-0", sc.inference_claim(n))
    found, claim, took = _allocated(ctx, "inference-0", "inference")
    if len(found) != 1 or found[0]["pool"] != n.node_a:
        raise StepFailed(f"claim inference: expected one premium H100 of {n.node_a}, got {devices_of(found)}")
    ctx.say.ok(f"{'allocated':<10} {found[0]['request']} -> {devices_of(found)}, reserved for inference-0", took)
    _narrowed(ctx, "inference-0", claim)


def training(ctx: Context) -> None:
    n = ctx.names
    ctx.say.say("Pod training-0's claim is a prioritized list (firstAvailable): two H100s if it can "
                "have them, else two A100s. inference-0 holds one of the two H100s.")
    _create_workload(ctx, "training-0", sc.training_claim(n))
    found, claim, took = _allocated(ctx, "training-0", "training")
    chosen = {r["request"] for r in found}
    if chosen != {"gpus/a100-pair"} or len(found) != 2:
        raise StepFailed(f"claim training: expected the second choice gpus/a100-pair (two A100s), got "
                         f"{', '.join(sorted(chosen)) or 'nothing'}: {devices_of(found)}")
    ctx.say.ok(f"{'allocated':<10} gpus/a100-pair (the second choice) -> {devices_of(found)}", took)
    _narrowed(ctx, "training-0", claim)


def etl(ctx: Context) -> None:
    ctx.say.say("Pod etl-0 asks for the network-attached FPGA: its allocation allows every node "
                "the FPGA is reachable from, and so does the pod's narrowed node affinity.")
    _create_workload(ctx, "etl-0", sc.etl_claim(ctx.names))
    found, claim, took = _allocated(ctx, "etl-0", "etl")
    if [r["driver"] for r in found] != [sc.FABRIC_DRIVER]:
        raise StepFailed(f"claim etl: expected the FPGA of {ctx.names.fabric_pool}, got {devices_of(found)}")
    selector = ((claim.get("status") or {}).get("allocation") or {}).get("nodeSelector")
    ctx.say.ok(f"{'allocated':<10} fpga -> {devices_of(found)}, usable on {describe_terms(selector)}", took)
    _narrowed(ctx, "etl-0", claim)


def unsatisfiable(ctx: Context) -> None:
    ns = ctx.names.namespace
    ctx.say.say("Claim too-big asks for three H100s; the cluster has two. draco allocate explains why "
                "it cannot be allocated (a gated pod using it would stay gated, with this reason).")
    ctx.api.create(sc.too_big_claim(ctx.names))
    record = ctx.views.allocate(f"{ns}/too-big")
    if record.get("allocated"):
        raise StepFailed(f"draco allocate allocated claim too-big ({record.get('results')}); three H100s "
                         "should not exist")
    ctx.say.line(f"      $ draco allocate --claim {ns}/too-big")
    reason, _, why = str(record.get("reason")).partition(f": claim {ns}/too-big: ")
    ctx.say.table([("allocated", "no"), ("reason", reason), ("explain", why)] if why
                  else [("allocated", "no"), ("reason", reason)], indent="        ")
    ctx.say.ok("explained, and nothing was written: the claim is still unallocated")
    if results(ctx.api.get("ResourceClaim", "too-big", ns)):
        raise StepFailed("claim too-big got an allocation")


def preview(ctx: Context) -> None:
    n = ctx.names
    ctx.say.say(f"DeviceTaintRule {sc.RULE} taints {n.node_a}'s GPUs with example.com/maintenance=planned "
                "and effect None: nothing is evicted, the rule's status says what NoExecute would do.")
    ctx.api.create(sc.taint_rule("None", n))

    def previewed() -> dict[str, Any] | None:
        cond = condition(ctx.api.get("DeviceTaintRule", sc.RULE))
        return cond if cond and cond.get("reason") == "NoEffect" else None

    cond, took = ctx.wait(f"the eviction controller to preview {sc.RULE}", previewed,
                          lambda: str(condition(ctx.api.get("DeviceTaintRule", sc.RULE))))
    ctx.say.ok(f"{CONDITION}={cond['status']} {cond['reason']}", took)
    ctx.say.say(f"message: {cond.get('message', '')}")
    table, doc = ctx.views.evictions()
    ctx.say.verbatim(table, "draco evictions")
    pods = (doc.get("rules") or {}).get(sc.RULE, {}).get("podsToEvict")
    if pods != 1:
        raise StepFailed(f"draco evictions: expected 1 pod that NoExecute would evict (inference-0), got {pods}")
    if ctx.api.get("Pod", "inference-0", n.namespace) is None:
        raise StepFailed("pod inference-0 was evicted by a rule with effect None")


def evict(ctx: Context) -> None:
    n = ctx.names
    ctx.say.line(f"      $ kubectl patch devicetaintrule {sc.RULE} --type merge "
                 "-p '{\"spec\":{\"taint\":{\"effect\":\"NoExecute\"}}}'")
    rule = ctx.api.merge_patch("DeviceTaintRule", sc.RULE, {"spec": {"taint": {"effect": "NoExecute"}}})
    generation = int(rule["metadata"].get("generation") or 0)
    seen_true: list[dict[str, Any]] = []

    def gone() -> bool:
        cond = condition(ctx.api.get("DeviceTaintRule", sc.RULE))
        if cond and cond.get("status") == "True" and not seen_true:
            seen_true.append(cond)
        pod = ctx.api.get("Pod", "inference-0", n.namespace)
        return pod is None or pod["metadata"].get("uid") != ctx.uids.get("inference-0")

    _, took = ctx.wait("draco's eviction controller to evict pod inference-0", gone)
    ctx.say.ok(f"{'evicted':<10} inference-0: its GPU is tainted NoExecute and the pod does not tolerate it",
               took)
    if seen_true:
        ctx.say.ok(f"{'meanwhile':<10} {CONDITION}=True {seen_true[0].get('reason')}: "
                   f"{seen_true[0].get('message', '')}")
    kept = [p for p in ("training-0", "etl-0") if ctx.api.get("Pod", p, n.namespace) is not None]
    if len(kept) != 2:
        raise StepFailed(f"pods whose devices are not tainted were evicted: only {kept} are left")
    ctx.say.ok(f"{'untouched':<10} training-0 and etl-0: their devices carry no taint")

    def finished() -> dict[str, Any] | None:
        cond = condition(ctx.api.get("DeviceTaintRule", sc.RULE))
        # draco stamps timeAdded when the effect changes: a later generation is fine.
        if cond and cond.get("status") == "False" and int(cond.get("observedGeneration") or 0) >= generation:
            return cond
        return None

    cond, took = ctx.wait(f"{CONDITION} of {sc.RULE} to turn False", finished,
                          lambda: str(condition(ctx.api.get("DeviceTaintRule", sc.RULE))))
    ctx.say.ok(f"{CONDITION}=False {cond.get('reason')}: {cond.get('message', '')}", took)
    ctx.say.say("draco holds the condition back for a grace period (5 s) after the effect changes, so "
                f"that a pod placed meanwhile is not missed. `kubectl wait --for=condition={CONDITION}=false "
                f"devicetaintrule/{sc.RULE}` returns now.")


@dataclass(frozen=True)
class Step:
    key: str
    title: str
    run: Callable[[Context], None]


STEPS: tuple[Step, ...] = (
    Step("cluster", "An example cluster: two GPU models and a network-attached FPGA", the_cluster),
    Step("patch", "A ResourceSlicePatch marks the H100s premium", the_patch),
    Step("inference", "inference-0: one premium GPU", inference),
    Step("training", "training-0: a prioritized list", training),
    Step("etl", "etl-0: the network-attached FPGA", etl),
    Step("unsatisfiable", "A claim that cannot be satisfied", unsatisfiable),
    Step("preview", "Maintenance preview: a DeviceTaintRule with effect None", preview),
    Step("evict", "The same rule with effect NoExecute", evict),
)
