"""`draco allocate --preempt` against the brute-force oracle (`tests.preemption.oracle`)
on generated small worlds, for one pod and for a gang as the preemptor. CI runs a few
examples; `DRACO_ORACLE_EXAMPLES=1000` runs more (see docs/controllers/preemption.md)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, event, given, settings

from tests.preemption.oracle import World, decide, judge, worlds

EXAMPLES = int(os.environ.get("DRACO_ORACLE_EXAMPLES", "50"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=EXAMPLES <= 50,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@SETTINGS
@given(worlds(gang_preemptor=False))
def test_a_pods_preemption_agrees_with_the_oracle(w: World) -> None:
    event(judge(w, decide(w)))


@SETTINGS
@given(worlds(gang_preemptor=True))
def test_a_gangs_preemption_agrees_with_the_oracle(w: World) -> None:
    event(judge(w, decide(w)))
