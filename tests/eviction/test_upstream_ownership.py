"""Who evicts a pod where upstream's controller runs too: `draco evictions --from` with
`--slice-taints`, as a table (taint sources and times -> draco or upstream)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from operators.cli.main import main
from operators.eviction.decisions import DRACO_ALONE, UPSTREAM, Ownership, ownership_for

DRIVER = "gpu.example.com"
T0 = "2026-01-01T00:00:00Z"
NOW = "2026-01-02T00:00:00Z"


def slice_obj(taint_time: str | None) -> dict[str, Any]:
    taints = [{"key": "k", "effect": "NoExecute", "timeAdded": taint_time}] if taint_time else []
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
            "spec": {"driver": DRIVER, "nodeName": "n1", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": "d0", "taints": taints}, {"name": "d1"}]}}


def rule(api_version: str, name: str, time_added: str, effect: str = "NoExecute") -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": "DeviceTaintRule",
            "metadata": {"name": name, "creationTimestamp": T0},
            "status": {"conditions": [{"type": "EvictionInProgress", "status": "True",
                                       "reason": "PodsPendingEviction", "message": "1 pod needs to be evicted"}]},
            "spec": {"deviceSelector": {"device": "d0"},
                     "taint": {"key": "k", "effect": effect, "timeAdded": time_added}}}


def workload() -> list[dict[str, Any]]:
    return [
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
         "metadata": {"name": "c", "namespace": "ns", "uid": "uid-c"},
         "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
         "status": {"allocation": {"devices": {"results": [
             {"request": "gpu", "driver": DRIVER, "pool": "p", "device": "d0"}]}},
             "reservedFor": [{"resource": "pods", "name": "pod", "uid": "uid-pod"}]}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pod", "namespace": "ns", "uid": "uid-pod"},
         "spec": {"nodeName": "n1", "resourceClaims": [{"name": "c", "resourceClaimName": "c"}],
                  "containers": [{"name": "c", "image": "i"}]}, "status": {"phase": "Running"}},
    ]


DRACO = "resource.draco.dev/v1alpha1"
K8S = "resource.k8s.io/v1"

# (case, mode, slice taint time, draco rule time, upstream rule time) -> who evicts ns/pod
CASES = [
    ("slice taint, draco mode", "draco", T0, None, None, "draco"),
    ("slice taint, upstream mode", "upstream", T0, None, None, "upstream"),
    ("slice taint, auto from a file (no discovery)", "auto", T0, None, None, "draco"),
    ("draco rule, upstream mode: draco's own", "upstream", None, T0, None, "draco"),
    ("upstream rule, upstream mode", "upstream", None, None, T0, "upstream"),
    ("upstream rule, draco mode (upstream's controller off)", "draco", None, None, T0, "draco"),
    ("both rules, same timeAdded", "upstream", None, T0, T0, "upstream"),
    ("both rules, upstream within the window", "upstream", None, T0, "2026-01-01T00:00:02Z", "upstream"),
    ("both rules overdue: upstream takes it, whoever was first", "upstream", None, T0,
     "2026-01-01T00:00:10Z", "upstream"),
    ("both rules, upstream's counts from later", "upstream", None, T0, "2026-01-02T01:00:00Z", "draco"),
    ("draco rule beside an upstream-evicted slice taint", "upstream", T0, T0, None, "upstream"),
]


@pytest.mark.parametrize(("mode", "slice_time", "draco_time", "upstream_time", "expected"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_who_evicts(mode: str, slice_time: str | None, draco_time: str | None, upstream_time: str | None,
                    expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objs = [slice_obj(slice_time), *workload()]
    if draco_time:
        objs.append(rule(DRACO, "mine", draco_time))
    if upstream_time:
        objs.append(rule(K8S, "theirs", upstream_time))
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(objs))
    assert main(["evictions", "--from", str(path), "--now", NOW, "--slice-taints", mode, "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["evict"] == ["ns/pod"]
    assert doc["evictedBy"] == {"ns/pod": expected}
    assert set(doc["rules"]) == ({"mine"} if draco_time else set())
    if upstream_time:
        # counted by draco, condition as upstream's controller wrote it (draco never writes it)
        assert doc["upstreamRules"] == {"theirs": {
            "source": "DeviceTaintRule.resource.k8s.io/theirs", "effect": "NoExecute",
            "affectedDevices": 1, "allocatedDevices": 1, "podsToEvict": 1, "namespaces": 1,
            "EvictionInProgress": "True", "reason": "PodsPendingEviction",
            "message": "1 pod needs to be evicted"}}
    if draco_time:
        assert doc["rules"]["mine"]["podsToEvict"] == 1  # pending until gone, whoever evicts


def test_devices_name_upstream_rules_as_a_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all([slice_obj(None), rule(DRACO, "same", T0, "NoSchedule"),
                                        rule(K8S, "same", T0, "None")]))
    assert main(["devices", "--from", str(path), "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    d0 = next(d for d in doc["devices"] if d["device"] == "d0")
    assert [(t["source"], t["effect"]) for t in d0["taints"]] == [
        ("DeviceTaintRule/same", "NoSchedule"), ("DeviceTaintRule.resource.k8s.io/same", "None")]
    assert "cluster" not in doc  # files say nothing about servers


MODES = [
    ("auto", True, UPSTREAM), ("auto", False, DRACO_ALONE),
    ("draco", True, DRACO_ALONE), ("draco", False, DRACO_ALONE),
    ("upstream", True, UPSTREAM), ("upstream", False, UPSTREAM),
]


@pytest.mark.parametrize(("mode", "upstream_evicts", "expected"), MODES)
def test_slice_taints_modes(mode: str, upstream_evicts: bool, expected: Ownership) -> None:
    assert ownership_for(mode, upstream_evicts) == expected


def test_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown --slice-taints mode 'sometimes'"):
        ownership_for("sometimes", True)


def test_table_names_who_evicts() -> None:
    from operators.cli.upstream_taints import describe

    text = describe({"serverVersion": "v1.37.2", "embedded": False, "keepsDeviceTaints": True,
                     "detectedBy": "probe", "deviceTaintRuleVersions": ["v1"], "upstreamEvicts": True,
                     "sliceTaints": "auto", "sliceTaintsEvictedBy": "upstream", "upstreamRulesEvictedBy": "upstream"})
    assert text == ("\nCluster: API server v1.37.2 keeps device taints (by a dry-run probe); upstream DeviceTaintRule: "
                    "resource.k8s.io/v1.\n  slice taints evicted by upstream, upstream rules by upstream "
                    "(--slice-taints=auto); draco's own rules by draco.\n")


@pytest.mark.parametrize(("server", "sees"), [("v1.36.3", False), ("v1.35.0", False), ("v1.37.2", True),
                                              ("v1.38.0-alpha.0", True), (None, True), ("nonsense", True)])
def test_upstream_sees_extended_resource_claims_from_1_37(server: str | None, sees: bool) -> None:
    assert ownership_for("auto", True, server).extended_claims is sees
    assert ownership_for("upstream", True, server).extended_claims  # `upstream` defers, whatever
    assert ownership_for("draco", True, server) == DRACO_ALONE


def extended_pod(through_spec: bool) -> list[dict[str, Any]]:
    """The workload, with the claim reached through the pod's extended-resource status
    (KEP-5004: kube-scheduler made it, the pod controls it) or through its spec."""
    claim, pod = workload()
    claim["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "pod", "uid": "uid-pod",
                                             "controller": True}]
    if not through_spec:
        pod["spec"].pop("resourceClaims")
        pod["status"]["extendedResourceClaimStatus"] = {"resourceClaimName": "c", "requestMappings": [
            {"containerName": "c", "resourceName": "example.com/gpu", "requestName": "container-0-request-0"}]}
    return [claim, pod]


@pytest.mark.parametrize(("through_spec", "server", "expected"), [
    (False, "v1.36.3", "draco"),  # upstream's controller never sees the claim: draco evicts, at once
    (False, "v1.37.2", "upstream"),
    (True, "v1.36.3", "upstream"),
])
def test_a_slice_taint_on_an_extended_resource_pods_device(through_spec: bool, server: str, expected: str) -> None:
    from operators.cli.state import build_tracker
    from operators.eviction.decisions import plan

    tracker = build_tracker([slice_obj(T0), *extended_pod(through_spec)])
    evictions = plan(tracker, ownership=ownership_for("auto", True, server))
    (pod,) = evictions.pods.values()
    assert ("upstream" if pod.deferred else "draco") == expected
