"""Reading Kueue's Workload (`kueue.x-k8s.io/v1beta2`) as plain dicts.

Only what the devices check needs: the PodSets (`name`, `count`, `template`), the
admission (`podSetAssignments[]`: `count`, `flavors`, `topologyAssignment`), the
conditions that say whether quota is reserved and whether the Workload is over, and
the admission checks' states. Kueue's own validation keeps these shapes; what does not
fit them raises `WorkloadError` with the field's path, so a caller can report it.

TAS's assignment in v1beta2 is compressed: `levels` (node label keys, highest first)
and `slices[]`, each `domainCount` domains with, per level, one `universal` value or
`individual` values (`prefix` + `roots[i]` + `suffix`), and per domain a pod count
(`podCounts.universal` or `podCounts.individual[i]`). `topology_domains` expands it to
one (labels, pods) pair per domain, in order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"
CONTROLLER_NAME = "resource.draco.dev/devices"
PODSET_LABEL = "kueue.x-k8s.io/podset"  # Kueue labels each pod with its PodSet's name
HOSTNAME = "kubernetes.io/hostname"
STATES = ("Pending", "Ready", "Retry", "Rejected")


class WorkloadError(ValueError):
    """A Workload (or part of one) that cannot be read; `path` names the field."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.message = message


@dataclass(frozen=True, slots=True)
class TopologyDomain:
    """One domain of TAS's assignment: node label values per level, and its pods."""

    labels: tuple[tuple[str, str], ...]
    pods: int

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        """Whether the node is in the domain (hostname: the node's name when it has no
        such label, as on clusters where the label is missing)."""
        for key, value in self.labels:
            got = labels.get(key)
            if got is None and key == HOSTNAME:
                got = name
            if got != value:
                return False
        return True

    @property
    def text(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.labels)


@dataclass(frozen=True, slots=True)
class PodSet:
    name: str
    count: int  # as admitted (the assignment's count when Kueue gives one)
    template: Mapping[str, Any]
    flavors: tuple[str, ...] = ()  # ResourceFlavors of the admission, by name
    topology: tuple[TopologyDomain, ...] | None = None  # TAS's assignment, if any


@dataclass(frozen=True, slots=True)
class CheckState:
    name: str
    state: str
    message: str = ""
    last_transition_time: str = ""
    requeue_after_seconds: int | None = None
    pod_set_updates: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class Workload:
    namespace: str
    name: str
    uid: str
    resource_version: str
    annotations: Mapping[str, str]
    pod_sets: tuple[PodSet, ...]
    conditions: Mapping[str, Mapping[str, Any]]  # type -> condition
    checks: tuple[CheckState, ...]
    admission: Mapping[str, Any] | None = None
    deleting: bool = False
    raw: Mapping[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.namespace}/{self.name}"

    def condition_true(self, kind: str) -> bool:
        c = self.conditions.get(kind)
        return c is not None and c.get("status") == "True"

    @property
    def quota_reserved(self) -> bool:
        return self.condition_true("QuotaReserved") and self.admission is not None

    @property
    def over(self) -> str | None:
        """Why the Workload holds nothing any more (finished, evicted, deleted), else None."""
        if self.deleting:
            return "deleted"
        if self.condition_true("Finished"):
            return "finished"
        if self.condition_true("Evicted"):
            return "evicted"
        if not self.quota_reserved:
            return "its quota reservation is gone"
        return None

    def check(self, name: str) -> CheckState | None:
        return next((c for c in self.checks if c.name == name), None)

    @property
    def total_pods(self) -> int:
        return sum(p.count for p in self.pod_sets)


def _obj(d: Any, path: str) -> Mapping[str, Any]:
    if d is None:
        return {}
    if not isinstance(d, Mapping):
        raise WorkloadError(path, "must be an object")
    return d


def _list(d: Any, path: str) -> Sequence[Any]:
    if d is None:
        return ()
    if not isinstance(d, list):
        raise WorkloadError(path, "must be a list")
    return d


def _int(d: Any, path: str, *, low: int = 0) -> int:
    if isinstance(d, bool) or not isinstance(d, int):
        raise WorkloadError(path, "must be an integer")
    if d < low:
        raise WorkloadError(path, f"must be at least {low}, not {d}")
    return d


def _str(d: Any, path: str) -> str:
    if not isinstance(d, str) or not d:
        raise WorkloadError(path, "must be a non-empty string")
    return d


def topology_domains(ta: Mapping[str, Any], path: str = "topologyAssignment") -> tuple[TopologyDomain, ...]:
    """The v1beta2 compressed assignment, one domain per entry, slices in order."""
    levels = [_str(x, f"{path}.levels[{i}]") for i, x in enumerate(_list(ta.get("levels"), f"{path}.levels"))]
    if not levels:
        raise WorkloadError(f"{path}.levels", "must name at least one level")
    out: list[TopologyDomain] = []
    for si, sl in enumerate(_list(ta.get("slices"), f"{path}.slices")):
        sp = f"{path}.slices[{si}]"
        sl = _obj(sl, sp)
        n = _int(sl.get("domainCount"), f"{sp}.domainCount", low=1)
        per_level = _list(sl.get("valuesPerLevel"), f"{sp}.valuesPerLevel")
        if len(per_level) != len(levels):
            raise WorkloadError(f"{sp}.valuesPerLevel", f"has {len(per_level)} entries for "
                                f"{len(levels)} levels")
        values: list[list[str]] = []
        for li, lv in enumerate(per_level):
            lp = f"{sp}.valuesPerLevel[{li}]"
            lv = _obj(lv, lp)
            if ("universal" in lv) == ("individual" in lv):
                raise WorkloadError(lp, "exactly one of universal, individual must be set")
            if "universal" in lv:
                values.append([_str(lv["universal"], f"{lp}.universal")] * n)
                continue
            ind = _obj(lv["individual"], f"{lp}.individual")
            prefix = ind.get("prefix") or ""
            suffix = ind.get("suffix") or ""
            roots = [_str(r, f"{lp}.individual.roots[{ri}]")
                     for ri, r in enumerate(_list(ind.get("roots"), f"{lp}.individual.roots"))]
            if len(roots) != n:
                raise WorkloadError(f"{lp}.individual.roots", f"has {len(roots)} values for "
                                    f"domainCount {n}")
            values.append([f"{prefix}{r}{suffix}" for r in roots])
        counts = _obj(sl.get("podCounts"), f"{sp}.podCounts")
        if ("universal" in counts) == ("individual" in counts):
            raise WorkloadError(f"{sp}.podCounts", "exactly one of universal, individual must be set")
        if "universal" in counts:
            pods = [_int(counts["universal"], f"{sp}.podCounts.universal", low=1)] * n
        else:
            pods = [_int(c, f"{sp}.podCounts.individual[{ci}]", low=1)
                    for ci, c in enumerate(_list(counts["individual"], f"{sp}.podCounts.individual"))]
            if len(pods) != n:
                raise WorkloadError(f"{sp}.podCounts.individual", f"has {len(pods)} counts for "
                                    f"domainCount {n}")
        for i in range(n):
            out.append(TopologyDomain(tuple((lvl, values[li][i]) for li, lvl in enumerate(levels)),
                                      pods[i]))
    return tuple(out)


def _check(d: Any, path: str) -> CheckState:
    d = _obj(d, path)
    state = d.get("state") or "Pending"
    if state not in STATES:
        raise WorkloadError(f"{path}.state", f"unknown state {state!r}")
    requeue = d.get("requeueAfterSeconds")
    return CheckState(_str(d.get("name"), f"{path}.name"), str(state), str(d.get("message") or ""),
                      str(d.get("lastTransitionTime") or ""),
                      None if requeue is None else _int(requeue, f"{path}.requeueAfterSeconds"),
                      tuple(_obj(u, f"{path}.podSetUpdates[{i}]")
                            for i, u in enumerate(_list(d.get("podSetUpdates"), f"{path}.podSetUpdates"))))


def parse_workload(d: Mapping[str, Any]) -> Workload:
    """The Workload; raises WorkloadError naming the field that cannot be read."""
    md = _obj(d.get("metadata"), "metadata")
    spec = _obj(d.get("spec"), "spec")
    status = _obj(d.get("status"), "status")
    admission = status.get("admission")
    admission = _obj(admission, "status.admission") if admission is not None else None
    assignments: dict[str, Mapping[str, Any]] = {}
    if admission is not None:
        for i, a in enumerate(_list(admission.get("podSetAssignments"), "status.admission.podSetAssignments")):
            a = _obj(a, f"status.admission.podSetAssignments[{i}]")
            assignments[str(a.get("name") or "main")] = {**a, "_path": f"status.admission.podSetAssignments[{i}]"}
    pod_sets: list[PodSet] = []
    seen: set[str] = set()
    for i, ps in enumerate(_list(spec.get("podSets"), "spec.podSets")):
        path = f"spec.podSets[{i}]"
        ps = _obj(ps, path)
        name = str(ps.get("name") or "main")  # Kueue's default
        if name in seen:
            raise WorkloadError(f"{path}.name", f"PodSet {name} is listed twice")
        seen.add(name)
        count = _int(ps.get("count"), f"{path}.count")
        template = _obj(ps.get("template"), f"{path}.template")
        a = assignments.get(name)
        flavors: tuple[str, ...] = ()
        topology = None
        if a is not None:
            ap = str(a["_path"])
            if a.get("count") is not None:
                count = _int(a.get("count"), f"{ap}.count")
            flavors = tuple(sorted({str(v) for v in _obj(a.get("flavors"), f"{ap}.flavors").values()}))
            if a.get("topologyAssignment") is not None:
                topology = topology_domains(_obj(a["topologyAssignment"], f"{ap}.topologyAssignment"),
                                            f"{ap}.topologyAssignment")
        pod_sets.append(PodSet(name, count, template, flavors, topology))
    conditions = {str(c.get("type")): c for c in _list(status.get("conditions"), "status.conditions")
                  if isinstance(c, Mapping)}
    checks = tuple(_check(c, f"status.admissionChecks[{i}]")
                   for i, c in enumerate(_list(status.get("admissionChecks"), "status.admissionChecks")))
    annotations = _obj(md.get("annotations"), "metadata.annotations")
    return Workload(_str(md.get("namespace"), "metadata.namespace"), _str(md.get("name"), "metadata.name"),
                    str(md.get("uid") or ""), str(md.get("resourceVersion") or ""),
                    {str(k): str(v) for k, v in annotations.items()}, tuple(pod_sets), conditions,
                    checks, admission, bool(md.get("deletionTimestamp")), d)


def our_checks(checks: Sequence[Mapping[str, Any]], controller: str = CONTROLLER_NAME) -> frozenset[str]:
    """The names of the AdmissionChecks (plain dicts) that `controller` answers."""
    out = set()
    for ac in checks:
        spec = ac.get("spec") if isinstance(ac, Mapping) else None
        md = ac.get("metadata") if isinstance(ac, Mapping) else None
        if isinstance(spec, Mapping) and isinstance(md, Mapping) and spec.get("controllerName") == controller:
            out.add(str(md.get("name")))
    return frozenset(out)


def flavor_labels(flavors: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """ResourceFlavor name -> its `spec.nodeLabels` (Kueue puts them in the pods'
    nodeSelector at admission, so they bound where the pods may go)."""
    out: dict[str, dict[str, str]] = {}
    for fl in flavors:
        md, spec = fl.get("metadata"), fl.get("spec")
        if isinstance(md, Mapping) and md.get("name"):
            labels = spec.get("nodeLabels") if isinstance(spec, Mapping) else None
            out[str(md["name"])] = {str(k): str(v) for k, v in (labels or {}).items()} \
                if isinstance(labels, Mapping) else {}
    return out


__all__ = ["CONTROLLER_NAME", "HOSTNAME", "KUEUE_GROUP", "KUEUE_VERSION", "PODSET_LABEL",
           "CheckState", "PodSet", "TopologyDomain", "Workload", "WorkloadError", "flavor_labels",
           "our_checks", "parse_workload", "topology_domains"]
