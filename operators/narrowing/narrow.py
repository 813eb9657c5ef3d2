"""KEP-3838 narrowing: where a gated pod may run once its claims are allocated.

A pod gated by draco has its claims allocated first; each allocation says which nodes can
reach its devices (`status.allocation.nodeSelector`, null for every node). Before the gate
comes off, the pod's own placement must shrink to nodes that can reach all of them, or
kube-scheduler could bind it where its devices are not. KEP-3838 allows exactly one kind of
change while a pod is gated: narrowing. Concretely the API server accepts
  * `spec.nodeSelector`: new keys only;
  * required node affinity: anything when the pod had none (or no terms), otherwise the
    same terms in the same order, each keeping its requirements and gaining new ones at
    the end — no term may be added or removed;
  * preferred node affinity and everything else: untouched here.

The rule draco follows (deterministic; the README should carry it for users):
  1. The allocations' selectors are intersected exactly: the OR of every combination of
     one term per allocation, each combination the AND of its terms, in allocation and
     term order, with duplicate requirements, duplicate combinations and combinations
     that provably match no node dropped.
  2. Pod without required node affinity: the intersection becomes its required node
     affinity (exact).
  3. Pod with required terms: each term gets one combination appended. For each term,
     draco finds the combinations that could match a node together with that term (and
     the pod's nodeSelector). None: the term matched no allowed node anyway and gets the
     first combination. One: it gets that one. Exact so far: AND distributes over OR,
     and combinations left out provably add no node.
  4. Several: the term cannot express their OR without adding terms, so draco narrows
     further: the term gets the first combination (in the order of rule 1) that the
     chosen node satisfies, i.e. per allocation its first term accepting that node.
     The pod keeps the chosen node and accepts a subset of the exact intersection
     (`exact` is False). Without a chosen node draco refuses (ChosenNodeRequired).
  5. When the intersection has more than `max_terms` combinations, every term (or, for a
     pod without affinity, the new single term) gets rule 4's combination; refused
     without a chosen node.
`spec.nodeSelector` is never changed; draco's gate is removed and every other gate kept.

Refusals (`CannotNarrow.reason`, CamelCase as for Events) name why the gate must stay.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from operators.model import FieldError, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm
from operators.model.selectors import parse_node_selector
from operators.narrowing.satisfiable import satisfiable

DRACO_GATE = "resource.draco.dev/allocation"
MAX_TERMS = 16

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"

Reason = Literal[
    "NotGated",  # draco's gate is not on the pod: not draco's to narrow
    "AlreadyBound",  # spec.nodeName is set
    "InvalidSelector",  # the pod's or an allocation's selector cannot be read
    "PodRejectsChosenNode",  # the pod's own nodeSelector/affinity exclude the chosen node
    "AllocationRejectsChosenNode",  # some allocation's devices are unreachable from it
    "NoCommonNodes",  # provably no node satisfies the pod and every allocation
    "ChosenNodeRequired",  # only a narrower-than-exact rewrite is possible; no node given
    # Set by the controller, which knows the nodes (see `operators.narrowing.nodes`):
    "UntoleratedNodeTaint",  # every known node the narrowed pod accepts has a taint it does not tolerate
    "NodeUnschedulable",  # ... or is cordoned
]


@dataclass(frozen=True, slots=True)
class Narrowed:
    """The new values of the pod's spec fields; send them in one update with the gate removal.

    `affinity` is the whole `spec.affinity` (pod (anti-)affinity and preferred terms copied
    untouched), None when the pod has none and needs none. `node_selector` is the pod's own,
    unchanged. `exact` is False when rule 4 or 5 narrowed beyond the exact intersection.
    """

    node_selector: Mapping[str, str] | None
    affinity: Mapping[str, Any] | None
    scheduling_gates: tuple[Mapping[str, Any], ...]
    exact: bool
    affinity_changed: bool

    @property
    def ok(self) -> Literal[True]:
        return True

    def spec_fields(self) -> dict[str, Any]:
        """The spec keys to set (a missing key stays absent, `schedulingGates` may be [])."""
        out: dict[str, Any] = {"schedulingGates": [dict(g) for g in self.scheduling_gates]}
        if self.node_selector is not None:
            out["nodeSelector"] = dict(self.node_selector)
        if self.affinity is not None:
            out["affinity"] = _copy(self.affinity)
        return out

    def apply(self, pod: Mapping[str, Any]) -> dict[str, Any]:
        """The pod as it should be after the update (the input is not modified)."""
        new = dict(pod)
        spec = dict(pod.get("spec") or {})
        for key, value in self.spec_fields().items():
            spec[key] = value
        if not spec["schedulingGates"]:
            del spec["schedulingGates"]
        new["spec"] = spec
        return new


@dataclass(frozen=True, slots=True)
class CannotNarrow:
    reason: Reason
    message: str

    @property
    def ok(self) -> Literal[False]:
        return False


NarrowingResult = Narrowed | CannotNarrow

# One combination of allocation terms: label requirements, field requirements.
Combination = tuple[tuple[NodeSelectorRequirement, ...], tuple[NodeSelectorRequirement, ...]]


def narrow(
    pod: Mapping[str, Any],
    allocation_node_selectors: Sequence[Mapping[str, Any] | None],
    chosen_node: str | None = None,
    chosen_node_labels: Mapping[str, str] | None = None,
    *,
    gate: str = DRACO_GATE,
    max_terms: int = MAX_TERMS,
) -> NarrowingResult:
    """Narrow a gated pod to the nodes its allocations allow (rules in the module doc).

    `chosen_node_labels` are the chosen node's labels (None: a node without labels).
    """
    spec = pod.get("spec") or {}
    gates = tuple(g for g in spec.get("schedulingGates") or () if isinstance(g, Mapping))
    if not any(g.get("name") == gate for g in gates):
        return CannotNarrow("NotGated", f"the pod does not carry the scheduling gate {gate}")
    if spec.get("nodeName"):
        return CannotNarrow("AlreadyBound", f"the pod is already bound to {spec['nodeName']}")
    kept_gates = tuple(g for g in gates if g.get("name") != gate)
    try:
        node_selector, affinity, old_terms = _pod_placement(spec)
    except FieldError as e:
        return CannotNarrow("InvalidSelector", f"pod spec.{e.path}: {e.message}")
    allocations: list[tuple[int, NodeSelector]] = []
    for i, raw in enumerate(allocation_node_selectors):
        if raw is None:
            continue
        try:
            allocations.append((i, parse_node_selector(raw)))
        except FieldError as e:
            where = f"allocation {i} nodeSelector" + (f".{e.path}" if e.path else "")
            return CannotNarrow("InvalidSelector", f"{where}: {e.message}")

    labels = chosen_node_labels or {}
    if chosen_node is not None:
        if not _pod_accepts(node_selector, old_terms, chosen_node, labels):
            return CannotNarrow(
                "PodRejectsChosenNode",
                f"the pod's {_choice_text(node_selector, old_terms)} excludes node {chosen_node}, "
                "where its devices are; narrowing there would leave the pod no node",
            )
        for i, sel in allocations:
            if not sel.matches(chosen_node, labels):
                return CannotNarrow(
                    "AllocationRejectsChosenNode",
                    f"the devices of allocation {i} are not reachable from node {chosen_node}",
                )

    base = tuple(NodeSelectorRequirement(k, "In", (v,)) for k, v in node_selector.items())
    selectors = [sel for _, sel in allocations]
    combos = _intersection(selectors, base, max_terms)
    exact = True
    if combos is None:  # rule 5
        if chosen_node is None:
            return CannotNarrow(
                "ChosenNodeRequired",
                f"the allocations' common nodes need more than {max_terms} selector terms; "
                "narrowing to a part of them needs the chosen node",
            )
        combos = [_first_accepting(selectors, chosen_node, labels)]
        exact = False
    if not combos:
        return CannotNarrow("NoCommonNodes", "no node can satisfy every allocation and the pod")
    node_sel = _copy_map(spec, "nodeSelector")
    if combos == [((), ())]:  # no allocation restricts the nodes
        return Narrowed(node_sel, affinity, kept_gates, True, False)

    if not old_terms:  # rule 2
        terms = [_term_api(c) for c in combos]
    else:  # rules 3 and 4
        chosen: Combination | None = None
        picks: list[Combination] = []
        any_possible = False
        for _, p in old_terms:
            possible = [
                c for c in combos
                if satisfiable(base + p.match_expressions + c[0], p.match_fields + c[1])
            ]
            any_possible = any_possible or bool(possible)
            if len(possible) <= 1:
                picks.append(possible[0] if possible else combos[0])
                continue
            if chosen_node is None:
                return CannotNarrow(
                    "ChosenNodeRequired",
                    "the allocations allow several alternative node sets that the pod's "
                    "node affinity terms cannot express; narrowing to one needs the chosen node",
                )
            if chosen is None:
                chosen = _first_accepting(selectors, chosen_node, labels)
            picks.append(chosen)
            exact = False
        if not any_possible:
            return CannotNarrow(
                "NoCommonNodes",
                "no node can satisfy both the pod's node affinity and every allocation",
            )
        terms = [_append(raw, p, c) for (raw, p), c in zip(old_terms, picks, strict=True)]
    new_affinity = dict(affinity or {})
    node_affinity = dict(new_affinity.get("nodeAffinity") or {})
    node_affinity[REQUIRED] = {"nodeSelectorTerms": terms}
    new_affinity["nodeAffinity"] = node_affinity
    return Narrowed(node_sel, new_affinity, kept_gates, exact, True)


def pod_rejects(pod: Mapping[str, Any], node: str, labels: Mapping[str, str]) -> CannotNarrow | None:
    """`PodRejectsChosenNode` when the pod's own nodeSelector or required node affinity
    (someone else's node choice) excludes NODE, the node its devices pin; None when it
    accepts it or cannot be read (narrow says so). A narrowing proven possible without the
    node could still pin the pod to a node that choice excludes: label selectors cannot be
    proven to exclude a node name without the node's labels."""
    try:
        node_selector, _, terms = _pod_placement(pod.get("spec") or {})
    except FieldError:
        return None
    if _pod_accepts(node_selector, terms, node, labels):
        return None
    return CannotNarrow(
        "PodRejectsChosenNode",
        f"the pod's {_choice_text(node_selector, terms)} excludes node {node}, where its devices "
        "are; narrowing there would leave the pod no node")


def _choice_text(node_selector: Mapping[str, str],
                 terms: Sequence[tuple[Mapping[str, Any], NodeSelectorTerm]]) -> str:
    """The node choice someone else wrote on the pod, in words (for the refusal)."""
    parts = []
    if node_selector:
        parts.append("nodeSelector " + ",".join(f"{k}={v}" for k, v in sorted(node_selector.items())))
    if terms:
        words = []
        for _, t in terms:
            reqs = [f"{r.key} {r.operator}" + (f" ({','.join(r.values)})" if r.values else "")
                    for r in (*t.match_expressions, *t.match_fields)]
            words.append(" and ".join(reqs) or "(empty term)")
        parts.append("required node affinity " + " or ".join(words))
    text = " and ".join(parts) or "nodeSelector or required node affinity"
    return text if len(text) <= 240 else text[:237] + "..."


def _pod_placement(
    spec: Mapping[str, Any],
) -> tuple[Mapping[str, str], Mapping[str, Any] | None, list[tuple[Mapping[str, Any], NodeSelectorTerm]]]:
    """(nodeSelector, affinity, [(raw term, parsed term)]) — no terms means none required."""
    raw_sel = spec.get("nodeSelector") or {}
    if not isinstance(raw_sel, Mapping) or not all(
        isinstance(v, str) for v in raw_sel.values()
    ):
        raise FieldError("expected a map of strings", "nodeSelector")
    affinity = spec.get("affinity")
    if affinity is not None and not isinstance(affinity, Mapping):
        raise FieldError("expected an object", "affinity")
    node_affinity = (affinity or {}).get("nodeAffinity")
    if node_affinity is not None and not isinstance(node_affinity, Mapping):
        raise FieldError("expected an object", "nodeAffinity", "affinity")
    required = (node_affinity or {}).get(REQUIRED)
    if required is None:
        return raw_sel, affinity, []
    try:
        parsed = parse_node_selector(required)
    except FieldError as e:
        raise e.at(REQUIRED).at("nodeAffinity").at("affinity") from None
    raws = required.get("nodeSelectorTerms") or []
    return raw_sel, affinity, list(zip(raws, parsed.terms, strict=True))


def _pod_accepts(
    node_selector: Mapping[str, str],
    old_terms: list[tuple[Mapping[str, Any], NodeSelectorTerm]],
    node: str,
    labels: Mapping[str, str],
) -> bool:
    if any(labels.get(k) != v for k, v in node_selector.items()):
        return False
    return not old_terms or any(t.matches(node, labels) for _, t in old_terms)


def _merge(a: Combination, term: NodeSelectorTerm) -> Combination:
    exprs = a[0] + tuple(r for r in term.match_expressions if r not in a[0])
    fields = a[1] + tuple(r for r in term.match_fields if r not in a[1])
    return exprs, fields


def _intersection(
    selectors: list[NodeSelector], base: tuple[NodeSelectorRequirement, ...], max_terms: int
) -> list[Combination] | None:
    """The exact AND of the selectors as an OR of combinations; None past `max_terms`.

    `base` (the pod's nodeSelector as requirements) only prunes: combinations it makes
    unsatisfiable are dropped, and it is not part of what is returned.
    """
    combos: list[Combination] = [((), ())]
    for sel in selectors:
        out: list[Combination] = []
        for c in combos:
            for t in sel.terms:
                if not t.match_expressions and not t.match_fields:
                    continue  # an empty term matches no node
                m = _merge(c, t)
                if m not in out and satisfiable(base + m[0], m[1]):
                    out.append(m)
                    if len(out) > max_terms:
                        return None
        combos = out
    return combos


def _first_accepting(
    selectors: list[NodeSelector], node: str, labels: Mapping[str, str]
) -> Combination:
    """Rule 4: per allocation its first term that accepts the node, ANDed in order."""
    combo: Combination = ((), ())
    for sel in selectors:
        term = next(t for t in sel.terms if t.matches(node, labels))
        combo = _merge(combo, term)
    return combo


def _append(raw: Mapping[str, Any], parsed: NodeSelectorTerm, combo: Combination) -> dict[str, Any]:
    """The existing term verbatim, followed by the combination's new requirements."""
    out = _copy(raw)
    for key, have, add in (
        ("matchExpressions", parsed.match_expressions, combo[0]),
        ("matchFields", parsed.match_fields, combo[1]),
    ):
        new = [r.to_api() for r in add if r not in have]
        if new:
            out[key] = list(out.get(key) or []) + new
    return out


def _term_api(combo: Combination) -> dict[str, Any]:
    return NodeSelectorTerm(combo[0], combo[1]).to_api()


def _copy_map(spec: Mapping[str, Any], key: str) -> Mapping[str, str] | None:
    v = spec.get(key)
    return None if v is None else dict(v)


def _copy(value: Any) -> Any:
    """A deep copy of plain JSON (much cheaper than copy.deepcopy)."""
    if isinstance(value, Mapping):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_copy(v) for v in value]
    return value
