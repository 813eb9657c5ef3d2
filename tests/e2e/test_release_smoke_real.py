"""A smoke set per Kubernetes release draco supports beside the fully tested ones: on a
real 1.35 and a real 1.38 control plane, what a user notices first works.

A gated pod's claim is allocated by draco and kube-scheduler binds the pod; a partitioned
GPU is counted where the release keeps counters; a NoExecute taint evicts each pod once,
by whoever evicts on that release (and a toleration with an empty effect holds it off);
a ResourceSlicePatch is reported; `draco allocate` answers as that release's
kube-scheduler; `draco run`'s preflight accepts the server. What differs per release is
the data of RELEASES; the clusters are the shared `real_135` and `real_138`
(`DRACO_CLUSTER_DIR_135`/`_138` reuse running ones).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from operators.allocator.pod_claims import GATE
from operators.apiserver.testing import wait_for
from operators.eviction.decisions import DRACO_ALONE, UPSTREAM, Ownership
from tests.e2e.backends import RealBackend
from tests.e2e.test_upstream_taints import (
    DRACO_RULES,
    KEY,
    UPSTREAM_RULES,
    audit_offset,
    by_kcm,
    discovered,
    make_pod,
    pod_exists,
    rule_body,
    settle,
)
from tests.operator_threads import operator_threads

# Not in the default run (pyproject's addopts deselect it): building 1.35 and 1.38 from an
# empty cache would take CI's cold run past its 45 minutes. `pytest -m release_smoke`
# runs it (its fixtures build the two releases first when the cache lacks them).
pytestmark = [pytest.mark.real, pytest.mark.release_smoke]

RESOURCE = "/apis/resource.k8s.io/v1"
SETTINGS = SimpleNamespace(
    qps=200.0, burst=400, allocation_timeout=10.0, narrowing_timeout=300.0, patches_debounce=0.05,
    eviction_workers=10, grace_period=1.0, use_eviction_api=False, status_interval=0.2,
    slice_taints="auto")


@dataclass(frozen=True)
class Release:
    """What a user sees differ between the releases the smoke set runs on."""

    k8s: str
    keeps_device_taints: bool  # the server stores ResourceSlice device taints (DRADeviceTaints)
    rule_versions: tuple[str, ...]  # resource.k8s.io versions serving DeviceTaintRule
    upstream_evicts: bool  # kube-controller-manager evicts for device taints
    # who evicts for a NoExecute taint: the rule's API (upstream's or draco's) and whether
    # kube-controller-manager sends the DELETE
    rule_api: str
    evicted_by_kcm: bool
    ownership: Ownership  # what draco's eviction controller leaves to upstream (`auto`)
    # matchAttribute over versions differing only in build metadata (semver from 1.38)
    build_metadata_matches: bool
    # DRAPartitionableDevices=false for `draco allocate`: None accepted, else the refusal
    partitionable_off: str | None
    # the server keeps shared counters (DRAPartitionableDevices): a whole GPU taken leaves
    # none of its halves to a second pod
    counts_partitions: bool


RELEASES = {  # the shared cluster's fixture -> what it does
    "real_135": Release("1.35", keeps_device_taints=False, rule_versions=(), upstream_evicts=False,
                        rule_api="resource.draco.dev/v1alpha1", evicted_by_kcm=False,
                        ownership=DRACO_ALONE,
                        build_metadata_matches=False, partitionable_off=None,
                        counts_partitions=False),
    "real_138": Release("1.38", keeps_device_taints=True, rule_versions=("v1",), upstream_evicts=True,
                        rule_api="resource.k8s.io/v1", evicted_by_kcm=True,
                        ownership=UPSTREAM,  # extended-resource claims too (1.37 on)
                        build_metadata_matches=True,
                        partitionable_off="cannot set feature gate DRAPartitionableDevices to false, "
                                          "feature is locked to true in Kubernetes 1.38",
                        counts_partitions=True),
}


@pytest.fixture(params=list(RELEASES), ids=[r.k8s for r in RELEASES.values()])
def cluster(request: pytest.FixtureRequest) -> RealBackend:
    """A namespace of the shared real cluster of one release. The parameter is the
    cluster fixture's name: tests/ordering.py reads it to run each half in its stage."""
    return request.getfixturevalue(request.param)  # type: ignore[no-any-return]


@pytest.fixture
def release(cluster: RealBackend) -> Release:
    return next(r for r in RELEASES.values() if cluster.cluster.version.startswith(f"v{r.k8s}."))


@pytest.fixture
def operator(cluster: RealBackend, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    yield from operator_threads(cluster.kubeconfig, monkeypatch)


# ------------------------------------------------------------------ objects

def device_class(b: RealBackend) -> str:
    name = f"{b.ns}-gpu"
    b.create(f"{RESOURCE}/deviceclasses", {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{b.driver}"'}}]}})
    return name


def slice_of(b: RealBackend, devices: list[dict[str, Any]]) -> None:
    b.create(f"{RESOURCE}/resourceslices", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{b.ns}-0"},
        "spec": {"driver": b.driver, "nodeName": b.node,
                 "pool": {"name": b.ns, "generation": 1, "resourceSliceCount": 1}, "devices": devices}})


def claim_of(b: RealBackend, name: str, klass: str, count: int = 1,
             constraints: list[dict[str, Any]] | None = None) -> None:
    devices: dict[str, Any] = {"requests": [{"name": "gpu", "exactly": {
        "deviceClassName": klass, "allocationMode": "ExactCount", "count": count}}]}
    if constraints:
        devices["constraints"] = constraints
    b.create(f"{RESOURCE}/namespaces/{b.ns}/resourceclaims", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
        "spec": {"devices": devices}})


def gated_pod(b: RealBackend, name: str, claim: str) -> None:
    b.create(f"/api/v1/namespaces/{b.ns}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"schedulingGates": [{"name": GATE}],
                 "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
                 "containers": [{"name": "c", "image": "registry.invalid/app",
                                 "resources": {"claims": [{"name": "gpu"}]}}]}})


# ------------------------------------------------------------------ the checks

def test_draco_discovers_what_the_release_does_about_device_taints(
        release: Release, cluster: RealBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(cluster.kubeconfig))
    caps = discovered()
    assert caps.server_version.startswith(f"v{release.k8s}.")
    assert (caps.keeps_device_taints, caps.rule_versions, caps.upstream_evicts, caps.embedded) == (
        release.keeps_device_taints, release.rule_versions, release.upstream_evicts, False)


def test_a_gated_pods_claim_is_allocated_by_draco_and_the_pod_is_bound(
        cluster: RealBackend, operator: Any) -> None:
    b = cluster
    slice_of(b, [{"name": "gpu-0"}, {"name": "gpu-1"}])
    claim_of(b, "a", device_class(b))
    gated_pod(b, "a", "a")
    operator(("allocator", "narrowing"), SETTINGS)

    def results() -> Any:
        got = b.get(f"{RESOURCE}/namespaces/{b.ns}/resourceclaims/a") or {}
        return ((got.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results")

    got = wait_for(results, 30, what="draco to allocate the claim")
    assert [(r["driver"], r["pool"], r["device"]) for r in got] == [(b.driver, b.ns, "gpu-0")]
    pod = wait_for(lambda: (p := b.get(f"/api/v1/namespaces/{b.ns}/pods/a")) and p["spec"].get("nodeName") and p,
                   60, what="kube-scheduler to bind the ungated pod")
    assert pod["spec"]["nodeName"] == b.node and not pod["spec"].get("schedulingGates")


def test_a_whole_gpu_taken_leaves_its_halves_only_where_the_release_counts_them(
        release: Release, cluster: RealBackend, operator: Any) -> None:
    b = cluster

    def part(name: str, mem: str) -> dict[str, Any]:
        return {"name": name, "consumesCounters": [{"counterSet": "gpu-0", "counters": {
            "memory": {"value": mem}}}]}

    counters = [{"name": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}]
    devices = [part("gpu-0-full", "40Gi"), part("gpu-0-half", "20Gi")]
    for i, spec in enumerate(({"sharedCounters": counters}, {"devices": devices})):
        b.create(f"{RESOURCE}/resourceslices", {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{b.ns}-{i}"},
            "spec": {"driver": b.driver, "nodeName": b.node,
                     "pool": {"name": b.ns, "generation": 1, "resourceSliceCount": 2}, **spec}})
    klass = device_class(b)
    claim_of(b, "a", klass)
    gated_pod(b, "a", "a")
    operator(("allocator", "narrowing"), SETTINGS)

    def device(claim: str) -> Any:
        got = b.get(f"{RESOURCE}/namespaces/{b.ns}/resourceclaims/{claim}") or {}
        results = ((got.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results")
        return results[0]["device"] if results else None

    assert wait_for(lambda: device("a"), 30, what="claim a allocated") == "gpu-0-full"
    claim_of(b, "z", klass)
    gated_pod(b, "z", "z")
    if release.counts_partitions:
        cond = wait_for(lambda: next((c for c in (b.get(f"/api/v1/namespaces/{b.ns}/pods/z") or {})
                                      .get("status", {}).get("conditions") or []
                                      if c["type"] == "DracoAllocation"), None), 30, what="the condition")
        assert cond["status"] == "False" and "exhausted counters" in cond["message"], cond
        assert device("z") is None
    else:  # the server dropped the counters: the half is just another device
        assert wait_for(lambda: device("z"), 30, what="claim z allocated") == "gpu-0-half"


def tolerating_pod(b: RealBackend, name: str, device: str) -> None:
    """A running pod whose claim, allocated DEVICE, tolerates KEY with an empty effect
    (every effect, for ever): neither draco nor 1.38's kube-controller-manager evicts it."""
    toleration = {"key": KEY, "operator": "Exists"}
    claims = f"{RESOURCE}/namespaces/{b.ns}/resourceclaims"
    b.create(claims, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                      "metadata": {"name": f"{name}-claim"},
                      "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                          "deviceClassName": "gpu", "tolerations": [toleration]}}]}}})
    pod = b.create(f"/api/v1/namespaces/{b.ns}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"nodeName": b.node, "resourceClaims": [{"name": "gpu", "resourceClaimName": f"{name}-claim"}],
                 "containers": [{"name": "c", "image": "registry.invalid/app"}]}})
    b.merge_patch(f"/api/v1/namespaces/{b.ns}/pods/{name}/status", {"status": {
        "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
    b.merge_patch(f"{claims}/{name}-claim/status", {"status": {
        "allocation": {"devices": {"results": [{"request": "gpu", "driver": b.driver, "pool": b.ns,
                                                "device": device, "tolerations": [toleration]}]}},
        "reservedFor": [{"resource": "pods", "name": name, "uid": pod["metadata"]["uid"]}]}})


def test_a_noexecute_taint_evicts_the_pod_once_by_whoever_evicts_on_the_release(
        release: Release, cluster: RealBackend, operator: Any) -> None:
    b = cluster
    slice_of(b, [{"name": "d0"}, {"name": "d1"}, {"name": "d2"}])
    make_pod(b, "a", "d0")
    tolerating_pod(b, "c", "d1")
    make_pod(b, "b", "d2")  # no rule selects its device
    op = operator(("eviction",), SETTINGS)
    wait_for(lambda: op.controllers["eviction"].ownership == release.ownership, 30,
             what=f"ownership {release.ownership}")
    since = audit_offset(b)
    path = UPSTREAM_RULES if release.rule_api.startswith("resource.k8s.io/") else DRACO_RULES
    for device in ("d0", "d1"):
        b.create(path, rule_body(release.rule_api, f"{device}-{b.ns}",
                                 {"driver": b.driver, "pool": b.ns, "device": device}))
    removals = settle(b, since, ["a"])
    assert [(r["pod"], by_kcm(r["agent"])) for r in removals] == [("a", release.evicted_by_kcm)], removals
    assert pod_exists(b, "b") and pod_exists(b, "c")
    assert op.controllers["eviction"].evicted_total == (0 if release.evicted_by_kcm else 1)


def test_a_resource_slice_patch_is_reported(cluster: RealBackend, operator: Any) -> None:
    b = cluster
    slice_of(b, [{"name": f"gpu-{i}", "attributes": {"model": {"string": "H100" if i < 3 else "A100"}}}
                 for i in range(4)])
    operator(("patches",), SETTINGS)
    b.kubectl("apply", "-f", "-", input=yaml.safe_dump({
        "apiVersion": "resource.draco.dev/v1alpha1", "kind": "ResourceSlicePatch",
        "metadata": {"name": f"h100-{b.ns}"},
        "spec": {"devices": {"filter": {"driver": b.driver, "selectors": [
            {"cel": {"expression": f'device.attributes["{b.driver}"].model == "H100"'}}]},
            "attributes": {"example.com/fast": {"bool": True}}}}}))

    def status() -> Any:
        got = json.loads(b.kubectl("get", "rsp", f"h100-{b.ns}", "-o", "json").stdout)
        return got.get("status") or {}

    wait_for(lambda: status().get("matchedDevices") == 3, 30, what="3 matched devices")
    faulty = next(c for c in status()["conditions"] if c["type"] == "Faulty")
    assert (faulty["status"], faulty["reason"]) == ("False", "NoFaults")


def allocate(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """`draco allocate ARGS` in this process (a subprocess would cost an interpreter's
    start): the exit code, stdout and stderr."""
    from operators.cli.main import main

    code = main(["allocate", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_draco_allocate_answers_as_the_release(
        release: Release, cluster: RealBackend, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Two devices whose version attributes differ only in build metadata: the same
    version for 1.38's kube-scheduler (semver), two versions before. A gate the release
    locks is refused."""
    b = cluster
    monkeypatch.setenv("KUBECONFIG", str(b.kubeconfig))
    slice_of(b, [{"name": f"gpu-{i}", "attributes": {"fw": {"version": f"1.0.0+b{i}"}}} for i in range(2)])
    claim_of(b, "c", device_class(b), count=2, constraints=[{"matchAttribute": f"{b.driver}/fw"}])
    code, out, err = allocate(capsys, "--claim", f"{b.ns}/c", "-o", "json")
    assert code == 0, err
    rec = json.loads(out)["claims"][f"{b.ns}/c"]
    assert rec["allocated"] is release.build_metadata_matches, rec
    assert len(rec["results"]) == (2 if release.build_metadata_matches else 0)
    code, out, err = allocate(capsys, "--claim", f"{b.ns}/c", "--feature-gates", "DRAPartitionableDevices=false")
    if release.partitionable_off is None:
        assert code == 0, err
    else:
        assert (code, release.partitionable_off in err) == (2, True), err


def test_draco_runs_preflight_accepts_the_server(cluster: RealBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    """What `draco run` checks before it starts its controllers (it names the server it
    then logs in its startup line)."""
    from operators.cli.run import preflight

    monkeypatch.setenv("KUBECONFIG", str(cluster.kubeconfig))
    assert preflight() == cluster.url
