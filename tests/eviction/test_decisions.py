"""The decision table, run through `draco evictions --from` exactly as users would."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from operators.cli.main import main

CASES = yaml.safe_load(Path(__file__).with_name("decision_cases.yaml").read_text())
T0 = "2026-01-01T00:00:00Z"
NOW = "2026-01-02T00:00:00Z"
DRIVER = "gpu.example.com"


def expand(case: dict[str, Any]) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = []
    owners = {claim: p["name"] for p in case.get("pods", [])
              for claim in [*p.get("templateClaims", {}).values(), *([p["extended"]] if p.get("extended") else [])]}
    for s in case.get("slices", []):
        objs.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": s["name"]},
                     "spec": {"driver": DRIVER, "nodeName": "n1",
                              "pool": {"name": s["pool"], "generation": s.get("generation", 1),
                                       "resourceSliceCount": s.get("count", 1)},
                              "devices": [{"name": d["name"], "taints": [{"timeAdded": T0, **t} for t in d.get("taints", [])]}
                                          for d in s["devices"]]}})
    for c in case.get("claims", []):
        results = [{"request": r.get("request", "gpu"), "driver": DRIVER, "pool": r.get("pool", "p"),
                    "device": r["device"], **({"tolerations": r["tolerations"]} if "tolerations" in r else {}),
                    **({"shareID": r["shareID"], "consumedCapacity": {"memory": "10Gi"}}
                       if "shareID" in r else {})}
                   for r in c["results"]]
        meta: dict[str, Any] = {"name": c["name"], "namespace": "ns", "uid": f"uid-{c['name']}"}
        owner = c.get("owner", owners.get(c["name"]))
        if owner:  # generated for a pod: controlled by it, as the resource-claim controller makes it
            meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": owner,
                                        "uid": f"uid-{owner}", "controller": True}]
        if "annotation" in c:
            meta["annotations"] = {"resource.draco.dev/tolerations": c["annotation"]}
        objs.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": meta,
                     "spec": {"devices": {"requests": c.get("requests", [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}])}},
                     "status": {"allocation": {"devices": {"results": results}},
                                "reservedFor": [{"resource": "pods", "name": p, "uid": f"uid-{p}"} for p in c["reservedFor"]]}})
    for p in case.get("pods", []):
        meta = {"name": p["name"], "namespace": "ns", "uid": p.get("uid", f"uid-{p['name']}")}
        if p.get("deleting"):
            meta["deletionTimestamp"] = T0
        claims = [{"name": c, "resourceClaimName": c} for c in p.get("claims", [])]
        claims += [{"name": k, "resourceClaimTemplateName": "tmpl"} for k in p.get("templateClaims", {})]
        status: dict[str, Any] = {"phase": p.get("phase", "Running")}
        if p.get("templateClaims"):
            status["resourceClaimStatuses"] = [{"name": k, "resourceClaimName": v} for k, v in p["templateClaims"].items()]
        if p.get("extended"):
            status["extendedResourceClaimStatus"] = {"resourceClaimName": p["extended"], "requestMappings": [
                {"containerName": "c", "resourceName": "example.com/gpu", "requestName": "container-0-request-0"}]}
        objs.append({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                     "spec": {"nodeName": p.get("node", "n1"), "resourceClaims": claims,
                              "containers": [{"name": "c", "image": "i"}]}, "status": status})
    for r in case.get("rules", []):
        spec: dict[str, Any] = {"taint": {"key": r.get("key", "k"), "effect": r["effect"]}}
        if "timeAdded" in r:
            spec["taint"]["timeAdded"] = r["timeAdded"]
        if "selector" in r:
            spec["deviceSelector"] = r["selector"]
        objs.append({"apiVersion": "resource.draco.dev/v1alpha1", "kind": "DeviceTaintRule",
                     "metadata": {"name": r["name"], "uid": f"uid-{r['name']}", "generation": 1,
                                  "creationTimestamp": r.get("created", T0)}, "spec": spec})
    return objs


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_decision_table(case: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "objects.json"
    f.write_text(json.dumps({"kind": "List", "items": expand(case)}))
    assert main(["evictions", "--from", str(f), "--now", case.get("now", NOW), "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    expect = case["expect"]
    assert doc["evict"] == expect["evict"]
    assert doc["later"] == expect["later"]
    for rule, fields in expect.get("rules", {}).items():
        got = doc["rules"][rule]
        assert set(got) == {"EvictionInProgress", "reason", "affectedDevices", "allocatedDevices",
                            "podsToEvict", "namespaces", "message"}
        assert {k: got[k] for k in fields} == fields
