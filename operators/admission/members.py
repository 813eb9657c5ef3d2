"""A Workload's pods as gang members, before any pod exists.

Each PodSet gives `count` pods (the admitted count) of its template. A pod's claims
come from the template's `spec.resourceClaims`: an entry naming a
ResourceClaimTemplate stands for the claim that would be generated for that pod (one
per pod, built from the template's `spec.spec` with its labels and annotations, so the
tolerations annotation counts); an entry naming a ResourceClaim is that claim, shared
by every pod that names it (allocated once, as a gang's shared claim is). A named
claim allocated already is the member's allocated claim (its node selector binds the
member). The pods carry the template's labels, tolerations and node affinity, and a
nodeSelector that adds the admitted ResourceFlavors' node labels, as Kueue adds them
when it starts the job, and, under TAS, a required node affinity on the nodes of the
pod's TAS domain.

Names: member `PODSET/INDEX`; pod `WORKLOAD-PODSET-INDEX`; generated claim
`WORKLOAD-PODSET-INDEX-ENTRY` (ENTRY: the resourceClaims entry's name). They exist only
here: nothing is created.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from operators.admission.workload import PODSET_LABEL, PodSet, Workload
from operators.gangs.gang import Member
from operators.model import ModelError, NamespacedName, ResourceClaim
from operators.model.objects import parse_pod_object, parse_resource_claim

ClaimLookup = Callable[[NamespacedName], ResourceClaim | None]


@dataclass(frozen=True, slots=True)
class WorkloadMember:
    pod_set: str
    index: int
    member: Member
    entries: tuple[tuple[str, str], ...]  # (resourceClaims entry name, claim name), in order

    @property
    def label(self) -> str:
        return self.member.label


@dataclass(frozen=True, slots=True)
class Problem:
    """Why the Workload cannot be searched: `never` when it cannot be fixed by waiting."""

    message: str
    never: bool


def member_label(pod_set: str, index: int) -> str:
    return f"{pod_set}/{index}"


def _claim_from_template(tmpl: Mapping[str, Any], ns: str, name: str, uid: str) -> ResourceClaim:
    spec = tmpl.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    md = spec.get("metadata") if isinstance(spec.get("metadata"), Mapping) else {}
    assert isinstance(md, Mapping)
    return parse_resource_claim({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": ns, "uid": uid,
                     "labels": dict(md.get("labels") or {}),
                     "annotations": dict(md.get("annotations") or {})},
        "spec": spec.get("spec") if isinstance(spec.get("spec"), Mapping) else {}})


def _pinned(affinity: Any, nodes: Sequence[str]) -> dict[str, Any]:
    """AFFINITY with every required term narrowed to NODES (by name): TAS's domain, ANDed
    with what the template asks (the terms are ORed, so each gets the field)."""
    out = copy.deepcopy(dict(affinity)) if isinstance(affinity, Mapping) else {}
    na = out.setdefault("nodeAffinity", {})
    req = na.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = req.get("nodeSelectorTerms") or [{}]
    field = {"key": "metadata.name", "operator": "In", "values": sorted(nodes)}
    req["nodeSelectorTerms"] = [{**t, "matchFields": [*(t.get("matchFields") or []), field]} for t in terms]
    return out


def _pod_dict(wl: Workload, ps: PodSet, index: int, flavor_nodes: Mapping[str, Mapping[str, str]],
              statuses: list[dict[str, str]], pin: Sequence[str] | None = None) -> dict[str, Any]:
    tmd = ps.template.get("metadata")
    tmd = tmd if isinstance(tmd, Mapping) else {}
    tspec = ps.template.get("spec")
    tspec = dict(tspec) if isinstance(tspec, Mapping) else {}
    selector: dict[str, str] = {}
    for fl in ps.flavors:
        selector.update(flavor_nodes.get(fl, {}))
    own = tspec.get("nodeSelector")
    if isinstance(own, Mapping):
        selector.update({str(k): str(v) for k, v in own.items()})
    tspec["nodeSelector"] = selector
    if pin is not None:
        tspec["affinity"] = _pinned(tspec.get("affinity"), pin)
    tspec.pop("schedulingGates", None)
    tspec.pop("nodeName", None)
    labels = {str(k): str(v) for k, v in (tmd.get("labels") or {}).items()}
    labels[PODSET_LABEL] = ps.name
    name = f"{wl.name}-{ps.name}-{index}"
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": wl.namespace, "uid": f"{wl.uid or wl.name}/{ps.name}/{index}",
                         "labels": labels, "annotations": dict(tmd.get("annotations") or {})},
            "spec": tspec, "status": {"phase": "Pending", "resourceClaimStatuses": statuses}}


def workload_members(wl: Workload, templates: Mapping[str, Mapping[str, Any]], claims: ClaimLookup,
                     flavor_nodes: Mapping[str, Mapping[str, str]] | None = None,
                     pins: Mapping[tuple[str, int], Sequence[str]] | None = None,
                     ) -> list[WorkloadMember] | Problem:
    """Every pod of the Workload as a member (PodSets in order, pods by index), or the
    problem that keeps it from being searched. TEMPLATES: ResourceClaimTemplates of the
    Workload's namespace by name; PINS: (PodSet, index) -> the only nodes the pod may
    use (TAS's domain), as a required node affinity on metadata.name, so that pods of
    one domain are alike to the search and pods of two domains are not."""
    flavor_nodes = flavor_nodes or {}
    pins = pins or {}
    out: list[WorkloadMember] = []
    named: dict[str, ResourceClaim] = {}
    for ps in wl.pod_sets:
        tspec = ps.template.get("spec")
        entries = tspec.get("resourceClaims") if isinstance(tspec, Mapping) else None
        entries = entries if isinstance(entries, list) else []
        for index in range(ps.count):
            base = f"{wl.name}-{ps.name}-{index}"
            pending: list[ResourceClaim] = []
            allocated: list[ResourceClaim] = []
            pairs: list[tuple[str, str]] = []
            statuses: list[dict[str, str]] = []
            for e in entries:
                if not isinstance(e, Mapping) or not e.get("name"):
                    return Problem(f"PodSet {ps.name}: a resourceClaims entry without a name", True)
                entry = str(e["name"])
                if e.get("resourceClaimName"):
                    cname = str(e["resourceClaimName"])
                    claim = named.get(cname) or claims(NamespacedName(wl.namespace, cname))
                    if claim is None:
                        return Problem(f"PodSet {ps.name}: ResourceClaim {wl.namespace}/{cname} "
                                       f"(entry {entry}) does not exist", False)
                    named[cname] = claim
                elif e.get("resourceClaimTemplateName"):
                    tname = str(e["resourceClaimTemplateName"])
                    tmpl = templates.get(tname)
                    if tmpl is None:
                        return Problem(f"PodSet {ps.name}: ResourceClaimTemplate {wl.namespace}/{tname} "
                                       f"(entry {entry}) does not exist", False)
                    cname = f"{base}-{entry}"
                    try:
                        claim = _claim_from_template(tmpl, wl.namespace, cname,
                                                     f"{wl.uid or wl.name}/{ps.name}/{index}/{entry}")
                    except ModelError as exc:
                        return Problem(f"PodSet {ps.name}: ResourceClaimTemplate {wl.namespace}/{tname} "
                                       f"cannot be read: {exc.path + ': ' if exc.path else ''}"
                                       f"{exc.message}", True)
                    statuses.append({"name": entry, "resourceClaimName": cname})
                else:
                    return Problem(f"PodSet {ps.name}: resourceClaims entry {entry} names neither a "
                                   "claim nor a template", True)
                pairs.append((entry, cname))
                if all(c.name != claim.name for c in (*pending, *allocated)):
                    (pending if claim.allocation is None else allocated).append(claim)
            try:
                pod = parse_pod_object(_pod_dict(wl, ps, index, flavor_nodes, statuses,
                                                 pins.get((ps.name, index))))
            except ModelError as exc:
                return Problem(f"PodSet {ps.name}: the pod template cannot be read: "
                               f"{exc.path + ': ' if exc.path else ''}{exc.message}", True)
            member = Member(member_label(ps.name, index), pod, tuple(pending), tuple(allocated))
            out.append(WorkloadMember(ps.name, index, member, tuple(pairs)))
    return out


__all__ = ["ClaimLookup", "Problem", "WorkloadMember", "member_label", "workload_members"]
