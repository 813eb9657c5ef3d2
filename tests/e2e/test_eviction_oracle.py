"""Generated device taints and tolerations, judged by draco and by kube-controller-manager
1.37's own device-taint eviction controller: the same pods evicted.

Each example is a running pod whose claim is allocated one device of a slice; the device
carries one or two generated taints (keys, values, effects NoExecute/NoSchedule/None) and
the allocation result (where upstream reads them) one or two generated tolerations
(operators Exists/Equal, empty keys, effects, values, tolerationSeconds 0, 1 or 3600).
kube-controller-manager evicts on its own; the oracle is the API server's audit log:
which pods it deleted by the horizon (HORIZON seconds after the taints' timeAdded).
draco's answer is `draco evictions --from` over the same objects with `--slice-taints
draco` (as if draco evicted for slice taints): the pods it would evict by the horizon.

When kube-controller-manager is done is observed, not waited out: a canary pod of the
test's own uses a device whose NoExecute taint its claim tolerates for exactly HORIZON
seconds, in a slice created after all the others. kube-controller-manager deletes a pod
when its toleration runs out (a timer in its work queue), so once the canary is gone
and so is every pod draco says must go, its timers have passed the horizon and every
eviction due by then was made; a short settle after that only makes the check that
nothing else was evicted stricter.

One difference is deliberate and accounted for: draco lets a toleration with an empty
effect match every effect, as the API documents; upstream's controller honours only
tolerations with effect NoExecute. With those left out draco must answer exactly as
kube-controller-manager did.

CI runs a sample (`DRACO_ORACLE_EVICTIONS`, default 40, seeded); the large run is
`DRACO_ORACLE_EVICTIONS=200 python -m pytest -s tests/e2e/test_eviction_oracle.py`.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from operators.cli.main import main
from tests.e2e.backends import RealBackend
from tests.e2e.test_upstream_taints import SLICES, audit_offset, by_kcm, pod_removals

pytestmark = [pytest.mark.real, pytest.mark.timeout(900)]

EXAMPLES = int(os.environ.get("DRACO_ORACLE_EVICTIONS", "40"))
SEED = int(os.environ.get("DRACO_ORACLE_SEED", "5"))
HORIZON = 10  # seconds after timeAdded both answers cover: tolerationSeconds 0 and 1 inside, 3600 outside
SETTLE = 2.0  # after the positive wait, for a late eviction nobody expected (only makes the check stricter)
CANARY = "canary"


def taint(rng: random.Random) -> dict[str, Any]:
    out: dict[str, Any] = {"key": rng.choice(["example.com/a", "example.com/b"]),
                           "effect": rng.choice(["NoExecute", "NoExecute", "NoSchedule", "None"])}
    if rng.random() < 0.5:
        out["value"] = rng.choice(["x", "y"])
    return out


def toleration(rng: random.Random) -> dict[str, Any]:
    op = rng.choice(["Exists", "Equal"])
    out: dict[str, Any] = {"operator": op}
    if rng.random() < 0.8:
        out["key"] = rng.choice(["example.com/a", "example.com/b"])
    if op == "Equal" and rng.random() < 0.8:
        out["value"] = rng.choice(["x", "y"])
    if rng.random() < 0.7:
        out["effect"] = rng.choice(["NoExecute", "NoSchedule"])
    if out.get("effect") == "NoExecute" and rng.random() < 0.5:
        out["tolerationSeconds"] = rng.choice([0, 1, 3600])
    return out


def test_generated_taints_evict_what_kube_controller_manager_evicts(
        private_137: RealBackend, tmp_path: Path) -> None:
    b = private_137
    rng = random.Random(SEED)
    ns = f"/api/v1/namespaces/{b.ns}"
    claims = f"/apis/resource.k8s.io/v1/namespaces/{b.ns}/resourceclaims"
    taints = {f"d{i}": [taint(rng) for _ in range(rng.randint(1, 2))] for i in range(EXAMPLES)}
    tolerations = {f"d{i}": [toleration(rng) for _ in range(rng.randint(0, 2))] for i in range(EXAMPLES)}
    pods: dict[str, str] = {}  # pod -> uid
    for i in range(EXAMPLES):
        name, device = f"p{i}", f"d{i}"
        b.create(claims, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                          "metadata": {"name": f"{name}-claim"},
                          "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                              "deviceClassName": "gpu"}}]}}})
        pod = b.create(f"{ns}/pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeName": b.node, "resourceClaims": [{"name": "gpu", "resourceClaimName": f"{name}-claim"}],
                     "containers": [{"name": "c", "image": "registry.invalid/app"}]}})
        pods[name] = pod["metadata"]["uid"]
        b.merge_patch(f"{ns}/pods/{name}/status", {"status": {"phase": "Running"}})
        result: dict[str, Any] = {"request": "gpu", "driver": b.driver, "pool": b.ns, "device": device}
        if tolerations[device]:
            result["tolerations"] = tolerations[device]
        b.merge_patch(f"{claims}/{name}-claim/status", {"status": {
            "allocation": {"devices": {"results": [result]}},
            "reservedFor": [{"resource": "pods", "name": name, "uid": pod["metadata"]["uid"]}]}})
    make_canary(b)
    since = audit_offset(b)
    added = datetime.now(UTC).replace(microsecond=0)
    for obj in slices(b, taints, added) + [canary_slice(b, added)]:
        b.create(SLICES, obj)

    ours = draco_evicts(b, tmp_path / "draco", taints, tolerations, pods, added)
    # upstream's controller honours only tolerations with effect NoExecute; draco lets an
    # empty effect match every effect, as the API documents (a difference
    # docs/differences.md lists): with those tolerations left out, draco must answer exactly as kcm did
    upstream_view = {d: [t for t in ts if t.get("effect")] for d, ts in tolerations.items()}
    as_upstream = draco_evicts(b, tmp_path / "upstream", taints, upstream_view, pods, added)

    def evicted() -> set[str]:
        return {r["pod"] for r in pod_removals(b, since) if by_kcm(r["agent"])}

    # kcm done: the canary (due at the horizon) and every pod draco evicts are gone; if
    # kcm never evicts one of those, the comparison below names it after the bound
    deadline = time.monotonic() + HORIZON + 60
    while not as_upstream | {CANARY} <= evicted() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert CANARY in evicted(), "kube-controller-manager did not evict the canary within a minute of its due time"
    time.sleep(SETTLE)
    theirs = evicted() - {CANARY}
    deliberate = sorted(as_upstream ^ ours)
    disagreements = sorted(set(theirs) ^ as_upstream)
    print(f"\neviction oracle: {EXAMPLES} pods, kube-controller-manager evicted {len(theirs)}, "
          f"draco would evict {len(ours)} ({len(deliberate)} spared by an empty-effect "
          f"toleration, deliberately); {len(disagreements)} disagreements")
    assert all(any(not t.get("effect") for t in tolerations[f"d{p[1:]}"]) for p in deliberate)
    details = {p: {"taints": taints[f"d{p[1:]}"], "tolerations": tolerations[f"d{p[1:]}"],
                   "kcm": p in theirs, "draco": p in as_upstream} for p in disagreements}
    assert not disagreements, json.dumps(details, indent=1)


def draco_evicts(b: RealBackend, workdir: Path, taints: dict[str, list[dict[str, Any]]],
                 tolerations: dict[str, list[dict[str, Any]]], pods: dict[str, str],
                 added: datetime) -> set[str]:
    """The pods `draco evictions --from` evicts by the horizon (tolerationSeconds 1 inside,
    3600 outside), over the same objects as kube-controller-manager saw (but the canary)."""
    workdir.mkdir()
    items: list[dict[str, Any]] = slices(b, taints, added)
    for i in range(len(pods)):
        name, device = f"p{i}", f"d{i}"
        result = {"request": "gpu", "driver": b.driver, "pool": b.ns, "device": device,
                  **({"tolerations": tolerations[device]} if tolerations[device] else {})}
        items.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                      "metadata": {"name": f"{name}-claim", "namespace": b.ns, "uid": f"c-{i}"},
                      "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
                      "status": {"allocation": {"devices": {"results": [result]}},
                                 "reservedFor": [{"resource": "pods", "name": name, "uid": pods[name]}]}})
        items.append({"apiVersion": "v1", "kind": "Pod",
                      "metadata": {"name": name, "namespace": b.ns, "uid": pods[name]},
                      "spec": {"nodeName": b.node, "containers": [{"name": "c", "image": "i"}],
                               "resourceClaims": [{"name": "gpu", "resourceClaimName": f"{name}-claim"}]},
                      "status": {"phase": "Running"}})
    world = workdir / "world.json"
    world.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    horizon = added + timedelta(seconds=HORIZON)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["evictions", "--from", str(world), "--slice-taints", "draco",
                     "--now", horizon.strftime("%Y-%m-%dT%H:%M:%SZ"), "-o", "json"]) == 0
    return {p.split("/")[1] for p in json.loads(buf.getvalue())["evict"]}


PER_SLICE = 50  # the API allows 64 devices in a slice whose devices carry taints


def slices(b: RealBackend, taints: dict[str, list[dict[str, Any]]], added: datetime) -> list[dict[str, Any]]:
    """The devices with their taints (stamped ADDED), in slices of one pool."""
    stamp = added.strftime("%Y-%m-%dT%H:%M:%SZ")
    names = list(taints)
    chunks = [names[k:k + PER_SLICE] for k in range(0, len(names), PER_SLICE)]
    return [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
             "metadata": {"name": f"{b.node}-{b.ns}-{n}"},
             "spec": {"driver": b.driver, "nodeName": b.node,
                      "pool": {"name": b.ns, "generation": 1, "resourceSliceCount": len(chunks)},
                      "devices": [{"name": d, "taints": [{**t, "timeAdded": stamp} for t in taints[d]]}
                                  for d in chunk]}}
            for n, chunk in enumerate(chunks)]


def make_canary(b: RealBackend) -> None:
    """The canary: a running pod whose claim is allocated the device `canary` (of a slice
    created last) and tolerates its NoExecute taint for exactly HORIZON seconds."""
    ns = f"/api/v1/namespaces/{b.ns}"
    claims = f"/apis/resource.k8s.io/v1/namespaces/{b.ns}/resourceclaims"
    b.create(claims, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                      "metadata": {"name": f"{CANARY}-claim"},
                      "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}})
    pod = b.create(f"{ns}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": CANARY},
        "spec": {"nodeName": b.node, "resourceClaims": [{"name": "gpu", "resourceClaimName": f"{CANARY}-claim"}],
                 "containers": [{"name": "c", "image": "registry.invalid/app"}]}})
    b.merge_patch(f"{ns}/pods/{CANARY}/status", {"status": {"phase": "Running"}})
    b.merge_patch(f"{claims}/{CANARY}-claim/status", {"status": {
        "allocation": {"devices": {"results": [{
            "request": "gpu", "driver": b.driver, "pool": f"{b.ns}-{CANARY}", "device": CANARY,
            "tolerations": [{"key": "example.com/canary", "operator": "Exists", "effect": "NoExecute",
                             "tolerationSeconds": HORIZON}]}]}},
        "reservedFor": [{"resource": "pods", "name": CANARY, "uid": pod["metadata"]["uid"]}]}})


def canary_slice(b: RealBackend, added: datetime) -> dict[str, Any]:
    """The canary's device, in a pool of its own: nothing else uses it."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{b.node}-{b.ns}-{CANARY}"},
            "spec": {"driver": b.driver, "nodeName": b.node,
                     "pool": {"name": f"{b.ns}-{CANARY}", "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": CANARY, "taints": [{
                         "key": "example.com/canary", "effect": "NoExecute",
                         "timeAdded": added.strftime("%Y-%m-%dT%H:%M:%SZ")}]}]}}
