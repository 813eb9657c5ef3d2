"""Which node a preemption picks among those that work: upstream's pickOneNodeForPreemption
(kube-scheduler's default preemption), criterion by criterion, as a table. Nodes a and b
have two GPUs each; each victim holds one GPU of its node; the preemptor asks two."""

from __future__ import annotations

from typing import Any

import pytest

from tests.gangs.world import classes, gpus, node, node_slice
from tests.preemption.test_victims import decide, pdb, preemptor, running

Victim = tuple[int, str, bool]  # priority, start day ("" = not started), under a PDB allowing none


def world(a: list[Victim], b: list[Victim]) -> list[dict[str, Any]]:
    objs = [*classes(), pdb("guard", 0, guarded="yes")]
    for name, victims in (("a", a), ("b", b)):
        objs += [node(name), *node_slice(name, gpus(2))]
        for i, (prio, day, guarded) in enumerate(victims):
            devices = [f"gpu-{i}"] if len(victims) == 2 else ["gpu-0", "gpu-1"]
            c, p = running(f"{name}{i}", name, *devices, priority=prio,
                           started=f"2026-01-0{day}T00:00:00Z" if day else "2026-01-01T00:00:00Z",
                           labels={"guarded": "yes"} if guarded else None)
            if not day:
                del p["status"]["startTime"]
            objs += [c, p]
    return [*objs, *preemptor(count=2)]


@pytest.mark.parametrize(("a", "b", "node"), [
    # 1. fewest PodDisruptionBudget violations, before any priority
    ([(1, "1", True), (1, "1", False)], [(50, "1", False), (50, "1", False)], "b"),
    # 2. the lowest highest-victim priority
    ([(50, "1", False), (1, "1", False)], [(10, "1", False), (10, "1", False)], "b"),
    # 3. the lowest sum of priorities, each raised by 2^31 as upstream: one victim of
    #    priority 10 beats two of priorities 10 and -5 (a plain sum would pick b)
    ([(10, "1", False)], [(10, "1", False), (-5, "1", False)], "a"),
    #    ... and with equal counts the plain sum decides
    ([(10, "1", False), (5, "1", False)], [(10, "1", False), (2, "1", False)], "b"),
    # 5. per node the EARLIEST start among its highest-priority victims; the node where
    #    that is the latest wins: a's earliest is day 1, b's day 2 (a's latest, day 4,
    #    does not count)
    ([(1, "1", False), (1, "4", False)], [(1, "2", False), (1, "3", False)], "b"),
    #    only the highest-priority victims' starts count (b's priority-0 victim started first)
    ([(1, "2", False), (1, "2", False)], [(1, "3", False), (0, "1", False)], "b"),
    #    a victim not started yet counts as starting now: later than any start
    ([(1, "5", False), (1, "5", False)], [(1, "", False), (1, "", False)], "b"),
    # 6. a full tie: the first node tried (by name)
    ([(1, "2", False), (1, "3", False)], [(1, "3", False), (1, "2", False)], "a"),
])
def test_the_node_is_chosen_as_upstream_chooses(a: list[Victim], b: list[Victim], node: str) -> None:
    doc = decide(world(a, b))
    assert doc["status"] == "preempt", doc["reason"]
    assert doc["node"] == node
    assert all(v.split("/")[1].startswith(node) for v in doc["victims"])
