"""Selectors shared by several kinds: CEL device selectors and core/v1 node selectors.

Node selectors are parsed (not kept raw) because the narrowing and eviction logic
evaluate them against nodes, and because a term with an unknown operator is bad input
the user should hear about at parse time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from operators.model import fields as f
from operators.model.errors import FieldError

NodeSelectorOperator = Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
NODE_SELECTOR_OPERATORS: tuple[str, ...] = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


@dataclass(frozen=True, slots=True)
class DeviceSelector:
    """A CEL expression over `device`; compiled and evaluated by `operators.cel`."""

    expression: str

    def to_api(self) -> dict[str, Any]:
        return {"cel": {"expression": self.expression}}


def parse_device_selectors(
    d: Mapping[str, Any], key: str = "selectors"
) -> tuple[DeviceSelector, ...]:
    return f.objects(d, key, _device_selector)


def _device_selector(item: Mapping[str, Any]) -> DeviceSelector:
    cel = f.obj(item, "cel", required=True)
    try:
        return DeviceSelector(f.string(cel, "expression", required=True))
    except FieldError as e:
        raise e.at("cel") from None


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, value: str | None) -> bool:
        op = self.operator
        if op == "In":
            return value is not None and value in self.values
        if op == "NotIn":
            return value is None or value not in self.values
        if op == "Exists":
            return value is not None
        if op == "DoesNotExist":
            return value is None
        # Gt / Lt compare integers; anything unparsable does not match.
        if value is None or len(self.values) != 1:
            return False
        try:
            have, want = int(value), int(self.values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want

    def to_api(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "operator": self.operator}
        if self.values:
            out["values"] = list(self.values)
        return out


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()

    def matches(self, node_name: str, labels: Mapping[str, str]) -> bool:
        # An empty term selects nothing (core/v1 semantics).
        if not self.match_expressions and not self.match_fields:
            return False
        for req in self.match_expressions:
            if not req.matches(labels.get(req.key)):
                return False
        for req in self.match_fields:
            value = node_name if req.key == "metadata.name" else None
            if not req.matches(value):
                return False
        return True

    def to_api(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.match_expressions:
            out["matchExpressions"] = [r.to_api() for r in self.match_expressions]
        if self.match_fields:
            out["matchFields"] = [r.to_api() for r in self.match_fields]
        return out


@dataclass(frozen=True, slots=True)
class NodeSelector:
    """core/v1 NodeSelector: the terms are ORed, requirements within a term ANDed."""

    terms: tuple[NodeSelectorTerm, ...]

    def matches(self, node_name: str, labels: Mapping[str, str]) -> bool:
        return any(t.matches(node_name, labels) for t in self.terms)

    def to_api(self) -> dict[str, Any]:
        return {"nodeSelectorTerms": [t.to_api() for t in self.terms]}


def _requirement(item: Mapping[str, Any]) -> NodeSelectorRequirement:
    req = NodeSelectorRequirement(
        key=f.string(item, "key", required=True),
        operator=f.enum(item, "operator", NODE_SELECTOR_OPERATORS, default=""),
        values=f.string_list(item, "values"),
    )
    if not req.operator:
        raise FieldError("required field is missing", "operator")
    return req


def _term(t: Mapping[str, Any]) -> NodeSelectorTerm:
    return NodeSelectorTerm(
        match_expressions=f.objects(t, "matchExpressions", _requirement),
        match_fields=f.objects(t, "matchFields", _requirement),
    )


def parse_node_selector(value: object) -> NodeSelector:
    if not isinstance(value, Mapping):
        raise FieldError(f"expected an object, got {f.type_name(value)}")
    return NodeSelector(f.objects(value, "nodeSelectorTerms", _term, required=True))


def opt_node_selector(d: Mapping[str, Any], key: str) -> NodeSelector | None:
    v = d.get(key)
    if v is None:
        return None
    try:
        return parse_node_selector(v)
    except FieldError as e:
        raise e.at(key) from None
