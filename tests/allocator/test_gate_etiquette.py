"""Gates wait their turn: draco allocates for a pod only once its own scheduling gate is
the last one (or the others are gates it was told it may act beside), as kube-scheduler
waits for every gate; the pod says what it waits for, `draco allocate` too, and the
gate webhook appends draco's gate after whatever gates the pod already has.

Nodes another controller chose (a nodeSelector, a required node affinity) bound where
devices are allocated; when nothing fits there, the pod's condition names that choice.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import REGISTRY

from operators.allocator.pod_claims import (
    Done,
    GateWait,
    NotOurs,
    Waiting,
    Work,
    node_choice,
    pod_work,
)
from operators.allocator_controller.controller import AllocatorSettings
from operators.cli.main import main
from operators.cli.options import gate_list
from operators.cli.state import build_tracker
from operators.model import NamespacedName, parse_pod_object
from operators.model.gates import DRACO_GATE, other_gates, parse_gate_list, waiting_for
from operators.narrowing.gating import apply_ops, gate_ops
from tests.allocator.test_controller_allocator import (
    NS,
    PIN,
    Scenario,
    claim,
    gpu_class,
    node,
    pod,
    slice_,
)
from tests.cli.test_allocate import run_json
from tests.fake_api import run

ADMISSION = "kueue.x-k8s.io/admission"
TOPOLOGY = "kueue.x-k8s.io/topology"

# (pod's gates, gates draco may act beside, the gates draco waits for)
OTHER_GATES = [
    ((DRACO_GATE,), (), ()),
    ((ADMISSION, DRACO_GATE), (), (ADMISSION,)),
    ((DRACO_GATE, ADMISSION), (), (ADMISSION,)),  # the order does not matter
    ((ADMISSION, TOPOLOGY, DRACO_GATE), (), (ADMISSION, TOPOLOGY)),
    ((TOPOLOGY, DRACO_GATE), (ADMISSION,), (TOPOLOGY,)),
    ((ADMISSION, TOPOLOGY, DRACO_GATE), (ADMISSION, TOPOLOGY), ()),
    ((ADMISSION, "example.com/quota", DRACO_GATE), ("*",), ()),
    (("example.com/quota",), (), ("example.com/quota",)),  # not draco's at all: still a wait
]


@pytest.mark.parametrize(("gates", "beside", "waits"), OTHER_GATES)
def test_which_gates_draco_waits_for(gates: tuple[str, ...], beside: tuple[str, ...],
                                     waits: tuple[str, ...]) -> None:
    assert other_gates(gates, DRACO_GATE, frozenset(beside)) == waits


@pytest.mark.parametrize(("text", "parsed"), [
    ("", frozenset()),
    (" , ", frozenset()),
    (ADMISSION, frozenset({ADMISSION})),
    (f"{ADMISSION}, {TOPOLOGY},", frozenset({ADMISSION, TOPOLOGY})),
    ("*", frozenset({"*"})),
    ("plain-gate", frozenset({"plain-gate"})),
])
def test_the_act_beside_list_reads_gate_names(text: str, parsed: frozenset[str]) -> None:
    assert parse_gate_list(text) == parsed
    assert gate_list(text) == ",".join(sorted(parsed))  # the flag's canonical text


@pytest.mark.parametrize("text", ["bad gate", "UPPER.example/x", "a/b/c", "-dash", "x" * 64])
def test_a_bad_gate_name_is_refused_with_the_entry_named(text: str) -> None:
    with pytest.raises(ValueError, match="is not a scheduling gate name"):
        parse_gate_list(f"{ADMISSION},{text}")


def test_the_words_name_every_gate() -> None:
    assert waiting_for((ADMISSION,)) == f"waiting for gate {ADMISSION}"
    assert waiting_for((ADMISSION, TOPOLOGY)) == f"waiting for gates {ADMISSION}, {TOPOLOGY}"


# (what the pod and its claim are, the gates draco may act beside, the work it gets)
POD_WORK: list[tuple[str, dict[str, Any], dict[str, Any], tuple[str, ...], type]] = [
    ("only draco's gate", pod("a", "c"), claim("c"), (), Work),
    ("Kueue's admission gate too", pod("a", "c", gates=(ADMISSION, DRACO_GATE)), claim("c"),
     (), GateWait),
    ("Kueue's gate, draco may act beside it", pod("a", "c", gates=(ADMISSION, DRACO_GATE)), claim("c"),
     (ADMISSION,), Work),
    ("claims already done, another gate still on", pod("a", "c", gates=(TOPOLOGY, DRACO_GATE)),
     claim("c", allocated_device="d0", reserved_for="a"), (), GateWait),
    ("claims done, no other gate", pod("a", "c"), claim("c", allocated_device="d0", reserved_for="a"),
     (), Done),
    ("another gate, and the claim missing", pod("a", "c", gates=(ADMISSION, DRACO_GATE)), {}, (), GateWait),
    ("no draco gate", pod("a", "c", gates=(ADMISSION,)), claim("c"), (), NotOurs),
    ("draco's gate, the claim missing", pod("a", "c"), {}, (), Waiting),
]


@pytest.mark.parametrize(("case", "p", "c", "beside", "expected"), POD_WORK, ids=[c[0] for c in POD_WORK])
def test_what_the_allocator_does_with_a_pod(case: str, p: dict[str, Any], c: dict[str, Any],
                                            beside: tuple[str, ...], expected: type) -> None:
    tracker = build_tracker([gpu_class(), slice_("node-0", "d0"), p, *([c] if c else [])])
    work = pod_work(tracker, NamespacedName(NS, "a"), DRACO_GATE, beside=frozenset(beside))
    assert type(work) is expected, work
    if isinstance(work, GateWait):
        assert work.why.startswith("waiting for gate kueue.x-k8s.io/")


def _scenario(gates: tuple[str, ...], **settings: Any) -> Scenario:
    s = Scenario([gpu_class(), slice_("node-0", "d0"), pod("a", "c", gates=gates), claim("c")])
    s.controller.settings = AllocatorSettings(**settings)
    return s


def test_a_pod_behind_kueues_gate_holds_no_device_and_says_so() -> None:
    s = _scenario((ADMISSION, DRACO_GATE))
    for _ in range(2):
        run(s.step())
    assert s.device_of("c") is None
    assert s.api.claim_writes() == [], "nothing written for the claim"
    cond = s.condition("a")
    assert cond is not None and (cond["status"], cond["reason"]) == ("False", "WaitingForGate")
    assert f"waiting for gate {ADMISSION}" in cond["message"]
    events = [(e["type"], e["reason"]) for e in s.api.events]
    assert events == [("Normal", "WaitingForGate")], "told once, and waiting is no warning"
    # Kueue admits: its gate goes, and the pod is allocated at once
    s.api.touch(f"/api/v1/namespaces/{NS}/pods/a",
                lambda p: p["spec"].update(schedulingGates=[{"name": DRACO_GATE}]))
    s.feed(s.api.pod(NS, "a"))
    run(s.step())
    assert s.device_of("c") == "d0"
    cond = s.condition("a")
    assert cond is not None and (cond["status"], cond["reason"]) == ("True", "Allocated")


def test_the_allocation_duration_counts_from_when_the_other_gate_left() -> None:
    """A plain pod Kueue kept queued for an hour is not an hour of draco's time:
    `draco_allocation_duration_seconds` starts when its last other gate goes."""
    hour_ago = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    queued = pod("a", "c", gates=(ADMISSION, DRACO_GATE))
    queued["metadata"]["creationTimestamp"] = hour_ago
    s = Scenario([gpu_class(), slice_("node-0", "d0"), queued, claim("c")])
    labels = {"controller": "allocator"}
    before = (REGISTRY.get_sample_value("draco_allocation_duration_seconds_count", labels) or 0.0,
              REGISTRY.get_sample_value("draco_allocation_duration_seconds_sum", labels) or 0.0)
    run(s.step())
    assert s.device_of("c") is None
    s.api.touch(f"/api/v1/namespaces/{NS}/pods/a",
                lambda p: p["spec"].update(schedulingGates=[{"name": DRACO_GATE}]))
    s.feed(s.api.pod(NS, "a"))
    run(s.step())
    assert s.device_of("c") == "d0"
    count = REGISTRY.get_sample_value("draco_allocation_duration_seconds_count", labels) or 0.0
    total = REGISTRY.get_sample_value("draco_allocation_duration_seconds_sum", labels) or 0.0
    assert count == before[0] + 1
    assert total - before[1] < 60, "counted from the gate's removal, not the pod's creation"


def test_draco_may_be_told_to_act_beside_a_gate() -> None:
    s = _scenario((ADMISSION, DRACO_GATE), act_beside=frozenset({ADMISSION}))
    run(s.step())
    assert s.device_of("c") == "d0"
    s = _scenario((ADMISSION, TOPOLOGY, DRACO_GATE), act_beside=frozenset({"*"}))
    run(s.step())
    assert s.device_of("c") == "d0"
    s = _scenario((ADMISSION, TOPOLOGY, DRACO_GATE), act_beside=frozenset({ADMISSION}))
    run(s.step())
    assert s.device_of("c") is None
    cond = s.condition("a")
    assert cond is not None and f"waiting for gate {TOPOLOGY}" in cond["message"]


# -- nodes another controller chose -----------------------------------------------------

# (the pod's nodeSelector and affinity, the words that name them)
CHOICES: list[tuple[dict[str, str], dict[str, Any] | None, str | None]] = [
    ({}, None, None),
    ({"kubernetes.io/hostname": "node-1"}, None, "nodeSelector kubernetes.io/hostname=node-1"),
    ({"b": "2", "a": "1"}, None, "nodeSelector a=1,b=2"),
    ({}, {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "rack", "operator": "In", "values": ["r1", "r2"]},
        {"key": "gpu", "operator": "Exists"}]}, {"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["node-9"]}]}]},
     "required node affinity rack In (r1,r2) and gpu Exists or metadata.name In (node-9)"),
    ({"zone": "a"}, PIN, "nodeSelector zone=a; required node affinity metadata.name In (node-0)"),
]


@pytest.mark.parametrize(("selector", "affinity", "words"), CHOICES)
def test_the_node_choice_in_words(selector: dict[str, str], affinity: dict[str, Any] | None,
                                  words: str | None) -> None:
    p = pod("a", "c", node_selector=selector)
    if affinity is not None:
        p["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": affinity}}
    assert node_choice(parse_pod_object(p)) == words


def test_when_the_chosen_node_has_no_free_device_the_condition_names_the_choice() -> None:
    """Kueue's topology ungater put the pod on node-1 (its hostname); node-1's only device
    is taken, node-0's is free: draco allocates nothing (never on node-0) and says why."""
    taken = claim("other", allocated_device="d1", reserved_for="x")
    taken["status"]["allocation"]["devices"]["results"][0]["pool"] = "node-1"
    taken["status"]["allocation"]["nodeSelector"] = {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]}
    s = Scenario([gpu_class(), slice_("node-0", "d0"), slice_("node-1", "d1"), taken,
                  pod("a", "c", node_selector={"kubernetes.io/hostname": "node-1"}), claim("c")],
                 nodes=())
    s.api.nodes = {n: node(n, **{"kubernetes.io/hostname": n}) for n in ("node-0", "node-1")}
    run(s.step())
    assert s.device_of("c") is None
    cond = s.condition("a")
    assert cond is not None and (cond["status"], cond["reason"]) == ("False", "Unschedulable")
    message = cond["message"]
    assert "1 excluded by the pod's node selector or affinity" in message
    assert "1 reaches too few free, matching, tolerated devices" in message
    assert "within the nodes the pod's nodeSelector kubernetes.io/hostname=node-1 allows: node-1" in message
    warnings = [e for e in s.api.events if e["type"] == "Warning"]
    assert warnings and "kubernetes.io/hostname=node-1" in warnings[0]["message"]


# -- draco allocate -------------------------------------------------------------------

def _world(tmp_path: Path, gates: tuple[str, ...]) -> str:
    objs = [gpu_class(), slice_("node-0", "d0"), pod("a", "c", gates=gates), claim("c"), claim("free")]
    path = tmp_path / "world.yaml"
    path.write_text(yaml.safe_dump_all(objs))
    return str(path)


def test_draco_allocate_says_a_claim_waits_for_the_other_gate(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    world = _world(tmp_path, (ADMISSION, DRACO_GATE))
    doc = run_json(capsys, "--from", world)["claims"]
    waiting = doc[f"{NS}/c"]
    assert (waiting["status"], waiting["allocated"], waiting["results"]) == ("waiting", False, [])
    assert waiting["reason"].startswith(f"pod {NS}/a is waiting for gate {ADMISSION}: ")
    assert doc[f"{NS}/free"]["results"][0]["device"] == "d0", "a waiting claim takes no device"
    together = run_json(capsys, "--from", world, "--claim", f"{NS}/c")["claims"][f"{NS}/c"]
    assert together["status"] == "waiting"
    assert main(["allocate", "--from", world]) == 0
    assert f"waiting for gate {ADMISSION}" in capsys.readouterr().out
    beside = run_json(capsys, "--from", world, "--act-beside-gates", ADMISSION)["claims"]
    assert beside[f"{NS}/c"]["status"] == "allocated"


def test_draco_allocate_refuses_a_bad_gate_name(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["allocate", "--act-beside-gates", "not a gate", "--from", "/dev/null"])
    assert exc.value.code == 2
    assert "is not a scheduling gate name" in capsys.readouterr().err


# -- the gate webhook --------------------------------------------------------------------

# (the gates a new pod has when draco's webhook sees it, the gates it leaves)
WEBHOOK = [
    ([], [DRACO_GATE]),
    ([ADMISSION], [ADMISSION, DRACO_GATE]),
    ([ADMISSION, TOPOLOGY], [ADMISSION, TOPOLOGY, DRACO_GATE]),
    ([ADMISSION, DRACO_GATE], [ADMISSION, DRACO_GATE]),  # there already: unchanged
    # Kueue's webhook (named after draco's, so called after it) appended its gate; the
    # chart re-invokes draco's webhook (reinvocationPolicy IfNeeded), which moves its own last
    ([DRACO_GATE, ADMISSION], [ADMISSION, DRACO_GATE]),
    ([TOPOLOGY, DRACO_GATE, ADMISSION], [TOPOLOGY, ADMISSION, DRACO_GATE]),
]


@pytest.mark.parametrize(("before", "after"), WEBHOOK)
def test_the_webhook_appends_dracos_gate_after_the_others(before: list[str], after: list[str]) -> None:
    new = {"spec": {"schedulingGates": [{"name": g} for g in before]}} if before else {"spec": {}}
    patched = apply_ops(new, gate_ops(new))
    assert [g["name"] for g in patched["spec"]["schedulingGates"]] == after
