"""Which gated pods the allocator and the narrowing controller act on, side by side.

Both leave alone a pod that is gone, lost draco's gate, is bound or is being deleted;
only the allocator also leaves a finished pod (no devices for a pod that will not run
again), while the narrowing controller still looks at it.
"""

from __future__ import annotations

from typing import Any

import pytest

from operators.allocator.pod_claims import GATE, pod_work
from operators.allocator.pod_claims import NotOurs as AllocatorNotOurs
from operators.cli.state import build_tracker
from operators.model import NamespacedName
from operators.narrowing.readiness import NotOurs as NarrowingNotOurs
from operators.narrowing.readiness import readiness
from tests.allocator.test_controller_allocator import NS, claim, pod


def changed(**fields: Any) -> dict[str, Any]:
    p = pod("a", "c")
    p["metadata"].update(fields.pop("metadata", {}))
    p["spec"].update(fields.pop("spec", {}))
    p["status"].update(fields.pop("status", {}))
    return p


# (case, the pod (None: gone), why the allocator leaves it, why the narrowing controller does)
CASES = [
    ("gated and pending", changed(), None, None),
    ("gone", None, "gone", "gone"),
    ("another controller's gate only", changed(spec={"schedulingGates": [{"name": "example.com/q"}]}),
     "not gated", "not gated"),
    ("bound", changed(spec={"nodeName": "node-0"}), "bound", "bound"),
    ("being deleted", changed(metadata={"deletionTimestamp": "2026-01-01T00:01:00Z"}),
     "deleting", "deleting"),
    ("failed", changed(status={"phase": "Failed"}), "finished", None),
    ("succeeded", changed(status={"phase": "Succeeded"}), "finished", None),
    ("bound and finished", changed(spec={"nodeName": "node-0"}, status={"phase": "Succeeded"}),
     "bound", "bound"),
]


@pytest.mark.parametrize(("case", "the_pod", "allocator", "narrowing"), CASES, ids=[c[0] for c in CASES])
def test_which_pods_each_controller_leaves_alone(case: str, the_pod: dict[str, Any] | None,
                                                 allocator: str | None, narrowing: str | None) -> None:
    tracker = build_tracker([claim("c")] + ([the_pod] if the_pod is not None else []))
    key = NamespacedName(NS, "a")
    work = pod_work(tracker, key, GATE)
    ready = readiness(tracker, key, GATE)
    assert (work.why if isinstance(work, AllocatorNotOurs) else None) == allocator
    assert (ready.why if isinstance(ready, NarrowingNotOurs) else None) == narrowing
