"""PodDisruptionBudgets, as far as preemption reads them (policy/v1).

A budget selects pods of its namespace by label; `status.disruptionsAllowed` is how many
of them may go now. Upstream's preemption counts a victim against a budget only when
the budget's selector is not empty and matches the victim's labels; each victim a
budget selects uses one of its allowed disruptions, and the victims beyond them are
violations.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from operators.model import fields as f
from operators.model.errors import FieldError, ModelError, ObjectRef
from operators.model.meta import ObjectMeta, parse_meta
from operators.model.selectors import NODE_SELECTOR_OPERATORS, NodeSelectorRequirement

LABEL_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


@dataclass(frozen=True, slots=True)
class DisruptionBudget:
    meta: ObjectMeta
    match_labels: Mapping[str, str]
    match_expressions: tuple[NodeSelectorRequirement, ...]
    disruptions_allowed: int

    @property
    def empty(self) -> bool:
        return not self.match_labels and not self.match_expressions

    def selects(self, namespace: str, labels: Mapping[str, str]) -> bool:
        """Upstream: an empty selector selects nothing here, nor does a pod without labels."""
        if namespace != self.meta.namespace or self.empty or not labels:
            return False
        if any(labels.get(k) != v for k, v in self.match_labels.items()):
            return False
        return all(r.matches(labels.get(r.key)) for r in self.match_expressions)


def _requirement(d: Mapping[str, Any]) -> NodeSelectorRequirement:
    op = f.string(d, "operator", required=True)
    if op not in LABEL_OPERATORS:
        allowed = ", ".join(o for o in NODE_SELECTOR_OPERATORS if o in LABEL_OPERATORS)
        raise FieldError(f"unknown operator {op!r} (one of {allowed})", "operator")
    return NodeSelectorRequirement(f.string(d, "key", required=True), op, f.string_list(d, "values"))


def parse_disruption_budget(d: Mapping[str, Any]) -> DisruptionBudget:
    meta = parse_meta(d, namespaced=True)
    try:
        try:
            spec = f.obj(d, "spec")
            selector = f.obj(spec, "selector")
            labels = f.string_map(selector, "matchLabels")
            exprs = f.objects(selector, "matchExpressions", _requirement)
        except FieldError as e:
            raise e.at("selector").at("spec") from None
        try:
            allowed = f.integer(f.obj(d, "status"), "disruptionsAllowed")
        except FieldError as e:
            raise e.at("status") from None
    except FieldError as e:
        raise ModelError(ObjectRef("PodDisruptionBudget", meta.namespace, meta.name), e.path,
                         e.message) from None
    return DisruptionBudget(meta, labels, tuple(exprs), allowed)


__all__ = ["DisruptionBudget", "parse_disruption_budget"]
