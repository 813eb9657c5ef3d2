"""Which new pods get draco's scheduling gate at admission, and the JSON patch that adds it.

Pure: the webhook shell (`operators.narrowing.webhook`) feeds it the admitted pod and
its namespace's labels. A pod is gated when it uses ResourceClaims (a pod without
claims has nothing for draco to allocate, so a gate would only hold it back) and both
configured selectors match; an empty selector matches everything, as in kubectl.
Selectors use kubectl's label-selector syntax: `a=b`, `a==b`, `a!=b`, `a in (x,y)`,
`a notin (x)`, `a` (exists), `!a` (absent), joined by commas.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from operators.narrowing.narrow import DRACO_GATE

_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_VALUE = r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_CMP = re.compile(rf"^\s*({_KEY})\s*(==|!=|=)\s*({_VALUE})\s*$")
_SET = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s*\(([^()]*)\)\s*$")
_EXISTS = re.compile(rf"^\s*(!?)\s*({_KEY})\s*$")
_VALUE_RE = re.compile(rf"^{_VALUE}$")


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "in", "notin", "exists", "absent"
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.op == "exists":
            return self.key in labels
        if self.op == "absent":
            return self.key not in labels
        if self.op == "in":
            return labels.get(self.key) in self.values
        return labels.get(self.key) not in self.values


@dataclass(frozen=True)
class Selector:
    """A parsed label selector; `text` is kept for logs and error messages."""

    text: str = ""
    requirements: tuple[Requirement, ...] = field(default_factory=tuple)

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        return all(r.matches(labels or {}) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements


def _split(text: str) -> list[str]:
    """Commas separate requirements except inside `in (...)` value lists."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced ')' in {text!r}")
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise ValueError(f"unbalanced '(' in {text!r}")
    parts.append(text[start:])
    return parts


def parse_selector(text: str | None) -> Selector:
    """kubectl's `-l` syntax; raises ValueError naming the requirement it cannot read."""
    if not text or not text.strip():
        return Selector()
    reqs: list[Requirement] = []
    for part in _split(text):
        if m := _SET.match(part):
            values = [v.strip() for v in m.group(4).split(",")]
            if not values or any(not _VALUE_RE.match(v) for v in values) or values == [""]:
                raise ValueError(f"cannot parse label requirement {part.strip()!r}")
            reqs.append(Requirement(m.group(1), m.group(3), frozenset(values)))
        elif m := _CMP.match(part):
            key, op, value = m.group(1), m.group(3), m.group(4)
            reqs.append(Requirement(key, "notin" if op == "!=" else "in", frozenset({value})))
        elif m := _EXISTS.match(part):
            reqs.append(Requirement(m.group(2), "absent" if m.group(1) else "exists"))
        else:
            raise ValueError(f"cannot parse label requirement {part.strip()!r}")
    return Selector(text.strip(), tuple(reqs))


def wants_gate(pod: Mapping[str, Any], namespace_labels: Mapping[str, str] | None,
               namespace_selector: Selector, pod_selector: Selector) -> bool:
    spec = pod.get("spec") or {}
    if not spec.get("resourceClaims"):
        return False
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return pod_selector.matches(labels) and namespace_selector.matches(namespace_labels)


def gate_ops(pod: Mapping[str, Any], gate: str = DRACO_GATE) -> list[dict[str, Any]]:
    """JSON patch (RFC 6902) ops that leave `gate` last among the pod's gates: appended when
    absent, moved to the end when another webhook appended its own gate after draco's ran
    (the chart re-invokes this webhook then); none when it is last already."""
    gates = (pod.get("spec") or {}).get("schedulingGates")
    if not gates:
        return [{"op": "add", "path": "/spec/schedulingGates", "value": [{"name": gate}]}]
    where = [i for i, g in enumerate(gates) if g.get("name") == gate]
    if where == [len(gates) - 1]:
        return []
    if where:
        return [{"op": "remove", "path": f"/spec/schedulingGates/{where[0]}"},
                {"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": gate}}]
    return [{"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": gate}}]


def apply_ops(pod: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """Apply the ops `gate_ops` returns (only its shapes) to `pod` in place."""
    spec = pod.setdefault("spec", {})
    for op in ops:
        path = op["path"]
        if path == "/spec/schedulingGates":
            spec["schedulingGates"] = list(op["value"])
        elif path == "/spec/schedulingGates/-":
            spec.setdefault("schedulingGates", []).append(op["value"])
        elif op["op"] == "remove" and path.startswith("/spec/schedulingGates/"):
            del spec["schedulingGates"][int(path.rsplit("/", 1)[1])]
        else:
            raise ValueError(f"unexpected patch op {op!r}")
    return pod
