"""Generated allocation worlds through `draco allocate` and through kube-scheduler 1.37.

Each world is a case in the allocation table's compact form (tests/allocator/build.py):
one to three pools on node-1, node-2, every node or the nodes of a zone (node selector),
devices with attributes (numa, model), some tainted; a claim (sometimes two) with
requests of ExactCount 1–3 or All, selectors, `firstAvailable` lists, tolerations, admin
access, matchAttribute/distinctAttribute constraints; devices already allocated to other
claims. The differential machinery of
tests/e2e/test_allocator_differential.py creates them on the test's own 1.37 cluster, lets
kube-scheduler allocate for a pod pinned to node-1, and compares verdict and devices
(upstream's first fit is deterministic: pools by driver and name, devices in order) with
`draco allocate` over the same objects.

CI runs a sample (`DRACO_ORACLE_WORLDS`, default 30, seeded); the large run is
`DRACO_ORACLE_WORLDS=500 python -m pytest -s tests/e2e/test_allocation_oracle.py`.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.backends import RealBackend
from tests.e2e.test_allocator_differential import (
    labelled,
    not_expressible,
    run_rounds,
    spoils_all,
    translate,
    unscoped,
)

pytestmark = [pytest.mark.real, pytest.mark.timeout(1800)]

WORLDS = int(os.environ.get("DRACO_ORACLE_WORLDS", "30"))
SEED = int(os.environ.get("DRACO_ORACLE_SEED", "23"))


def world(rng: random.Random) -> dict[str, Any]:
    slices = []
    all_devices: list[str] = []
    for p in range(rng.randint(1, 3)):
        pool = f"pool-{p}"
        devices = []
        for d in range(rng.randint(1, 4)):
            name = f"dev-{p}{d}"
            dev: dict[str, Any] = {"name": name, "attributes": {
                "numa": {"int": rng.randint(0, 1)}, "model": {"string": rng.choice(["a100", "h100"])}}}
            if rng.random() < 0.15:
                dev["taints"] = [{"key": "broken", "effect": rng.choice(["NoSchedule", "NoExecute", "None"])}]
            devices.append(dev)
            all_devices.append(f"driver-a/{pool}/{name}")
        where = rng.choice(["node-1", "node-1", "node-2", "all", "selector"])
        sl: dict[str, Any] = {"pool": pool, "devices": devices}
        if where == "all":
            sl["allNodes"] = True
        elif where == "selector":  # node-1 is in zone a
            sl["nodeSelector"] = {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "example.com/zone", "operator": "In", "values": [rng.choice(["a", "b"])]}]}]}
        else:
            sl["node"] = where
        slices.append(sl)

    def spec(name: str, sub: bool = False) -> dict[str, Any]:
        r: dict[str, Any] = {"name": name}
        if not sub and rng.random() < 0.1:
            r["adminAccess"] = True  # the namespace carries the admin-access label
        mode = rng.random()
        if mode < 0.15:
            r["mode"] = "All"
        else:
            r["count"] = rng.randint(1, 3)
        if rng.random() < 0.4:
            r["selectors"] = [f'device.attributes["driver-a"].model == "{rng.choice(["a100", "h100"])}"']
        if rng.random() < 0.2:
            r["tolerations"] = [{"key": "broken", "operator": "Exists"}]
        return r

    claims = []
    for c in range(rng.choice([1, 1, 1, 2])):
        requests = []
        for i in range(rng.randint(1, 2)):
            if rng.random() < 0.25:
                requests.append({"name": f"r{i}", "firstAvailable": [
                    {**spec(f"s{j}", sub=True), "name": f"s{j}"} for j in range(rng.randint(2, 3))]})
            else:
                requests.append(spec(f"r{i}"))
        claim: dict[str, Any] = {"name": f"claim-{c}", "requests": requests}
        if rng.random() < 0.3:
            claim["constraints"] = [{rng.choice(["matchAttribute", "distinctAttribute"]): "driver-a/numa"}]
        claims.append(claim)
    in_use = rng.sample(all_devices, k=min(len(all_devices), rng.choice([0, 0, 1, 2])))
    out: dict[str, Any] = {"name": "world", "slices": slices, "claims": claims,
                           "node": {"name": "node-1", "labels": {"example.com/zone": "a"}}}
    if in_use:
        out["inUse"] = in_use
    return out


def test_generated_worlds_allocate_as_kube_scheduler_137(private_137: RealBackend, tmp_path: Path) -> None:
    backend = private_137
    rng = random.Random(SEED)
    cases = [dict(world(rng), name=f"world-{i}") for i in range(WORLDS)]
    assert not any(not_expressible(c) or unscoped(c) for c in cases)
    translated = [translate(i, c, backend.ns) for i, c in enumerate(cases)]
    rounds = [[t for t in translated if not spoils_all(t.case)],
              [t for t in translated if spoils_all(t.case)]]
    rounds = [r[k:k + 100] for r in rounds for k in range(0, len(r), 100)]  # rounds of 100 pods
    mismatches: dict[str, list[str]] = {}
    with labelled(backend, translated):
        for n, chunk in enumerate(r for r in rounds if r):
            (tmp_path / f"round-{n}").mkdir()
            mismatches |= run_rounds(backend, [chunk], [], tmp_path / f"round-{n}", keep_last=0)
            # a node holds 110 pods: the next round's must find room, as on a fresh node
            pods = f"/api/v1/namespaces/{backend.ns}/pods"
            for t in chunk:
                backend.request("DELETE", f"{pods}/{t.pod_name}?gracePeriodSeconds=0")
    refused = [t.case["name"] for t in translated if t.refused is not None]
    print(f"\nallocation oracle: {len(cases)} worlds, {len(refused)} refused by the API server, "
          f"{len(mismatches)} disagreements")
    assert not mismatches, json.dumps({k: (v, next(c for c in cases if c["name"] == k))
                                       for k, v in list(mismatches.items())[:5]}, indent=1)
