"""`place_gang` against a brute force (tests/gangs/oracle.py) on generated small worlds:
racks, cliques, partitions of a node counter, held devices, a network-attached NIC
claim and a node-local accelerator claim shared by members, launchers, All mode,
members beyond minCount. The verdict (placed or not) must be the brute force's, and
any placement draco returns must keep every rule.

CI runs `DRACO_GANG_ORACLE_EXAMPLES` examples (default 150); before a change to the
search, run it with 1,000 or more:
`DRACO_GANG_ORACLE_EXAMPLES=2000 nice -n 10 .venv/bin/python -m pytest -q -p no:cacheprovider tests/gangs/test_gang_oracle.py`
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from tests.gangs.oracle import Ask, Dev, Node, Pod, World, check, core, feasible, objects
from tests.gangs.world import place

EXAMPLES = int(os.environ.get("DRACO_GANG_ORACLE_EXAMPLES", "150"))


@st.composite
def asks(draw: st.DrawFn) -> Ask:
    all_mode = draw(st.integers(0, 7)) == 0
    return Ask(draw(st.integers(1, 2)), draw(st.sampled_from([None, None, None, "x", "y"])),
               False if all_mode else draw(st.integers(0, 3)) == 0, all_mode)


@st.composite
def worlds(draw: st.DrawFn) -> World:
    """Half of the worlds are roomy (more devices, fewer held, larger counters), so
    that gangs of several members fit often enough to exercise the search, not only
    its refusals; a third of the nodes are twins of an earlier one (the search treats
    alike nodes alike)."""
    roomy = draw(st.booleans())
    cliques = st.sampled_from([1, 1, 1, 2] if roomy else [1, 1, 1, 2, None])
    nodes = []
    for n in range(draw(st.integers(1, 3))):
        if nodes and draw(st.integers(0, 2)) == 0:  # a twin of an earlier node
            twin = draw(st.sampled_from(nodes))
            nodes.append(Node(f"n{n}", twin.rack, twin.devices, twin.memory))
            continue
        devs = tuple(Dev(f"d{i}", draw(st.sampled_from("xxy")), draw(cliques),
                         draw(st.integers(0, 12 if roomy else 6)) == 0,
                         draw(st.sampled_from([1, 1, 2])))
                     for i in range(draw(st.integers(2, 5) if roomy else st.integers(0, 5))))
        nodes.append(Node(f"n{n}", draw(st.sampled_from("aab")), devs,
                          draw(st.integers(5, 10) if roomy else st.integers(1, 10))))
    nics = tuple(Dev(f"nic{i}", "x", draw(cliques), draw(st.integers(0, 4)) == 0)
                 for i in range(draw(st.integers(0, 2))))
    pods = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.integers(0, 9))
        own = None if kind == 0 else draw(asks())
        pods.append(Pod(own, nic=bool(nics) and kind in (1, 2, 3) or (kind == 4 and not roomy),
                        accel=kind in (5, 6)))
    accel = Ask(draw(st.sampled_from([1, 1, 2])), draw(st.sampled_from([None, None, "x"])))
    size = draw(st.integers(0, 9))  # 0: one more than there are members (the gang waits)
    min_count = len(pods) + 1 if size == 0 else (draw(st.integers(1, len(pods))) if size < 3
                                                 else len(pods))
    topology = draw(st.sampled_from(["", "rack", "clique", "rack+clique"]))
    return World(tuple(nodes), nics, accel, tuple(pods), min_count, topology)


# the shapes of issue 48's first item, always run
NIC_SHARED = World(
    (Node("n0", "a", (Dev("d0", "x", 1, False),), 5), Node("n1", "a", (Dev("d0", "x", 1, False),), 5)),
    (Dev("nic0", "x", 1, False),), Ask(1, None), (Pod(Ask(1, None), nic=True), Pod(Ask(1, None), nic=True)),
    2, "clique")
ACCEL_SHARED = World(
    (Node("n0", "a", (Dev("d0", "x", 1, False), Dev("d1", "x", 1, False)), 5),
     Node("n1", "a", (Dev("d0", "x", 1, False), Dev("d1", "y", 1, False), Dev("d2", "x", 1, False)), 5)),
    (), Ask(1, None), (Pod(Ask(1, "x"), accel=True), Pod(Ask(1, None), accel=True)), 2, "rack")


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(worlds())
@example(NIC_SHARED)
@example(ACCEL_SHARED)
def test_place_gang_agrees_with_the_brute_force(w: World) -> None:
    doc = place(objects(w))
    assert doc["status"] in ("allocated", "unsatisfiable"), doc["reason"]
    fits = feasible(w)
    members = core(w)
    event(f"{'fits' if fits else 'does not fit'}, core of {'-' if members is None else len(members)}")
    assert (doc["status"] == "allocated") == fits, (doc["status"], doc["reason"], w)
    if doc["status"] == "allocated":
        check(w, doc)
    else:
        assert doc["members"] == {} and doc["reason"]
