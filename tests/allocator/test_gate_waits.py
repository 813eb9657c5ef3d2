"""GateWaits on its own: what a pod behind another controller's gate is told and how
often, and when a gang waits whole, with a recording reporter instead of the API."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from operators.allocator_controller.gate_waits import GATE_WAIT, GateWaits
from operators.kube.pod_reports import Reported
from operators.model import NamespacedName, Pod
from operators.model.gates import DRACO_GATE
from operators.model.objects import parse_pod_object

KUEUE = "kueue.x-k8s.io/admission"
TOPOLOGY = "kueue.x-k8s.io/topology"
NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


class Recorder:
    def __init__(self) -> None:
        self.told: list[tuple[Any, ...]] = []

    async def event(self, key: NamespacedName, uid: str, reason: str, message: str,
                    type_: str = "Normal") -> None:
        self.told.append(("event", key.name, reason, type_, message))

    async def condition(self, key: NamespacedName, uid: str, status: str, reason: str, message: str,
                        since: str | None = None) -> None:
        self.told.append(("condition", key.name, status, reason, since))


def pod(name: str, gates: list[str], *, node: str = "", phase: str = "Pending",
        deleting: bool = False) -> Pod:
    meta: dict[str, Any] = {"name": name, "namespace": "team", "uid": f"uid-{name}"}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-28T11:00:00Z"
    spec: dict[str, Any] = {"schedulingGates": [{"name": g} for g in gates], "containers": []}
    if node:
        spec["nodeName"] = node
    return parse_pod_object({"metadata": meta, "spec": spec, "status": {"phase": phase}})


def waits(reported: dict[NamespacedName, Reported] | None = None,
          beside: frozenset[str] = frozenset()) -> tuple[GateWaits, Recorder]:
    rec = Recorder()
    return GateWaits(rec, {} if reported is None else reported, DRACO_GATE, beside,
                     lambda: NOW, lambda: 100.0), rec


async def test_a_waiting_pod_is_told_once_per_message_with_a_normal_event() -> None:
    gw, rec = waits()
    key = NamespacedName("team", "a")
    await gw.tell(key, "uid-a", f"waiting for gate {KUEUE}")
    await gw.tell(key, "uid-a", f"waiting for gate {KUEUE}")
    message = (f"waiting for gate {KUEUE}: another controller decides first; draco allocates "
               f"once only its gate {DRACO_GATE} remains")
    assert rec.told == [("event", "a", GATE_WAIT, "Normal", message),
                        ("condition", "a", "False", GATE_WAIT, "2026-11-28T12:00:00Z")]
    assert gw.reported[key].reason == GATE_WAIT


async def test_a_new_wait_keeps_the_conditions_transition_time_of_the_same_pod() -> None:
    key = NamespacedName("team", "a")
    reported = {key: Reported("uid-a", "Unschedulable", "no device", "2026-11-28T10:00:00Z", 1.0)}
    gw, rec = waits(reported)
    await gw.tell(key, "uid-a", f"waiting for gate {KUEUE}")
    assert rec.told[-1] == ("condition", "a", "False", GATE_WAIT, "2026-11-28T10:00:00Z")
    assert reported[key].reason == GATE_WAIT  # the controller's map, shared


async def test_a_replaced_pod_gets_a_new_transition_time() -> None:
    key = NamespacedName("team", "a")
    reported = {key: Reported("uid-old", GATE_WAIT, "x", "2026-11-28T10:00:00Z", 1.0)}
    gw, rec = waits(reported)
    await gw.tell(key, "uid-a", f"waiting for gate {KUEUE}")
    assert rec.told[-1][-1] == "2026-11-28T12:00:00Z"


@pytest.mark.parametrize(("members", "beside", "why", "told"), [
    # nobody waits for another gate: the gang is placed as usual
    ([pod("a", [DRACO_GATE]), pod("b", [DRACO_GATE])], frozenset(), None, ()),
    # one member behind Kueue: the whole gang waits, every member draco gates is told
    ([pod("a", [DRACO_GATE]), pod("b", [DRACO_GATE, KUEUE])], frozenset(),
     f"Gang team/g waits: member team/b is waiting for gate {KUEUE}", ("a", "b")),
    # a member behind another gate only (not draco's) makes the gang wait, is not told
    ([pod("a", [DRACO_GATE]), pod("b", [KUEUE, TOPOLOGY])], frozenset(),
     f"Gang team/g waits: member team/b is waiting for gates {KUEUE}, {TOPOLOGY}", ("a",)),
    # gates draco may act beside do not count
    ([pod("a", [DRACO_GATE, KUEUE])], frozenset({KUEUE}), None, ()),
    ([pod("a", [DRACO_GATE, KUEUE])], frozenset({"*"}), None, ()),
    # gone, bound, finished and deleting members count for nothing
    ([None, pod("b", [KUEUE], node="n1"), pod("c", [KUEUE], phase="Succeeded"),
      pod("d", [KUEUE], deleting=True), pod("e", [DRACO_GATE])], frozenset(), None, ()),
    # at most three waiting members are named
    ([pod(n, [DRACO_GATE, KUEUE]) for n in "abcde"], frozenset(),
     "Gang team/g waits: " + "; ".join(f"member team/{n} is waiting for gate {KUEUE}" for n in "abc")
     + "; and 2 more members", tuple("abcde")),
])
def test_when_a_gang_waits_whole(members: list[Pod | None], beside: frozenset[str],
                                 why: str | None, told: tuple[str, ...]) -> None:
    gw, rec = waits(beside=beside)
    wait = gw.gang_wait("Gang", "team/g", members)
    if why is None:
        assert wait is None
    else:
        assert wait is not None
        assert wait.why == why
        assert tuple(p.meta.name for p in wait.told) == told
    assert rec.told == []  # deciding tells nobody: the gang loop spawns the telling
