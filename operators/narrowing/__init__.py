"""Gated-pod narrowing (KEP-3838): pure decisions on where a gated pod may run.

Entry point
    narrow(pod, allocation_node_selectors, chosen_node=None, chosen_node_labels=None,
           *, gate=DRACO_GATE, max_terms=MAX_TERMS) -> Narrowed | CannotNarrow
    Narrowed(node_selector, affinity, scheduling_gates, exact, affinity_changed)
        .spec_fields() -> {"schedulingGates", "nodeSelector"?, "affinity"?}
        .apply(pod) -> the updated pod dict
    CannotNarrow(reason, message)   reasons: see `Reason`
    satisfiable(expressions, fields) -> bool   (can any node match this conjunction?)

The rule for intersections the KEP-3838 rules cannot express is in `narrow`'s module doc.
"""

from operators.narrowing.narrow import (
    DRACO_GATE,
    MAX_TERMS,
    CannotNarrow,
    Narrowed,
    NarrowingResult,
    Reason,
    narrow,
)
from operators.narrowing.satisfiable import satisfiable

__all__ = [
    "DRACO_GATE",
    "MAX_TERMS",
    "CannotNarrow",
    "Narrowed",
    "NarrowingResult",
    "Reason",
    "narrow",
    "satisfiable",
]
