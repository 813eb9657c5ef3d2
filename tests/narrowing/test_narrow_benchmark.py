"""The benchmark's workload is narrowed correctly, so its figure measures real decisions."""

from __future__ import annotations

from placement import pod_accepts

from benchmarks.scenarios import narrowing as scenario
from operators.apiserver.validation.pods import validate_pod_update
from operators.narrowing import Narrowed, narrow


def test_every_benchmark_pod_is_narrowed_validly_and_keeps_its_chosen_node() -> None:
    exact = 0
    for pod, allocations, node, labels in scenario.workload(100):
        result = narrow(pod, allocations, node, labels)
        assert isinstance(result, Narrowed), result
        new = result.apply(pod)
        assert validate_pod_update(pod, new) == []
        assert pod_accepts(new, node, labels)
        assert "schedulingGates" not in new["spec"]
        exact += result.exact
    assert exact == 90  # the tenth with alternatives on both sides is narrowed further


def test_benchmark_row() -> None:
    [row] = scenario.run(quick=True)
    assert row["scenario"] == "narrow 200 gated pods (in process)"
    assert row["draco_s"] > 0 and row["baseline_s"] > 0
