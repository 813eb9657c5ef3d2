"""Whether a conjunction of node selector requirements can match any node at all.

Narrowing is one-way: once a gated pod's affinity excludes every node, no later update
can widen it again. So before narrowing without a chosen node to vouch for the result,
draco proves that some node *could* satisfy what it writes, and drops intersection terms
that provably match nothing (they add no node, so dropping them keeps the result exact).

The check is sound for "unsatisfiable": it answers False only when no node, with any
labels whatsoever, can match. Keys are independent (a node may carry any label set), so a
conjunction is satisfiable exactly when every key's requirements are. Candidate values are
tested with the model's own `NodeSelectorRequirement.matches`, so In/NotIn/Gt/Lt agree
with how draco evaluates selectors everywhere else.
"""

from __future__ import annotations

from collections.abc import Iterable

from operators.model import NodeSelectorRequirement


def satisfiable(
    expressions: Iterable[NodeSelectorRequirement],
    fields: Iterable[NodeSelectorRequirement] = (),
) -> bool:
    """True unless no node (any labels, any name) can satisfy all requirements."""
    return _keys_satisfiable(expressions, may_be_absent=True) and _keys_satisfiable(
        fields, may_be_absent=False
    )


def _keys_satisfiable(reqs: Iterable[NodeSelectorRequirement], *, may_be_absent: bool) -> bool:
    by_key: dict[str, list[NodeSelectorRequirement]] = {}
    for r in reqs:
        by_key.setdefault(r.key, []).append(r)
    return all(_key_satisfiable(rs, may_be_absent) for rs in by_key.values())


def _key_satisfiable(reqs: list[NodeSelectorRequirement], may_be_absent: bool) -> bool:
    # A node without the label (labels only; every node has a name).
    if may_be_absent and all(r.matches(None) for r in reqs):
        return True
    # A finite candidate set: any In bounds the value to its listed values.
    allowed: set[str] | None = None
    for r in reqs:
        if r.operator == "In":
            allowed = set(r.values) if allowed is None else allowed & set(r.values)
    if allowed is not None:
        return any(all(r.matches(v) for r in reqs) for v in sorted(allowed))
    # Otherwise the value is unbounded except by NotIn (finite), Gt/Lt (a range).
    if any(r.operator == "DoesNotExist" for r in reqs):
        return False
    low: int | None = None
    high: int | None = None
    excluded: set[str] = set()
    for r in reqs:
        if r.operator == "NotIn":
            excluded.update(r.values)
        elif r.operator in ("Gt", "Lt"):
            bound = _int(r.values)
            if bound is None:
                return False  # such a requirement matches no value at all
            if r.operator == "Gt":
                low = bound if low is None else max(low, bound)
            else:
                high = bound if high is None else min(high, bound)
    if low is None and high is None:
        return True  # some fresh string is outside any finite NotIn list
    if low is not None and high is not None:
        # Integers strictly between the bounds, looking past at most len(excluded) of them.
        start, stop = low + 1, min(high, low + 2 + len(excluded))
        return any(str(x) not in excluded for x in range(start, stop))
    return True  # a half-open integer range has infinitely many values


def _int(values: tuple[str, ...]) -> int | None:
    if len(values) != 1:
        return None
    try:
        return int(values[0])
    except ValueError:
        return None
