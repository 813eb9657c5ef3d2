"""Pod validation as kube-apiserver's ValidatePodUpdate does it, for the parts draco uses.

A pod's spec is immutable except: container images, activeDeadlineSeconds, additions to
tolerations, removal of scheduling gates, and — only while the stored pod still has
scheduling gates (KEP-3838) — additions to `spec.nodeSelector` and narrowing of the
required node affinity (each existing term may only gain requirements; terms can't be
added or removed unless there were none).
"""

from __future__ import annotations

import copy
from typing import Any

from operators.apiserver.validation import names
from operators.apiserver.validation.causes import Cause, forbidden, invalid, not_supported, required

SELECTOR_OPERATORS = ["DoesNotExist", "Exists", "Gt", "In", "Lt", "NotIn"]
IMMUTABLE_MESSAGE = (
    "pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
    "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
    "(allow it to be set to 1 if it was previously negative)"
)


def requirement(req: Any, path: str) -> list[Cause]:
    if not isinstance(req, dict):
        return [invalid(path, req, "must be an object")]
    out: list[Cause] = []
    op, values = req.get("operator"), req.get("values") or []
    if op in ("In", "NotIn"):
        if not values:
            out.append(required(f"{path}.values",
                                "must be specified when `operator` is 'In' or 'NotIn'"))
    elif op in ("Exists", "DoesNotExist"):
        if values:
            out.append(forbidden(f"{path}.values",
                                 "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
    elif op in ("Gt", "Lt"):
        if len(values) != 1:
            out.append(required(f"{path}.values",
                                "must be specified single value when `operator` is 'Lt' or 'Gt'"))
    else:
        out.append(invalid(f"{path}.operator", op, "not a valid selector operator"))
    out += names.qualified_name(req.get("key"), f"{path}.key")
    return out


def field_requirement(req: Any, path: str) -> list[Cause]:
    if not isinstance(req, dict):
        return [invalid(path, req, "must be an object")]
    out: list[Cause] = []
    op, values = req.get("operator"), req.get("values") or []
    if op in ("In", "NotIn"):
        if len(values) != 1:
            out.append(required(
                f"{path}.values",
                "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"))
    else:
        out.append(invalid(f"{path}.operator", op, "not a valid selector operator"))
    if req.get("key") != "metadata.name":
        out.append(invalid(f"{path}.key", req.get("key"), "not a valid field selector key"))
    return out


def node_selector_term(term: Any, path: str) -> list[Cause]:
    if not isinstance(term, dict):
        return [invalid(path, term, "must be an object")]
    out: list[Cause] = []
    for i, r in enumerate(term.get("matchExpressions") or []):
        out += requirement(r, f"{path}.matchExpressions[{i}]")
    for i, r in enumerate(term.get("matchFields") or []):
        out += field_requirement(r, f"{path}.matchFields[{i}]")
    return out


def node_affinity(aff: Any, path: str) -> list[Cause]:
    if not isinstance(aff, dict):
        return []
    out: list[Cause] = []
    req = aff.get("requiredDuringSchedulingIgnoredDuringExecution")
    if req is not None:
        rpath = f"{path}.requiredDuringSchedulingIgnoredDuringExecution"
        terms = (req or {}).get("nodeSelectorTerms") or []
        if not terms:
            out.append(required(f"{rpath}.nodeSelectorTerms",
                                "must have at least one node selector term"))
        for i, t in enumerate(terms):
            out += node_selector_term(t, f"{rpath}.nodeSelectorTerms[{i}]")
    for i, pref in enumerate(aff.get("preferredDuringSchedulingIgnoredDuringExecution") or []):
        ppath = f"{path}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
        weight = (pref or {}).get("weight")
        if not isinstance(weight, int) or not 1 <= weight <= 100:
            out.append(invalid(f"{ppath}.weight", weight, "must be in the range 1-100"))
        out += node_selector_term((pref or {}).get("preference") or {}, f"{ppath}.preference")
    return out


def scheduling_gates(gates: Any, path: str) -> list[Cause]:
    out: list[Cause] = []
    seen: set[Any] = set()
    for i, g in enumerate(gates or []):
        name = (g or {}).get("name")
        out += names.qualified_name(name, f"{path}[{i}].name")
        if name in seen:
            out.append({"reason": "FieldValueDuplicate", "field": f"{path}[{i}].name",
                        "message": f'Duplicate value: "{name}"'})
        seen.add(name)
    return out


def validate_spec(spec: dict[str, Any]) -> list[Cause]:
    out = names.labels(spec.get("nodeSelector"), "spec.nodeSelector")
    out += node_affinity((spec.get("affinity") or {}).get("nodeAffinity"),
                         "spec.affinity.nodeAffinity")
    out += scheduling_gates(spec.get("schedulingGates"), "spec.schedulingGates")
    for i, t in enumerate(spec.get("tolerations") or []):
        op = t.get("operator", "Equal")
        if op not in ("Equal", "Exists", ""):
            out.append(not_supported(f"spec.tolerations[{i}].operator", op, ["Equal", "Exists"]))
        if t.get("effect") not in (None, "", "NoSchedule", "PreferNoSchedule", "NoExecute"):
            out.append(not_supported(f"spec.tolerations[{i}].effect", t.get("effect"),
                                     ["NoExecute", "NoSchedule", "PreferNoSchedule"]))
    if not spec.get("containers"):
        out.append(required("spec.containers"))
    return out


def validate_pod_create(pod: dict[str, Any]) -> list[Cause]:
    spec = pod.get("spec") or {}
    out = validate_spec(spec)
    if spec.get("nodeName") and spec.get("schedulingGates"):
        # a gated pod has not been scheduled: no node may be named until every gate is gone
        out.append(forbidden("spec.nodeName", "cannot be set until all schedulingGates have been cleared"))
    return out


def validate_pod_status(old: dict[str, Any], new: dict[str, Any]) -> list[Cause]:
    """pods/status writes: a changed, non-empty `status.nominatedNodeName` must be a node
    name (what kube-scheduler and draco's preemption write there)."""
    nominated = (new.get("status") or {}).get("nominatedNodeName")
    if nominated and nominated != (old.get("status") or {}).get("nominatedNodeName"):
        return names.dns_subdomain(nominated, "status.nominatedNodeName")
    return []


def _terms(aff: Any) -> list[Any] | None:
    req = ((aff or {}).get("requiredDuringSchedulingIgnoredDuringExecution"))
    if req is None:
        return None
    return list((req or {}).get("nodeSelectorTerms") or [])


# Fields of the pod spec whose Go type is a map: there, as for slices, an empty value
# equals an absent one (apimachinery's semantic equality); an empty object elsewhere is a
# non-nil pointer to an empty struct and differs from none (`affinity: {}`).
MAP_FIELDS = frozenset({"nodeSelector", "overhead", "limits", "requests", "labels", "annotations"})


def semantic(value: Any, key: str = "") -> Any:
    """VALUE as apimachinery's semantic equality sees it: null, empty slices and empty
    maps dropped (they equal absent ones), empty structs kept."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            v = semantic(v, k)
            if v is None or v == [] or (v == {} and k in MAP_FIELDS):
                continue
            out[k] = v
        return out
    if isinstance(value, list):
        return [semantic(v) for v in value]
    return value


def _only_additions(new: Any, old: Any) -> bool:
    """Upstream's validateNodeSelectorTermHasOnlyAdditions: an empty term stays empty;
    otherwise each list keeps its old entries as a prefix."""
    o_exprs, o_fields = (old or {}).get("matchExpressions") or [], (old or {}).get("matchFields") or []
    n_exprs, n_fields = (new or {}).get("matchExpressions") or [], (new or {}).get("matchFields") or []
    if not o_exprs and not o_fields and (n_exprs or n_fields):
        return False
    for o, n in ((o_exprs, n_exprs), (o_fields, n_fields)):
        if len(o) > len(n) or any(semantic(a) != semantic(b) for a, b in zip(o, n, strict=False)):
            return False
    return True


def node_affinity_mutation(new_aff: Any, old_aff: Any) -> list[Cause]:
    path = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
    old_terms = _terms(old_aff)
    if not old_terms:
        return []
    new_terms = _terms(new_aff) or []
    if len(old_terms) != len(new_terms):
        return [invalid(path, new_terms,
                        "no additions/deletions to non-empty NodeSelectorTerms list are allowed")]
    return [
        invalid(f"{path}[{i}]", new_terms[i], "only additions are allowed (no mutations or deletions)")
        for i in range(len(old_terms))
        if not _only_additions(new_terms[i], old_terms[i])
    ]


def node_selector_mutation(new_sel: Any, old_sel: Any) -> list[Cause]:
    out: list[Cause] = []
    new_sel = new_sel or {}
    for key, value in (old_sel or {}).items():
        if new_sel.get(key) != value:
            out.append(invalid("spec.nodeSelector", new_sel,
                               "only additions to spec.nodeSelector are allowed (no mutations or deletions)"))
            break
    return out


def validate_pod_update(old: dict[str, Any], new: dict[str, Any]) -> list[Cause]:
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    out = validate_spec(new_spec)
    munged = copy.deepcopy(new_spec)
    # Images may change; everything else about containers may not.
    for key in ("containers", "initContainers"):
        olds = old_spec.get(key) or []
        news = munged.get(key) or []
        if len(olds) == len(news):
            for o, n in zip(olds, news, strict=True):
                if isinstance(n, dict) and isinstance(o, dict) and "image" in o:
                    n["image"] = o["image"]
    # activeDeadlineSeconds: may be set, or lowered, never unset or raised.
    old_ads, new_ads = old_spec.get("activeDeadlineSeconds"), new_spec.get("activeDeadlineSeconds")
    if new_ads != old_ads:
        if new_ads is None or (old_ads is not None and new_ads > old_ads):
            out.append(invalid("spec.activeDeadlineSeconds", new_ads,
                               "must be less than or equal to previous value"))
        munged["activeDeadlineSeconds"] = old_ads
        if old_ads is None:
            munged.pop("activeDeadlineSeconds", None)
    # Tolerations: only additions.
    old_tols, new_tols = old_spec.get("tolerations") or [], new_spec.get("tolerations") or []
    for t in old_tols:
        if t not in new_tols:
            out.append(forbidden("spec.tolerations",
                                 "existing toleration can not be modified except its tolerationSeconds"))
            break
    _restore(munged, old_spec, "tolerations")
    # Scheduling gates: only deletions.
    old_gates = [g.get("name") for g in old_spec.get("schedulingGates") or []]
    for i, g in enumerate(new_spec.get("schedulingGates") or []):
        if g.get("name") not in old_gates:
            out.append(forbidden(f"spec.schedulingGates[{i}].name",
                                 f"only deletion is allowed, but found new scheduling gate '{g.get('name')}'"))
    _restore(munged, old_spec, "schedulingGates")
    # KEP-3838: node selector and node affinity narrow while the stored pod is gated.
    if old_gates:
        if semantic(munged.get("nodeSelector") or {}) != semantic(old_spec.get("nodeSelector") or {}):
            out += node_selector_mutation(new_spec.get("nodeSelector"), old_spec.get("nodeSelector"))
            _restore(munged, old_spec, "nodeSelector")
        _munge_node_affinity(munged, old_spec, out)
    if old_spec.get("terminationGracePeriodSeconds", 0) is not None and \
            (old_spec.get("terminationGracePeriodSeconds") or 0) < 0 and \
            new_spec.get("terminationGracePeriodSeconds") == 1:
        munged["terminationGracePeriodSeconds"] = old_spec["terminationGracePeriodSeconds"]
    if semantic(munged) != semantic(old_spec) and not [c for c in out if c["field"] == "spec"]:
        out.append(forbidden("spec", IMMUTABLE_MESSAGE))
    return out


def _munge_node_affinity(munged: dict[str, Any], old_spec: dict[str, Any], out: list[Cause]) -> None:
    """Upstream's handling of a gated pod's node affinity: when it changed, check that it
    only narrowed, then put the old one back so that only other changes remain. A nil
    affinity and an empty one (`affinity: {}`) differ; adding or dropping the empty one
    alone is therefore a change of the spec, as upstream says."""
    old_aff = old_spec.get("affinity")
    old_na = old_aff.get("nodeAffinity") if isinstance(old_aff, dict) else None
    new_aff = munged.get("affinity")
    new_na = new_aff.get("nodeAffinity") if isinstance(new_aff, dict) else None
    if semantic(old_na) == semantic(new_na):
        return
    out += node_affinity_mutation(new_na, old_na)
    if new_aff is None and old_na is not None:
        munged["affinity"] = {"nodeAffinity": old_na}
    elif new_aff is not None and old_aff is None and not new_aff.get("podAffinity") \
            and not new_aff.get("podAntiAffinity"):
        munged.pop("affinity", None)
    elif new_aff is not None:
        aff = dict(new_aff)
        if old_na is None:
            aff.pop("nodeAffinity", None)
        else:
            aff["nodeAffinity"] = old_na
        munged["affinity"] = aff


def _restore(munged: dict[str, Any], old_spec: dict[str, Any], key: str) -> None:
    if key in old_spec:
        munged[key] = old_spec[key]
    else:
        munged.pop(key, None)
