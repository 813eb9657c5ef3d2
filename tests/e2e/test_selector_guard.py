"""The empty-selector guard on a real 1.37 API server (a cluster of the test's own: it
replaces draco's CRD and adds a cluster-wide admission policy).

draco's CRD refuses `deviceSelector: {}` and takes `all: true`; a `{}` rule stored
under the CRD of before the guard stays writable after the upgrade (validation
ratcheting), which is how existing rules keep working. The chart's
ValidatingAdmissionPolicy (`upstreamRuleGuard`) gives upstream's `resource.k8s.io/v1`
DeviceTaintRule the same guard, with an annotation for "every device, on purpose"."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml

from operators.apiserver.testing import wait_for
from tests.chart.helm import ROOT, objects, template
from tests.e2e.backends import RealBackend

pytestmark = pytest.mark.real

DRACO = "/apis/resource.draco.dev/v1alpha1/devicetaintrules"
UPSTREAM = "/apis/resource.k8s.io/v1/devicetaintrules"
REFUSED = "an empty deviceSelector selects every device"


def draco_rule(name: str, selector: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "resource.draco.dev/v1alpha1", "kind": "DeviceTaintRule", "metadata": {"name": name},
            "spec": {"deviceSelector": selector, "taint": {"key": "example.com/k", "effect": "None"}}}


def upstream_rule(name: str, selector: dict[str, Any] | None, annotations: dict[str, str] | None = None
                  ) -> dict[str, Any]:
    spec: dict[str, Any] = {"taint": {"key": "example.com/k", "effect": "None"}}
    if selector is not None:
        spec["deviceSelector"] = selector
    meta: dict[str, Any] = {"name": name}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": meta, "spec": spec}


def refusal(b: RealBackend, path: str, obj: dict[str, Any]) -> str:
    """The API server's message when it refuses OBJ, "" when it stores it."""
    status, body = b.request("POST", path, obj)
    if status < 300:
        return ""
    return str(body.get("message") if isinstance(body, dict) else body)


def test_the_guard_on_draco_rules_after_an_upgrade_and_on_upstream_rules(private_137: RealBackend) -> None:
    b = private_137
    crd = yaml.safe_load((ROOT / "crds" / "devicetaintrules.yaml").read_text())
    before = copy.deepcopy(crd)  # draco's CRD as it was before the guard
    selector_schema = before["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "properties"]["deviceSelector"]
    del selector_schema["x-kubernetes-validations"]
    del selector_schema["properties"]["all"]
    b.kubectl("apply", "-f", "-", input=json.dumps(before))
    wait_for(lambda: refusal(b, DRACO, draco_rule("legacy", {})) == "", 30, what="the old CRD to take {}")
    b.kubectl("apply", "-f", str(ROOT / "crds" / "devicetaintrules.yaml"))
    wait_for(lambda: REFUSED in refusal(b, DRACO, draco_rule("new", {})), 30, what="the guard to refuse {}")
    assert refusal(b, DRACO, draco_rule("everything", {"all": True})) == ""
    both = refusal(b, DRACO, draco_rule("both", {"all": True, "driver": "gpu.example.com"}))
    assert "takes no driver, pool or device" in both
    # the rule of before the upgrade: its metadata and status still written
    b.kubectl("label", "devicetaintrules.resource.draco.dev", "legacy", "team=infra")
    status, body = b.request("PATCH", f"{DRACO}/legacy/status", {"status": {"conditions": [{
        "type": "EvictionInProgress", "status": "False", "reason": "NoEffect", "message": "m",
        "lastTransitionTime": "2026-11-26T00:00:00Z"}]}}, "application/merge-patch+json")
    assert status == 200, body

    # upstream's rule, with the chart's policy
    policy = objects(template("--show-only", "templates/device-taint-rule-guard.yaml"))
    assert [o["kind"] for o in policy] == ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]
    assert refusal(b, UPSTREAM, upstream_rule("before-policy", {})) == ""  # upstream alone takes {}
    b.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(policy))
    try:
        wait_for(lambda: REFUSED in refusal(b, UPSTREAM, upstream_rule("empty", {})), 60,
                 what="the admission policy to refuse {}")
        annotated = upstream_rule("all", {}, {"resource.draco.dev/all-devices": "true"})
        assert refusal(b, UPSTREAM, annotated) == ""
        assert refusal(b, UPSTREAM, upstream_rule("none", None)) == ""  # no selector: no device
        assert refusal(b, UPSTREAM, upstream_rule("gpus", {"driver": "gpu.example.com"})) == ""
    finally:
        b.kubectl("delete", "-f", "-", "--ignore-not-found", input=yaml.safe_dump_all(policy))
        for path, names in ((UPSTREAM, ("before-policy", "all", "none", "gpus")),
                            (DRACO, ("legacy", "everything"))):
            for name in names:
                b.request("DELETE", f"{path}/{name}")
