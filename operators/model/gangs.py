"""Gangs: groups of pods whose claims are allocated together, all or nothing.

Two sources, one shape (`Gang`):
- draco's own `Gang` (`gangs.resource.draco.dev`, v1alpha1), which pods join with the
  label `resource.draco.dev/gang: NAME`. Served on every release draco supports.
- upstream's `PodGroup` (`scheduling.k8s.io/v1beta1`, 1.37 behind `GenericWorkload`),
  which pods join with `spec.schedulingGroup.podGroupName`. draco reads
  `spec.schedulingPolicy.gang.minCount` and `spec.schedulingConstraints.topology[].key`
  (a node label; upstream allows one). A PodGroup with a `basic` policy (no gang) is
  a group of independent pods: draco leaves it to the pod-by-pod path. Its
  `spec.preemptionPolicy` (1.38; `Never` keeps the whole gang from preempting) is read
  whenever the server stored it.
- A PodGroup inside a CompositePodGroup (`spec.parentCompositePodGroupName`, 1.38 beta,
  off by default) is refused, whatever its policy: its pods may only be placed with
  their composite's other groups (`minGroupCount`), which draco does not implement, so
  placing it alone, or its pods one by one, could start part of a workload that must
  start whole.

Fields draco does not know in `spec.topology` are not ignored: the gang is unreadable
and nothing of it is allocated (fail closed), with the reason in its status.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from operators.model import fields as f
from operators.model.errors import FieldError, ModelError, ObjectRef
from operators.model.meta import NamespacedName, ObjectMeta, parse_meta
from operators.model.pods import Pod

GANG_LABEL = "resource.draco.dev/gang"
GANG_GROUP = "resource.draco.dev"
GANG_VERSION = "v1alpha1"
PODGROUP_API = "scheduling.k8s.io/v1beta1"
MAX_MIN_COUNT = 10_000  # more pods than any gang draco could place within its budget
_TOPOLOGY_KEYS = frozenset({"nodeLabel", "deviceAttribute"})
PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")


@dataclass(frozen=True, slots=True)
class Gang:
    """`kind`: "Gang" or "PodGroup". `node_label`: members' nodes share its value;
    `device_attribute` (qualified): every device of every member shares its value."""

    meta: ObjectMeta
    kind: str
    min_count: int
    node_label: str | None = None
    device_attribute: str | None = None
    wait_seconds: int | None = None
    preemption_policy: str = "PreemptLowerPriority"

    @property
    def key(self) -> NamespacedName:
        return self.meta.key

    @property
    def label(self) -> str:
        return f"{self.meta.namespace}/{self.meta.name}"

    def has_member(self, pod: Pod) -> bool:
        if pod.meta.namespace != self.meta.namespace:
            return False
        if self.kind == "PodGroup":
            return pod.pod_group == self.meta.name
        return pod.meta.labels.get(GANG_LABEL) == self.meta.name

    def domain_keys(self) -> str:
        """The topology, as the status and the CLI name it ("" when any placement goes)."""
        parts = []
        if self.node_label:
            parts.append(f"node label {self.node_label}")
        if self.device_attribute:
            parts.append(f"device attribute {self.device_attribute}")
        return " and ".join(parts)


def gang_of(pod: Pod) -> tuple[str, str] | None:
    """(kind, name) of the group the pod names, if any: draco's label wins over a
    PodGroup reference (a pod in both is draco's to place)."""
    name = pod.meta.labels.get(GANG_LABEL)
    if name:
        return "Gang", name
    if pod.pod_group:
        return "PodGroup", pod.pod_group
    return None


def _qualified(value: str, what: str) -> str:
    prefix, sep, name = value.partition("/")
    if not sep or not prefix or not name or "/" in name:
        raise FieldError(f"{what} must be a qualified name (DOMAIN/NAME), not {value!r}")
    return value


def _min_count(spec: Mapping[str, Any], key: str) -> int:
    count = f.integer(spec, key, required=True)
    if count < 1 or count > MAX_MIN_COUNT:
        raise FieldError(f"must be between 1 and {MAX_MIN_COUNT}, not {count}", key)
    return count


def parse_gang(d: Mapping[str, Any]) -> Gang:
    """A `resource.draco.dev/v1alpha1` Gang; raises ModelError naming the field."""
    meta = parse_meta(d, namespaced=True)
    ref = ObjectRef("Gang", meta.namespace, meta.name)
    try:
        spec = f.obj(d, "spec", required=True)
        try:
            min_count = _min_count(spec, "minCount")
            topology = f.obj(spec, "topology")
            unknown = sorted(set(topology) - _TOPOLOGY_KEYS)
            if unknown:
                raise FieldError(f"unknown field {unknown[0]!r}: draco places no gang whose "
                                 "topology it does not understand", "topology")
            node_label = f.opt_string(topology, "nodeLabel") or None
            attribute = f.opt_string(topology, "deviceAttribute") or None
            if attribute is not None:
                attribute = _qualified(attribute, "topology.deviceAttribute")
            wait = f.opt_integer(spec, "waitSeconds")
            if wait is not None and wait < 1:
                raise FieldError(f"must be at least 1, not {wait}", "waitSeconds")
        except FieldError as e:
            raise e.at("spec") from None
    except FieldError as e:
        raise ModelError(ref, e.path, e.message) from None
    return Gang(meta, "Gang", min_count, node_label, attribute, wait)


def parse_pod_group(d: Mapping[str, Any]) -> Gang | None:
    """A `scheduling.k8s.io/v1beta1` PodGroup with a gang policy; None for a `basic`
    one (no gang: its pods go one by one)."""
    meta = parse_meta(d, namespaced=True)
    ref = ObjectRef("PodGroup", meta.namespace, meta.name)
    try:
        spec = f.obj(d, "spec", required=True)
        try:
            parent = f.opt_string(spec, "parentCompositePodGroupName")
            if parent:
                raise FieldError(
                    f"part of CompositePodGroup {parent!r}: draco does not implement composite "
                    "pod groups (CompositePodGroup, beta and off by default in 1.38) and places "
                    "none of this group's pods, rather than some of a workload that must start "
                    "whole", "parentCompositePodGroupName")
            policy = f.obj(spec, "schedulingPolicy")
            gang = f.opt_obj(policy, "gang")
            if gang is None:
                return None
            preemption = f.enum(spec, "preemptionPolicy", PREEMPTION_POLICIES,
                                default="PreemptLowerPriority")
            try:
                min_count = _min_count(gang, "minCount")
            except FieldError as e:
                raise e.at("gang").at("schedulingPolicy") from None
            constraints = f.obj(spec, "schedulingConstraints")
            keys = [f.string(f.as_object(t), "key", required=True)
                    for t in f.lst(constraints, "topology")]
            if len(keys) > 1:
                raise FieldError("draco places a gang in one topology domain: at most one "
                                 "key", "schedulingConstraints.topology")
        except FieldError as e:
            raise e.at("spec") from None
    except FieldError as e:
        raise ModelError(ref, e.path, e.message) from None
    return Gang(meta, "PodGroup", min_count, keys[0] if keys else None,
                preemption_policy=preemption)


__all__ = ["GANG_LABEL", "Gang", "gang_of", "parse_gang", "parse_pod_group"]
