"""Gate etiquette: draco acts on a pod only once its own scheduling gate is the last one.

kube-scheduler leaves a pod alone while any scheduling gate is on it: each gate is some
controller that has not decided yet (Kueue's `kueue.x-k8s.io/admission` until the
workload has quota, `kueue.x-k8s.io/topology` until its topology-aware scheduling has
written the pod's nodeSelector, anything else). draco's gate stands in for
kube-scheduler's allocation step, so draco waits for the same thing: it allocates,
preempts, places gangs and narrows only for pods whose remaining gates are draco's own
and those the operator named as gates draco may act beside (`draco run
--act-beside-gates`, the chart's `allocator.actBesideGates`; `*` names every gate, for
users who want draco first). Pure: shared by the allocator, the narrowing controller and
`draco allocate`.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable

DRACO_GATE = "resource.draco.dev/allocation"
EVERY_GATE = "*"

# a scheduling gate's name is a qualified name (an optional DNS-subdomain prefix, a slash,
# and a name of up to 63 characters), as the API server validates it
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_PREFIX = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_QUALIFIED = re.compile(rf"^({_PREFIX}/)?{_NAME}$")


def other_gates(gates: Iterable[str], own: str = DRACO_GATE,
                beside: Collection[str] = ()) -> tuple[str, ...]:
    """The gates of GATES (in the pod's order) that draco waits for: every gate but OWN
    and those named in BESIDE (`*`: none at all)."""
    if EVERY_GATE in beside:
        return ()
    return tuple(g for g in gates if g != own and g not in beside)


def waiting_for(gates: Collection[str]) -> str:
    """The words a condition, an Event or `draco allocate` uses for gates draco waits for."""
    if len(gates) == 1:
        return f"waiting for gate {next(iter(gates))}"
    return f"waiting for gates {', '.join(gates)}"


def parse_gate_list(text: str | None) -> frozenset[str]:
    """A comma-separated list of gate names (or `*`) as the flag, the environment and the
    chart give it; raises ValueError naming an entry that is no gate name."""
    names = [part.strip() for part in (text or "").split(",")]
    out: set[str] = set()
    for name in names:
        if not name:
            continue
        if name != EVERY_GATE and (len(name) > 316 or not _QUALIFIED.match(name)):
            raise ValueError(f"{name!r} is not a scheduling gate name (a qualified name such as "
                             "kueue.x-k8s.io/admission, or * for every gate)")
        out.add(name)
    return frozenset(out)


def gate_setting(value: object) -> frozenset[str]:
    """The act-beside setting as a controller's settings carry it: the flag's text, or
    any collection of names."""
    if value is None or value == "":
        return frozenset()
    if isinstance(value, str):
        return parse_gate_list(value)
    if isinstance(value, Iterable):
        return frozenset(str(v) for v in value)
    raise ValueError(f"not a list of scheduling gates: {value!r}")


__all__ = ["DRACO_GATE", "EVERY_GATE", "gate_setting", "other_gates", "parse_gate_list", "waiting_for"]
