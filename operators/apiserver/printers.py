"""Upstream's default table columns for the built-in kinds people list most.

kube-apiserver renders `kubectl get` tables itself, with every column (priority 1
columns are the ones `-o wide` adds), so kubectl shows what the server sends. The
columns and cell rules follow upstream's printers for these kinds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Row = list[Any]
Age = Callable[[Any], str]


def _col(name: str, priority: int = 0, fmt: str = "", description: str = "") -> dict[str, Any]:
    return {"name": name, "type": "string", "format": fmt, "description": description,
            "priority": priority}


NAME = _col("Name", fmt="name", description="Name of the object.")
AGE = _col("Age", description="Time since the object was created.")


def _containers_ready(pod: dict[str, Any]) -> tuple[int, int, str, int]:
    """(ready, total, reason, restarts) as upstream's pod printer derives them."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    phase = status.get("phase") or ""
    reason = status.get("reason") or phase
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    sidecars = {c.get("name") for c in spec.get("initContainers") or []
                if c.get("restartPolicy") == "Always"}
    total = len(spec.get("containers") or []) + len(sidecars)
    ready = restarts = sidecar_restarts = 0
    initializing = False
    inits = status.get("initContainerStatuses") or []
    for i, cs in enumerate(inits):
        restarts += int(cs.get("restartCount") or 0)
        if cs.get("name") in sidecars:
            sidecar_restarts += int(cs.get("restartCount") or 0)
        state = cs.get("state") or {}
        term, waiting = state.get("terminated"), state.get("waiting")
        if term is not None and term.get("exitCode", 0) == 0:
            continue
        if cs.get("name") in sidecars and cs.get("started"):
            ready += 1 if cs.get("ready") else 0
            continue
        if term is not None:
            reason = "Init:" + (term.get("reason") or (f"Signal:{term['signal']}" if term.get("signal")
                                                       else f"ExitCode:{term.get('exitCode', 0)}"))
        elif waiting is not None and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = "Init:" + waiting["reason"]
        else:
            reason = f"Init:{i}/{len(spec.get('initContainers') or [])}"
        initializing = True
        break
    initialized = any(c.get("type") == "Initialized" and c.get("status") == "True"
                      for c in status.get("conditions") or [])
    if not initializing or initialized:
        restarts = sidecar_restarts
        running = False
        for cs in reversed(status.get("containerStatuses") or []):
            restarts += int(cs.get("restartCount") or 0)
            state = cs.get("state") or {}
            waiting, term = state.get("waiting") or {}, state.get("terminated")
            if waiting.get("reason"):
                reason = waiting["reason"]
            elif term is not None and term.get("reason"):
                reason = term["reason"]
            elif term is not None:
                reason = f"Signal:{term['signal']}" if term.get("signal") else f"ExitCode:{term.get('exitCode', 0)}"
            elif cs.get("ready") and state.get("running") is not None:
                running = True
                ready += 1
        if reason == "Completed" and running:
            has_ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                            for c in status.get("conditions") or [])
            reason = "Running" if has_ready else "NotReady"
    deleting = (pod.get("metadata") or {}).get("deletionTimestamp")
    if deleting and status.get("reason") == "NodeLost":
        reason = "Unknown"
    elif deleting and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"
    return ready, total, reason, restarts


def pod_row(pod: dict[str, Any], age: Age) -> Row:
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    ready, total, reason, restarts = _containers_ready(pod)
    ips = status.get("podIPs") or []
    ip = (ips[0].get("ip") if ips else "") or "<none>"
    gates = spec.get("readinessGates") or []
    gate_text = "<none>"
    if gates:
        conds = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
        gate_text = f"{sum(conds.get(g.get('conditionType')) == 'True' for g in gates)}/{len(gates)}"
    return [meta.get("name", ""), f"{ready}/{total}", reason, str(restarts),
            age(meta.get("creationTimestamp")), ip, spec.get("nodeName") or "<none>",
            status.get("nominatedNodeName") or "<none>", gate_text]


POD_COLUMNS = [NAME, _col("Ready", description="Ready containers of all containers."),
               _col("Status", description="The aggregate status of the containers."),
               _col("Restarts", description="Container restarts."), AGE,
               _col("IP", 1), _col("Node", 1), _col("Nominated Node", 1), _col("Readiness Gates", 1)]


def event_row(ev: dict[str, Any], age: Age) -> Row:
    first = age(ev.get("firstTimestamp")) if ev.get("firstTimestamp") else age(ev.get("eventTime"))
    last = age(ev.get("lastTimestamp")) if ev.get("lastTimestamp") else first
    count = ev.get("count") or 1
    series = ev.get("series")
    if isinstance(series, dict):
        last, count = age(series.get("lastObservedTime")), series.get("count") or count
    obj = ev.get("involvedObject") or {}
    kind = str(obj.get("kind") or "").lower()
    target = f"{kind}/{obj['name']}" if obj.get("name") else kind
    source = ev.get("source") or {}
    component = source.get("component") or ev.get("reportingComponent") or ""
    instance = source.get("host") or ev.get("reportingInstance") or ""
    return [last, ev.get("type", ""), ev.get("reason", ""), target, obj.get("fieldPath", ""),
            f"{component}, {instance}" if instance else component,
            str(ev.get("message") or "").strip(), first, int(count),
            (ev.get("metadata") or {}).get("name", "")]


EVENT_COLUMNS = [_col("Last Seen"), _col("Type"), _col("Reason"), _col("Object"),
                 _col("Subobject", 1), _col("Source", 1), _col("Message"), _col("First Seen", 1),
                 _col("Count", 1), _col("Name", 1, fmt="name")]


def node_row(node: dict[str, Any], age: Age) -> Row:
    meta, status = node.get("metadata") or {}, node.get("status") or {}
    ready = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"]
    state = ["Ready" if ready[0].get("status") == "True" else "NotReady"] if ready else ["Unknown"]
    if (node.get("spec") or {}).get("unschedulable"):
        state.append("SchedulingDisabled")
    labels = meta.get("labels") or {}
    roles = sorted({k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/")}
                   | ({labels["kubernetes.io/role"]} if labels.get("kubernetes.io/role") else set()))
    info = status.get("nodeInfo") or {}
    addrs = status.get("addresses") or []

    def addr(kind: str) -> str:
        return next((a.get("address", "") for a in addrs if a.get("type") == kind), "<none>")
    return [meta.get("name", ""), ",".join(state), ",".join(r for r in roles if r) or "<none>",
            age(meta.get("creationTimestamp")), info.get("kubeletVersion", ""),
            addr("InternalIP"), addr("ExternalIP"), info.get("osImage") or "<unknown>",
            info.get("kernelVersion") or "<unknown>", info.get("containerRuntimeVersion") or "<unknown>"]


NODE_COLUMNS = [NAME, _col("Status"), _col("Roles"), AGE, _col("Version"), _col("Internal-IP", 1),
                _col("External-IP", 1), _col("OS-Image", 1), _col("Kernel-Version", 1),
                _col("Container-Runtime", 1)]


def namespace_row(ns: dict[str, Any], age: Age) -> Row:
    meta = ns.get("metadata") or {}
    return [meta.get("name", ""), (ns.get("status") or {}).get("phase", ""),
            age(meta.get("creationTimestamp"))]


def claim_row(claim: dict[str, Any], age: Age) -> Row:
    meta, status = claim.get("metadata") or {}, claim.get("status") or {}
    states = ["deleted"] if meta.get("deletionTimestamp") else []
    if status.get("allocation") is None:
        if not meta.get("deletionTimestamp"):
            states.append("pending")
    else:
        states.append("allocated")
        if status.get("reservedFor"):
            states.append("reserved")
    return [meta.get("name", ""), ",".join(states), age(meta.get("creationTimestamp"))]


def slice_row(rs: dict[str, Any], age: Age) -> Row:
    meta, spec = rs.get("metadata") or {}, rs.get("spec") or {}
    return [meta.get("name", ""), spec.get("nodeName") or "", spec.get("driver", ""),
            (spec.get("pool") or {}).get("name", ""), age(meta.get("creationTimestamp"))]


PRINTERS: dict[tuple[str, str], tuple[list[dict[str, Any]], Callable[[dict[str, Any], Age], Row]]] = {
    ("", "pods"): (POD_COLUMNS, pod_row),
    ("", "events"): (EVENT_COLUMNS, event_row),
    ("", "nodes"): (NODE_COLUMNS, node_row),
    ("", "namespaces"): ([NAME, _col("Status"), AGE], namespace_row),
    ("resource.k8s.io", "resourceclaims"): ([NAME, _col("State"), AGE], claim_row),
    ("resource.k8s.io", "resourceslices"): ([NAME, _col("Node"), _col("Driver"), _col("Pool"), AGE],
                                            slice_row),
}

