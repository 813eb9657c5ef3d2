"""Which pods the gate-injection webhook gates, and the JSON patch it answers with."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from operators.narrowing.gating import apply_ops, gate_ops, parse_selector, wants_gate
from operators.narrowing.narrow import DRACO_GATE

CLAIMS = [{"name": "gpu", "resourceClaimName": "gpu-claim"}]


def pod(labels: dict[str, str] | None = None, claims: list[Any] | None = CLAIMS,
        gates: list[dict[str, str]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if claims is not None:
        spec["resourceClaims"] = claims
    if gates is not None:
        spec["schedulingGates"] = gates
    return {"metadata": {"name": "p", "namespace": "ns", "labels": labels or {}}, "spec": spec}


# (case, pod, namespace labels, namespace selector, pod selector, gated?)
DECISIONS = [
    ("claims, no selectors: every namespace", pod(), {}, "", "", True),
    ("no resourceClaims field", pod(claims=None), {}, "", "", False),
    ("empty resourceClaims", pod(claims=[]), {}, "", "", False),
    ("namespace label matches", pod(), {"draco.dev/gate": "on"}, "draco.dev/gate=on", "", True),
    ("namespace label differs", pod(), {"draco.dev/gate": "off"}, "draco.dev/gate=on", "", False),
    ("namespace unlabelled", pod(), {}, "draco.dev/gate", "", False),
    ("namespace != passes when absent", pod(), {}, "tier!=system", "", True),
    ("pod label in set", pod({"app": "train"}), {}, "", "app in (train, serve)", True),
    ("pod label notin set", pod({"app": "train"}), {}, "", "app notin (train)", False),
    ("pod label absent required", pod({"app": "x"}), {}, "", "!skip-gate", True),
    ("pod opted out", pod({"skip-gate": "1"}), {}, "", "!skip-gate", False),
    ("both selectors must match", pod({"app": "x"}), {"team": "ml"}, "team=ml", "app=y", False),
    ("both selectors match", pod({"app": "y"}), {"team": "ml"}, "team==ml", "app=y", True),
    ("selectors match but no claims", pod({"app": "y"}, claims=None), {"team": "ml"},
     "team=ml", "app=y", False),
]


@pytest.mark.parametrize(("case", "p", "ns_labels", "ns_sel", "pod_sel", "gated"), DECISIONS,
                         ids=[d[0] for d in DECISIONS])
def test_decision(case: str, p: dict[str, Any], ns_labels: dict[str, str], ns_sel: str,
                  pod_sel: str, gated: bool) -> None:
    assert wants_gate(p, ns_labels, parse_selector(ns_sel), parse_selector(pod_sel)) is gated


OTHER = {"name": "example.com/quota"}
# (case, existing gates, expected ops, gates after applying them)
PATCHES = [
    ("no gates field", None,
     [{"op": "add", "path": "/spec/schedulingGates", "value": [{"name": DRACO_GATE}]}],
     [{"name": DRACO_GATE}]),
    ("empty gates list", [],
     [{"op": "add", "path": "/spec/schedulingGates", "value": [{"name": DRACO_GATE}]}],
     [{"name": DRACO_GATE}]),
    ("another controller's gate stays first", [OTHER],
     [{"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": DRACO_GATE}}],
     [OTHER, {"name": DRACO_GATE}]),
    ("already gated by draco: no op", [OTHER, {"name": DRACO_GATE}], [],
     [OTHER, {"name": DRACO_GATE}]),
    ("another webhook appended its gate after draco's: draco's moves last",
     [{"name": DRACO_GATE}, OTHER],
     [{"op": "remove", "path": "/spec/schedulingGates/0"},
      {"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": DRACO_GATE}}],
     [OTHER, {"name": DRACO_GATE}]),
]


@pytest.mark.parametrize(("case", "gates", "ops", "after"), PATCHES, ids=[p[0] for p in PATCHES])
def test_patch(case: str, gates: list[dict[str, str]] | None, ops: list[dict[str, Any]],
               after: list[dict[str, str]]) -> None:
    p = pod(gates=copy.deepcopy(gates))
    assert gate_ops(p) == ops
    assert apply_ops(p, ops)["spec"]["schedulingGates"] == after
    assert gate_ops(p) == []  # applying twice never duplicates the gate


SELECTORS = [
    ("a=b", {"a": "b"}, True),
    ("a=b", {"a": "c"}, False),
    ("a!=b", {}, True),
    ("a in (x, y),b", {"a": "y", "b": ""}, True),
    ("a in (x, y),b", {"a": "y"}, False),
    ("a notin (x)", {}, True),
    ("example.com/gpu=yes,!legacy", {"example.com/gpu": "yes"}, True),
    ("example.com/gpu=yes,!legacy", {"example.com/gpu": "yes", "legacy": "1"}, False),
    ("", {"anything": "x"}, True),
]


@pytest.mark.parametrize(("text", "labels", "matches"), SELECTORS)
def test_selector(text: str, labels: dict[str, str], matches: bool) -> None:
    assert parse_selector(text).matches(labels) is matches


@pytest.mark.parametrize("text", ["a in ()", "a=b=c", "a in (b", "a)", "=b", "a in (b,c d)"])
def test_bad_selector_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_selector(text)
