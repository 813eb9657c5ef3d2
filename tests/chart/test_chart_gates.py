"""The chart's `controllers.allocator.actBesideGates`: the gates draco may act beside reach
`draco run` as DRACO_ACT_BESIDE_GATES, read back as the same gates; bad names are refused
by the schema before anything is installed."""

from __future__ import annotations

import json

import pytest

from operators.cli.main import build_parser
from operators.model.gates import parse_gate_list
from tests.chart.helm import CHART, find, objects, run_helm, template
from tests.chart.test_chart_render import env_of

GATES = ["kueue.x-k8s.io/admission", "kueue.x-k8s.io/topology"]


@pytest.mark.parametrize(("values", "expected"), [
    ((), frozenset()),
    (("--set-json", f"controllers.allocator.actBesideGates={json.dumps(GATES)}"), frozenset(GATES)),
    (("--set-json", 'controllers.allocator.actBesideGates=["*"]'), frozenset({"*"})),
])
def test_the_gates_reach_draco_run(values: tuple[str, ...], expected: frozenset[str]) -> None:
    deployment = find(objects(template(*values)), "Deployment", "draco")
    # none named: no variable at all (an empty `value` is dropped by the API server, and
    # a bare `name` reads as nothing to every reader of the Deployment)
    text = env_of(deployment).get("DRACO_ACT_BESIDE_GATES", "")
    assert ("DRACO_ACT_BESIDE_GATES" in env_of(deployment)) is bool(expected)
    assert parse_gate_list(text) == expected
    args = build_parser().parse_args(["run", "--act-beside-gates", text])
    assert parse_gate_list(args.act_beside_gates) == expected


@pytest.mark.parametrize("bad", ['["not a gate"]', '"kueue.x-k8s.io/admission"', '["a", "a"]'])
def test_the_schema_refuses_what_is_no_gate_list(bad: str) -> None:
    proc = run_helm("template", "draco", str(CHART), "--set-json",
                    f"controllers.allocator.actBesideGates={bad}", check=False)
    assert proc.returncode != 0
    assert "actBesideGates" in proc.stderr


KUEUE_RULE = {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads", "admissionchecks", "resourceflavors"],
              "verbs": ["get", "list", "watch"]}


@pytest.mark.parametrize("on", [False, True])
def test_the_admission_check_is_off_by_default_and_brings_its_rbac_when_on(on: bool) -> None:
    """`controllers.allocator.admissionCheck`: `draco run --admission-check` through
    DRACO_ADMISSION_CHECK, and the allocator's role may read Kueue's objects only then."""
    values = ("--set", "controllers.allocator.admissionCheck=true",
              "--set", "controllers.allocator.admissionPodTimeout=120") if on else ()
    rendered = objects(template(*values))
    env = env_of(find(rendered, "Deployment", "draco"))
    assert ("DRACO_ADMISSION_CHECK" in env) is on
    role = find(rendered, "ClusterRole", "draco-allocator")
    assert (KUEUE_RULE in role["rules"]) is on
    assert any("kueue.x-k8s.io" in r.get("apiGroups", []) for r in role["rules"]) is on
    if on:
        args = build_parser().parse_args(["run", "--admission-check"])
        assert args.admission_check is True
        assert env["DRACO_ADMISSION_POD_TIMEOUT"] == "120"
