"""The parts of a Pod draco reads: its claims, placement directives (node selector,
affinity, tolerations of node taints), gates and phase."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from operators.model import fields as f
from operators.model.devices import DeviceID
from operators.model.errors import FieldError
from operators.model.meta import NamespacedName, NamespacedObject, ObjectMeta
from operators.model.nodes import PodToleration, parse_tolerations
from operators.model.selectors import NodeSelector, parse_node_selector


@dataclass(frozen=True, slots=True)
class PodResourceClaim:
    """spec.resourceClaims[]: exactly one source is set."""

    name: str
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


@dataclass(frozen=True, slots=True)
class PodResourceClaimStatus:
    """status.resourceClaimStatuses[]: the claim generated for a template reference.

    `resource_claim_name` None means no claim was needed (the template produced none).
    """

    name: str
    resource_claim_name: str | None = None


@dataclass(frozen=True, slots=True)
class ContainerExtendedResourceRequest:
    container_name: str
    resource_name: str
    request_name: str


@dataclass(frozen=True, slots=True)
class PodExtendedResourceClaimStatus:
    resource_claim_name: str
    request_mappings: tuple[ContainerExtendedResourceRequest, ...] = ()


@dataclass(frozen=True, slots=True)
class Pod(NamespacedObject):
    kind = "Pod"

    meta: ObjectMeta
    node_name: str = ""
    scheduling_gates: tuple[str, ...] = ()
    resource_claims: tuple[PodResourceClaim, ...] = ()
    node_selector: Mapping[str, str] = field(default_factory=lambda: f.EMPTY_MAP)
    affinity: Any = None  # frozen spec.affinity (fields.thaw gives the API form back)
    required_node_affinity: NodeSelector | None = None
    phase: str = ""
    resource_claim_statuses: tuple[PodResourceClaimStatus, ...] = ()
    extended_resource_claim_status: PodExtendedResourceClaimStatus | None = None
    tolerations: tuple[PodToleration, ...] = ()  # spec.tolerations (node taints, not devices')
    # (device, health) as the kubelet reports it (KEP-4680), from every container status
    device_health: tuple[tuple[DeviceID, str], ...] = ()
    priority: int = 0  # spec.priority, as the Priority admission plugin resolved it
    pod_group: str = ""  # spec.schedulingGroup.podGroupName (1.36+), "" when none
    preemption_policy: str = "PreemptLowerPriority"  # spec.preemptionPolicy
    start_time: datetime | None = None  # status.startTime (the kubelet's)

    @property
    def terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    def has_gate(self, gate: str) -> bool:
        return gate in self.scheduling_gates

    def not_held(self, gate: str) -> str | None:
        """Why the pod is not (or no longer) held at `gate` for draco to act on: "not
        gated", "bound" or "deleting"; None while it is. Whether a finished pod still
        counts is the caller's decision."""
        if not self.has_gate(gate):
            return "not gated"
        if self.node_name:
            return "bound"
        if self.meta.deleting:
            return "deleting"
        return None

    def claim_name(self, pod_claim: PodResourceClaim) -> str | None:
        """The claim a spec.resourceClaims entry resolves to, None if not (yet) known."""
        if pod_claim.resource_claim_name:
            return pod_claim.resource_claim_name
        for st in self.resource_claim_statuses:
            if st.name == pod_claim.name:
                return st.resource_claim_name
        return None

    def claim_names(self) -> tuple[str, ...]:
        """Names (in the pod's namespace) of every claim the pod uses, in spec order,
        then the extended-resource claim."""
        out: dict[str, None] = {}
        for pc in self.resource_claims:
            n = self.claim_name(pc)
            if n:
                out[n] = None
        if self.extended_resource_claim_status is not None:
            out[self.extended_resource_claim_status.resource_claim_name] = None
        return tuple(out)

    def claim_refs(self) -> tuple[tuple[str, bool], ...]:
        """(claim name, must the claim be controlled by this pod) per reference, as
        upstream's resourceclaim.PodClaims yields them: a claim generated from a template
        (found in `status.resourceClaimStatuses`) and the extended-resource claim must
        be the pod's own; a claim named in the spec need not."""
        out: list[tuple[str, bool]] = []
        for pc in self.resource_claims:
            n = self.claim_name(pc)
            if n:
                out.append((n, not pc.resource_claim_name))
        if self.extended_resource_claim_status is not None:
            out.append((self.extended_resource_claim_status.resource_claim_name, True))
        return tuple(out)

    def claim_keys(self) -> tuple[NamespacedName, ...]:
        ns = self.meta.namespace
        return tuple(NamespacedName(ns, n) for n in self.claim_names())


def _pod_claim(d: Mapping[str, Any]) -> PodResourceClaim:
    pc = PodResourceClaim(
        name=f.string(d, "name", required=True),
        resource_claim_name=f.opt_string(d, "resourceClaimName") or None,
        resource_claim_template_name=f.opt_string(d, "resourceClaimTemplateName") or None,
    )
    if pc.resource_claim_name and pc.resource_claim_template_name:
        raise FieldError(
            "resourceClaimName and resourceClaimTemplateName are mutually exclusive",
            "resourceClaimTemplateName",
        )
    if not pc.resource_claim_name and not pc.resource_claim_template_name:
        raise FieldError(
            "one of resourceClaimName or resourceClaimTemplateName is required", "resourceClaimName"
        )
    return pc


def _claim_status(d: Mapping[str, Any]) -> PodResourceClaimStatus:
    return PodResourceClaimStatus(
        name=f.string(d, "name", required=True),
        resource_claim_name=f.opt_string(d, "resourceClaimName") or None,
    )


def _mapping(d: Mapping[str, Any]) -> ContainerExtendedResourceRequest:
    return ContainerExtendedResourceRequest(
        container_name=f.string(d, "containerName", required=True),
        resource_name=f.string(d, "resourceName", required=True),
        request_name=f.string(d, "requestName", required=True),
    )


def _gate_name(d: Mapping[str, Any]) -> str:
    return f.string(d, "name", required=True)


def _required_affinity(affinity: Mapping[str, Any] | None) -> NodeSelector | None:
    if affinity is None:
        return None
    try:
        na = f.opt_obj(affinity, "nodeAffinity")
        if na is None:
            return None
        req = na.get("requiredDuringSchedulingIgnoredDuringExecution")
        if req is None:
            return None
        try:
            return parse_node_selector(req)
        except FieldError as e:
            raise e.at("requiredDuringSchedulingIgnoredDuringExecution").at(
                "nodeAffinity"
            ) from None
    except FieldError as e:
        raise e.at("affinity") from None


def parse_pod(meta: ObjectMeta, spec: Mapping[str, Any], status: Mapping[str, Any]) -> Pod:
    try:
        affinity = f.opt_obj(spec, "affinity")
        pod_claims = f.objects(spec, "resourceClaims", _pod_claim)
        gates = f.objects(spec, "schedulingGates", _gate_name)
        node_name = f.string(spec, "nodeName")
        node_selector = f.string_map(spec, "nodeSelector")
        required = _required_affinity(affinity)
        priority = f.integer(spec, "priority")
        preemption_policy = f.string(spec, "preemptionPolicy", default="PreemptLowerPriority")
        try:
            pod_group = f.string(f.obj(spec, "schedulingGroup"), "podGroupName")
        except FieldError as e:
            raise e.at("schedulingGroup") from None
    except FieldError as e:
        raise e.at("spec") from None
    try:
        statuses = f.objects(status, "resourceClaimStatuses", _claim_status)
        ext_raw = f.opt_obj(status, "extendedResourceClaimStatus")
        ext = None
        if ext_raw is not None:
            try:
                ext = PodExtendedResourceClaimStatus(
                    resource_claim_name=f.string(ext_raw, "resourceClaimName", required=True),
                    request_mappings=f.objects(ext_raw, "requestMappings", _mapping),
                )
            except FieldError as e:
                raise e.at("extendedResourceClaimStatus") from None
        phase = f.string(status, "phase")
        start_time = f.opt_time(status, "startTime")
    except FieldError as e:
        raise e.at("status") from None
    return Pod(
        meta=meta,
        node_name=node_name,
        scheduling_gates=gates,
        resource_claims=pod_claims,
        node_selector=node_selector,
        affinity=f.freeze(affinity) if affinity is not None else None,
        required_node_affinity=required,
        phase=phase,
        resource_claim_statuses=statuses,
        extended_resource_claim_status=ext,
        tolerations=parse_tolerations(spec.get("tolerations")),
        device_health=_device_health(status),
        priority=priority,
        pod_group=pod_group,
        preemption_policy=preemption_policy,
        start_time=start_time,
    )


def _device_health(status: Mapping[str, Any]) -> tuple[tuple[DeviceID, str], ...]:
    """`containerStatuses[].allocatedResourcesStatus[]` entries of claims (`name:
    claim:<claim>/<request>`), each resource `{resourceID: <driver>/<pool>/<device>,
    health}`. Written by kubelets, read leniently: an entry that does not read as that
    is skipped, never the pod."""
    out: dict[DeviceID, str] = {}
    for key in ("initContainerStatuses", "containerStatuses"):
        container_statuses = status.get(key)
        for cs in container_statuses if isinstance(container_statuses, list) else ():
            entries = cs.get("allocatedResourcesStatus") if isinstance(cs, Mapping) else None
            for entry in entries if isinstance(entries, list) else ():
                if not isinstance(entry, Mapping) or not str(entry.get("name", "")).startswith("claim:"):
                    continue
                resources = entry.get("resources")
                for res in resources if isinstance(resources, list) else ():
                    parts = str(res.get("resourceID", "")).split("/") if isinstance(res, Mapping) else []
                    if len(parts) == 3 and all(parts):
                        health = str(res.get("health") or "Unknown")
                        device = DeviceID(*parts)
                        # a device reported by several containers: the worst report wins
                        if out.get(device) != "Unhealthy":
                            out[device] = health
    return tuple(sorted(out.items()))
