"""The embedded server's validation tables, checked against a real kube-apiserver.

Every case of the KEP-3838 pod-update table (tests/apiserver/pod_update_cases.yaml) and
of the object validation table (tests/apiserver/validation_cases.yaml) is sent to both
servers; each must reach the verdict the table records, and the real server is the
oracle: a case it decides otherwise is a wrong case (and a bug in the embedded server).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.backends import Backend

HERE = Path(__file__).resolve().parent
POD_CASES = yaml.safe_load((HERE.parent / "apiserver" / "pod_update_cases.yaml").read_text())
VALIDATION_FILE = HERE.parent / "apiserver" / "validation_cases.yaml"
VALIDATION_CASES = (yaml.safe_load(VALIDATION_FILE.read_text())
                    if VALIDATION_FILE.exists() else [])
# No scheduler is called this: the pods stay unbound, as the table's pods are.
NO_SCHEDULER = "draco-parity-no-scheduler"


def causes(body: Any) -> list[str]:
    details = body.get("details") or {} if isinstance(body, dict) else {}
    return sorted(c.get("field", "") for c in details.get("causes") or [])


@pytest.mark.parametrize("case", POD_CASES, ids=[c["name"] for c in POD_CASES])
def test_pod_update_table_on_both_servers(case: dict[str, Any], backend: Backend) -> None:
    path = f"/api/v1/namespaces/{backend.ns}/pods"
    old = {"containers": [{"name": "c", "image": "v1"}], "schedulerName": NO_SCHEDULER,
           **case["old"]}
    stored = backend.create(path, {"apiVersion": "v1", "kind": "Pod",
                                   "metadata": {"name": "p"}, "spec": old})
    spec = copy.deepcopy(stored["spec"])
    # Fields the server defaulted on create (admission plugins add NoExecute tolerations)
    # stay as stored; the case replaces exactly the fields it names.
    defaulted_tolerations = [t for t in spec.get("tolerations", [])
                             if t not in case["old"].get("tolerations", [])]
    for key in case["old"]:
        spec.pop(key, None)
    spec.update(copy.deepcopy(case["new"]))
    if "tolerations" in case["old"] or "tolerations" in case["new"]:
        spec["tolerations"] = spec.get("tolerations", []) + defaulted_tolerations
    code, body = backend.request("PUT", f"{path}/p", {**stored, "spec": spec})
    if not case["errors"]:
        assert code == 200, f"{backend.name} rejected an update the table allows: {body}"
    else:
        assert code == 422, f"{backend.name} answered {code} where the table expects 422: {body}"
        assert causes(body) == sorted(case["errors"]), body


@pytest.mark.parametrize("case", VALIDATION_CASES, ids=[c["name"] for c in VALIDATION_CASES])
def test_validation_table_on_both_servers(case: dict[str, Any], backend: Backend) -> None:
    obj = copy.deepcopy(case["object"])
    group_version = obj["apiVersion"]
    plural = {"ResourceSlice": "resourceslices", "DeviceClass": "deviceclasses",
              "ResourceClaim": "resourceclaims", "ResourceClaimTemplate": "resourceclaimtemplates",
              "DeviceTaintRule": "devicetaintrules", "ResourceSlicePatch": "resourceslicepatches",
              "Pod": "pods", "Node": "nodes", "Namespace": "namespaces",
              "ConfigMap": "configmaps", "Gang": "gangs"}[obj["kind"]]
    prefix = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    namespaced = plural in ("resourceclaims", "resourceclaimtemplates", "pods", "configmaps", "gangs")
    if namespaced:
        obj["metadata"]["namespace"] = backend.ns
        path = f"{prefix}/namespaces/{backend.ns}/{plural}?dryRun=All"
    else:
        path = f"{prefix}/{plural}?dryRun=All"
    code, body = backend.request("POST", path, obj)
    if case["accept"]:
        assert code == 201, f"{backend.name} rejected {case['name']!r}: {body}"
    else:
        assert code in (400, 422), f"{backend.name} accepted {case['name']!r} ({code})"
