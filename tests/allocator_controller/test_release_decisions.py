"""Gangs, preemption and the devices check answer as the cluster's release too, not only
single pods: each decision below turns on 1.38's semantic-version comparison (version
attributes differing only in build metadata match in 1.38, not in 1.37).

What a user would notice on a 1.38 cluster: a gang whose members each need two devices
of one version is placed; a high-priority pod needing such a pair preempts the pod that
holds it; a Kueue Workload needing such pairs is admitted. On 1.37 none of them fits."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from operators.kube.client import Response
from tests.admission.kueue import claim_template, pod_set, workload
from tests.admission.test_admission_controller import Draco, KueueAPI, world
from tests.fake_api import run
from tests.gangs.test_gang_controller import Cluster as GangCluster
from tests.gangs.test_gang_controller import KillableAPI
from tests.gangs.world import NS, classes, gang, member, node, node_slice
from tests.preemption.test_preemption_controller import API as PreemptionAPI
from tests.preemption.test_preemption_controller import Cluster as PreemptionCluster
from tests.preemption.test_victims import preemptor, running

V = "driver-a/v"
PAIR = [{"name": "gpu", "class": "class-a", "count": 2}]
SAME_VERSION = [{"matchAttribute": V}]
# server gitVersion -> whether versions differing in build metadata match
SERVERS = [("v1.38.0-beta.0", True), ("v1.37.2", False)]


def builds(n: int) -> list[dict[str, Any]]:
    """N devices of version 1.0.0, each with its own build metadata."""
    return [{"name": f"gpu-{i}", "attributes": {"v": {"version": f"1.0.0+build.{i}"}}} for i in range(n)]


def answering(cls: type, git_version: str) -> type:
    """CLS, a fake API class, that also answers /version with GIT_VERSION."""
    class Versioned(cls):  # type: ignore[misc, valid-type]
        async def request(self, method: str, path: str, body: Any = None, content_type: str = "") -> Response:
            if method == "GET" and path == "/version":
                return Response(200, {"gitVersion": git_version})
            return await super().request(method, path, body, content_type)
    return Versioned


@pytest.mark.parametrize(("server", "match"), SERVERS)
def test_a_gang_is_placed_as_the_servers_release_places_it(server: str, match: bool) -> None:
    class Cluster(GangCluster):
        def new_api(self) -> KillableAPI:
            api: KillableAPI = answering(KillableAPI, server)()
            return api

    objs = [*classes(), node("n-1"), *node_slice("n-1", builds(4)), gang("g", 2),
            *member("m-0", "g", PAIR, constraints=SAME_VERSION),
            *member("m-1", "g", PAIR, constraints=SAME_VERSION)]
    c = Cluster(objs)
    run(c.settle())
    assert c.allocator.k8s_release.release.name == server[1:5]
    assert c.allocated("m-0-claim", "m-1-claim") == [match, match]
    assert [c.gated("m-0"), c.gated("m-1")] == [not match, not match]


@pytest.mark.parametrize(("server", "match"), SERVERS)
def test_preemption_frees_a_pair_only_where_the_release_matches_it(server: str, match: bool) -> None:
    class Cluster(PreemptionCluster):
        def new_api(self) -> PreemptionAPI:
            api: PreemptionAPI = answering(PreemptionAPI, server)()
            return api

    vip = preemptor("vip", priority=100, requests=PAIR)
    vip[0]["spec"]["devices"]["constraints"] = SAME_VERSION
    objs = [*classes(), node("a"), *node_slice("a", builds(2)),
            *running("low", "a", "gpu-0", "gpu-1", priority=0), *vip]
    c = Cluster(objs)
    run(c.settle())
    if match:
        nomination = c.nomination("vip")
        assert nomination is not None and nomination["victims"] == [f"{NS}/low"]
        assert c.pod("low") is None
        c.release_claims_of_gone_pods()
        run(c.settle())
        assert sorted(c.devices("vip-claim")) == ["gpu-0", "gpu-1"]
    else:
        assert c.nomination("vip") is None
        assert c.pod("low") is not None, "no pod is evicted for devices that would not match"
        assert c.devices("vip-claim") == []


@pytest.mark.parametrize(("release", "match"), [("1.38", True), ("1.37", False)])
def test_draco_allocate_gang_and_preempt_answer_as_the_release_given(
        tmp_path: Path, release: str, match: bool) -> None:
    """`draco allocate --gang/--preempt --kubernetes-version` decide as the controllers do
    on a server of that release."""
    gang_world = [*classes(), node("n-1"), *node_slice("n-1", builds(4)), gang("g", 2),
                  *member("m-0", "g", PAIR, constraints=SAME_VERSION),
                  *member("m-1", "g", PAIR, constraints=SAME_VERSION)]
    vip = preemptor("vip", priority=100, requests=PAIR)
    vip[0]["spec"]["devices"]["constraints"] = SAME_VERSION
    preempt_world = [*classes(), node("a"), *node_slice("a", builds(2)),
                     *running("low", "a", "gpu-0", "gpu-1", priority=0), *vip]
    for flag, key, objs in (("--gang", f"{NS}/g", gang_world), ("--preempt", f"{NS}/vip", preempt_world)):
        path = tmp_path / f"{flag[2:]}.yaml"
        path.write_text(yaml.safe_dump_all(objs))
        done = subprocess.run([sys.executable, "-m", "operators", "allocate", flag, key, "--from", str(path),
                               "--kubernetes-version", release, "-o", "json"],
                              capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        doc = json.loads(done.stdout)
        if flag == "--gang":
            assert (doc["status"] == "allocated") is match, doc
        else:
            assert (doc.get("victims") == [f"{NS}/low"]) is match, doc


@pytest.mark.parametrize(("server", "match"), SERVERS)
def test_the_devices_check_admits_as_the_servers_release(server: str, match: bool) -> None:
    template = claim_template("pair", PAIR, constraints=SAME_VERSION)
    objs = [o for o in world(workload("w", [pod_set("workers", 2, templates={"gpu": "pair"})]))
            if o["kind"] != "ResourceSlice"]
    objs += [template, *node_slice("n-1", builds(4))]
    d = Draco(objs)
    api = answering(KueueAPI, server)()
    api.objects, api.nodes, api.templates, api.rv = d.api.objects, d.api.nodes, [template], d.api.rv
    d.api = api
    d.restart()
    run(d.settle())
    assert d.controller.k8s_release.release.name == server[1:5]
    entry = d.api.check_of()
    if match:
        assert entry["state"] == "Ready", entry["message"]
    else:
        assert entry["state"] != "Ready"
        assert "Ready" not in entry["message"]
