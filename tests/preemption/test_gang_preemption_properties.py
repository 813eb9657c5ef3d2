"""Generated small worlds for a gang as the preemptor: what `draco allocate --preempt`
answers is checked against the gang placement itself (`draco allocate --gang`) on the
world with pods removed.

- preempt: every victim has a lower priority than every member to place; with the
  victims gone, the gang is placed; the nominated devices are distinct;
- impossible: even with every lower-priority running pod gone the gang cannot be
  placed (draco never gives up on a preemption that would work, in worlds this small);
- fits: the gang is placed with no one gone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from operators.cli.allocate_preempt import preempt_document
from operators.cli.state import build_tracker
from operators.model import NamespacedName
from tests.gangs.world import NS, classes, gang, member, node, node_slice, place
from tests.preemption.test_victims import running

GANG_PRIORITY = 2


@dataclass(frozen=True)
class World:
    nodes: tuple[tuple[str, str, int, tuple[int | None, ...]], ...]  # name, rack, memory, holders
    members: tuple[int, ...]  # each member's GPU count
    topology: str  # "" or "rack"


@st.composite
def worlds(draw: st.DrawFn) -> World:
    nodes = []
    for n in range(draw(st.integers(1, 3))):
        # each device: None (free) or the priority of the running pod holding it
        holders = tuple(draw(st.one_of(st.none(), st.integers(0, 3)))
                        for _ in range(draw(st.integers(1, 3))))
        nodes.append((f"n{n}", draw(st.sampled_from("ab")), draw(st.integers(2, 6)), holders))
    members = tuple(draw(st.integers(1, 2)) for _ in range(draw(st.integers(1, 3))))
    return World(tuple(nodes), members, draw(st.sampled_from(["", "rack"])))


def objects(w: World, without: set[str] = frozenset()) -> list[dict[str, Any]]:  # type: ignore[assignment]
    """The world as API objects; every device a partition consuming 1 of its node's
    memory counter; running pods named `r-NODE-DEVICE`, minus WITHOUT."""
    objs: list[dict[str, Any]] = [*classes(), gang("g", len(w.members), node_label=w.topology or None)]
    for name, rack, memory, holders in w.nodes:
        objs.append(node(name, rack=rack))
        objs += node_slice(name, [{"name": f"d{i}", "consumesCounters": [
            {"counterSet": "mem", "counters": {"mem": {"value": "1"}}}]} for i in range(len(holders))],
            counters=[{"name": "mem", "counters": {"mem": {"value": str(memory)}}}])
        for i, prio in enumerate(holders):
            pod = f"r-{name}-d{i}"
            if prio is not None and pod not in without:
                objs += running(pod, name, f"d{i}", priority=prio)
    for i, count in enumerate(w.members):
        c, p = member(f"m-{i}", "g", [{"name": "gpu", "class": "class-a", "count": count}])
        p["spec"]["priority"] = GANG_PRIORITY
        objs += [c, p]
    return objs


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds())
def test_gang_preemption_agrees_with_the_placement(w: World) -> None:
    objs = objects(w)
    doc = preempt_document(build_tracker(objs), objs, NamespacedName(NS, "m-0"))
    priorities = {f"{NS}/r-{name}-d{i}": prio for name, _, _, holders in w.nodes
                  for i, prio in enumerate(holders) if prio is not None}
    lower = {label.split("/")[1] for label, prio in priorities.items() if prio < GANG_PRIORITY}
    event(doc["status"])
    if doc["status"] == "fits":
        assert place(objs)["status"] == "allocated"
    elif doc["status"] == "preempt":
        assert doc["victims"] and all(priorities[v] < GANG_PRIORITY for v in doc["victims"])
        assert len(set(doc["devices"])) == len(doc["devices"]) == sum(w.members)
        gone = {v.split("/")[1] for v in doc["victims"]}
        assert place(objects(w, gone))["status"] == "allocated", doc
        assert place(objs)["status"] == "unsatisfiable"
    else:
        assert doc["status"] == "impossible"
        assert place(objects(w, lower))["status"] == "unsatisfiable", doc
