"""draco's RBAC proven by the real authorizer: draco runs as the chart's ServiceAccount.

After `helm install`, a token for the release's ServiceAccount comes from the TokenRequest
API and goes into a kubeconfig; draco's controllers (`draco run`'s registry in a thread)
use it against the real 1.34 API server and each controller's flow runs: a NoExecute
DeviceTaintRule evicts a pod (eviction), a ResourceSlicePatch gets its status (patches),
a gated pod's claim is allocated and reserved (allocator), a gated pod whose claim is
allocated is narrowed and ungated (narrowing). The API server's audit log (hack/cluster
enables it) must show no 403 for the ServiceAccount.

Then each rule of each controller's ClusterRole is removed in turn, with only that
controller's ClusterRole bound: the controller, run alone, must be refused — its flow does
not finish, or the audit log shows draco's user refused (403) on a resource of that rule
— so no rule is unused. (A refusal ends the wait early: waiting out every failing flow
would cost ~15 s a rule.)

Last, `draco run` itself (the image's entrypoint) with the Deployment's own environment
(DRACO_* variables read back from the installed release): it takes the Lease, turns
ready, serves every flow unrefused and releases the Lease on SIGTERM; with the
leader-election Role's rule removed it never takes the Lease and no flow happens. (The
Lease's 403s are not in the audit log: hack/cluster's policy drops Lease get/update.)

The gate webhook's own ServiceAccount: tests/e2e/test_rbac_webhook.py.
"""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from operators.apiserver.runner import free_port
from operators.apiserver.testing import wait_for
from operators.cli.operator_thread import OperatorThread
from operators.health.decisions import rule_name
from operators.model import DeviceID
from tests.chart.helm import CHART
from tests.e2e import test_allocator_e2e as alloc
from tests.e2e import test_eviction as evict
from tests.e2e import test_narrowing_controller as narrow
from tests.e2e import test_patches as patches
from tests.e2e.backends import RealBackend, RealCluster
from tests.e2e.test_helm import Helm

pytestmark = pytest.mark.real

CONTROLLERS = ("eviction", "patches", "allocator", "narrowing", "health")
SETTINGS = SimpleNamespace(qps=200.0, burst=400, eviction_workers=10, grace_period=1.0, use_eviction_api=False,
                           status_interval=0.2, patches_debounce=0.05, allocation_timeout=10.0,
                           narrowing_timeout=300.0)
FLOW_SECONDS = 30.0  # a flow that works finishes in a few seconds
REFUSED_SECONDS = 15.0  # with a rule removed: how long to wait for the failure to show


# --------------------------------------------------------------------------- flows
# Each flow creates its objects as the admin and returns the check that draco did its part.

Flow = Callable[[RealBackend], Callable[[], bool]]


def has_event(b: RealBackend, namespace: str, name: str, reason: str) -> bool:
    return any(e["reason"] == reason and e["involvedObject"].get("name") == name for e in b.events(namespace))


def eviction_flow(b: RealBackend) -> Callable[[], bool]:
    evict.make_devices(b, ["d0"])
    evict.make_pod_with_claim(b, "victim", "d0")
    selector = {"driver": b.driver, "pool": b.node, "device": "d0"}
    b.create(evict.RULES, json.loads(evict.rule(f"maint-{b.ns}", "NoExecute", selector)))
    return lambda: not evict.pod_exists(b, "victim") and has_event(b, b.ns, "victim", "DeviceTaintManagerEviction")


def patches_flow(b: RealBackend) -> Callable[[], bool]:
    """A patch whose selector fails on the devices: its condition and its Event."""
    name = f"big-{b.ns}"
    rsp = f"/apis/resource.draco.dev/v1alpha1/resourceslicepatches/{name}"
    b.create("/apis/resource.k8s.io/v1/resourceslices", patches.slice_obj(b.driver, f"{b.ns}-gpu", b.ns, patches.gpus(2)))
    bad = f'device.attributes["{b.driver}"].memory > 40'
    b.create(rsp.rsplit("/", 1)[0], patches.patch_obj(name, filter={"driver": b.driver, "pool": b.ns,
                                                                    "selectors": [bad]}))

    def done() -> bool:
        conditions = ((b.get(rsp) or {}).get("status") or {}).get("conditions") or []
        return any(c["type"] == "Faulty" and c["status"] == "True" for c in conditions) and \
            has_event(b, "default", name, "SelectorFailed")
    return done


def allocator_flow(b: RealBackend) -> Callable[[], bool]:
    """One pod served (claim allocated and reserved), one that never can be (it wants two
    devices of one), and a gang of one: the Allocated Event, the DracoAllocation condition
    on the other, and the gang's Allocated condition in its status."""
    alloc.device_class(b)
    alloc.resource_slice(b, "node-0", "gpu-0", "gpu-1")
    b.create(alloc.claims_path(b), alloc.claim_body("c"))
    two = alloc.claim_body("two")
    two["spec"]["devices"]["requests"][0]["exactly"].update(allocationMode="ExactCount", count=3)
    b.create(alloc.claims_path(b), two)
    pod = alloc.gated_pod(b, "p", claim="c")
    alloc.gated_pod(b, "w", claim="two")
    gangs = f"/apis/resource.draco.dev/v1alpha1/namespaces/{b.ns}/gangs"
    b.create(gangs, {"apiVersion": "resource.draco.dev/v1alpha1", "kind": "Gang",
                     "metadata": {"name": "g"}, "spec": {"minCount": 1}})
    b.create(alloc.claims_path(b), alloc.claim_body("gc"))
    member = {"apiVersion": "v1", "kind": "Pod",
              "metadata": {"name": "gm", "labels": {"resource.draco.dev/gang": "g"}},
              "spec": {"schedulingGates": [{"name": alloc.GATE}],
                       "resourceClaims": [{"name": "gpu", "resourceClaimName": "gc"}],
                       "containers": [{"name": "c", "image": "registry.invalid/app",
                                       "resources": {"claims": [{"name": "gpu"}]}}]}}
    b.create(alloc.pods_path(b), member)

    def gang_allocated() -> bool:
        conds = (((b.get(f"{gangs}/g") or {}).get("status")) or {}).get("conditions") or []
        return any(c["type"] == "Allocated" and c["status"] == "True" for c in conds)

    def done() -> bool:
        status = ((b.get(f"{alloc.claims_path(b)}/c") or {}).get("status")) or {}
        return bool(status.get("allocation")) and [r.get("uid") for r in status.get("reservedFor") or []] == [
            pod["metadata"]["uid"]] and has_event(b, b.ns, "p", "Allocated") \
            and alloc.condition(b, "w", "False") is not None and gang_allocated()
    return done


def narrowing_flow(b: RealBackend) -> Callable[[], bool]:
    driver = b.driver_for("narrow")  # a driver of its own beside the other flows
    b.create("/apis/resource.k8s.io/v1/resourceslices", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{b.ns}-gpu"},
        "spec": {"driver": driver, "nodeName": "node-0",
                 "pool": {"name": b.ns, "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": "d0"}]}})
    excludes_node_0 = {"nodeAffinity": {narrow.REQUIRED: {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "NotIn", "values": ["node-0"]}]}]}}}
    for name, affinity in (("a", None), ("c", excludes_node_0)):  # c: no node is left for it
        pod = narrow.make_gated_pod(b, name, affinity=affinity)
        b.merge_patch(f"{narrow.claims_path(b)}/{name}-claim/status", {"status": {
            "allocation": {"devices": {"results": [
                {"request": "gpu", "driver": driver, "pool": b.ns, "device": "d0"}]},
                "nodeSelector": narrow.PIN_NODE_0},
            "reservedFor": [{"resource": "pods", "name": name, "uid": pod["metadata"]["uid"]}]}})
    return lambda: narrow.without_draco_gate(b, "a") is not None and has_event(b, b.ns, "a", "Narrowed") \
        and narrow.condition(narrow.stored(b, "c"), "False") is not None


def health_flow(b: RealBackend) -> Callable[[], bool]:
    """A monitor's ResourceSlicePatch attribute through a policy's CEL signal (1.34 drops
    slice taints): the policy's rule, its status and Event; then the patch deleted, and
    the rule with it (`clearAfter: 0s`)."""
    base = "/apis/resource.draco.dev/v1alpha1"
    policy, patch = f"health-{b.ns}", f"degraded-{b.ns}"
    b.create("/apis/resource.k8s.io/v1/resourceslices", patches.slice_obj(b.driver, f"{b.ns}-h", b.ns, patches.gpus(1)))
    b.create(f"{base}/devicehealthpolicies", {
        "apiVersion": "resource.draco.dev/v1alpha1", "kind": "DeviceHealthPolicy", "metadata": {"name": policy},
        "spec": {"deviceSelector": {"driver": b.driver, "pool": b.ns},
                 "signals": [{"device": {"cel": f'device.attributes["{b.domain}"].state == "degraded"'}}],
                 "taint": {"key": "health.draco.dev/unhealthy", "effect": "NoSchedule"}, "clearAfter": "0s"}})
    b.create(f"{base}/resourceslicepatches", patches.patch_obj(
        patch, filter={"driver": b.driver, "pool": b.ns}, attributes={f"{b.domain}/state": {"string": "degraded"}}))
    rule = f"{base}/devicetaintrules/{rule_name(policy, DeviceID(b.driver, b.ns, 'gpu-0'))}"
    seen = {"rule": False}

    def done() -> bool:
        if not seen["rule"] and b.get(rule) is not None:
            seen["rule"] = True
            b.request("DELETE", f"{base}/resourceslicepatches/{patch}")  # recovered
        status = (b.get(f"{base}/devicehealthpolicies/{policy}") or {}).get("status") or {}
        return seen["rule"] and b.get(rule) is None and status.get("recovered") == 1 \
            and has_event(b, "default", policy, "DeviceRecovered")
    return done


FLOWS: dict[str, Flow] = {"eviction": eviction_flow, "patches": patches_flow, "allocator": allocator_flow,
                          "narrowing": narrowing_flow, "health": health_flow}


# --------------------------------------------------------------------------- audit log

@dataclass
class Audit:
    path: Path
    user: str
    offset: int = 0
    scope: tuple[str, ...] = ()  # the current flows' namespaces (cluster-scoped names carry them)

    def mark(self) -> None:
        self.offset = self.path.stat().st_size

    def refusals(self) -> list[str]:
        """The requests of draco's user answered 403 since the last mark."""
        return self.answered(403)

    def answered(self, code: int) -> list[str]:
        """The requests of draco's user answered CODE since the last mark."""
        with open(self.path, "rb") as handle:
            handle.seek(self.offset)
            lines = handle.read().splitlines()
        out = []
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a line being written
            if (entry.get("user") or {}).get("username") != self.user:
                continue
            if (entry.get("responseStatus") or {}).get("code") != code:
                continue
            ref = entry.get("objectRef") or {}
            target = f"{ref.get('namespace') or ''}/{ref.get('name') or ''}"
            if self.scope and ref.get("name") and not any(ns in target for ns in self.scope):
                continue  # an object of an earlier test, from a controller still stopping
            resource = "/".join(p for p in (ref.get("resource"), ref.get("subresource")) if p)
            out.append(f"{entry.get('verb')} {ref.get('apiGroup') or 'core'} {resource}")
        return sorted(set(out))


# --------------------------------------------------------------------------- the release

@dataclass
class Release:
    helm: Helm
    cluster: RealCluster
    namespace: str
    name: str
    kubeconfig: Path
    audit: Audit
    bindings: dict[str, dict[str, Any]] = field(default_factory=dict)

    def role(self, controller: str) -> dict[str, Any]:
        role = self.helm.get("clusterrole", f"{self.name}-{controller}")
        assert role is not None
        return role

    def apply(self, obj: dict[str, Any]) -> None:
        replace(self.helm, obj)

    def bind_only(self, controller: str | None) -> None:
        """Leave only CONTROLLER's ClusterRoleBinding (None: all of them)."""
        for name, binding in self.bindings.items():
            exists = self.helm.get("clusterrolebinding", binding["metadata"]["name"]) is not None
            wanted = controller is None or name == controller
            if wanted and not exists:
                clean = {k: binding[k] for k in ("apiVersion", "kind", "roleRef", "subjects")}
                clean["metadata"] = {"name": binding["metadata"]["name"], "labels": binding["metadata"]["labels"]}
                self.helm.kubectl("create", "-f", "-", input=json.dumps(clean))
            elif not wanted and exists:
                self.helm.kubectl("delete", "clusterrolebinding", binding["metadata"]["name"])


def replace(helm: Helm, obj: dict[str, Any]) -> None:
    """Overwrite OBJ as given (unconditionally: no resourceVersion)."""
    clean = {k: v for k, v in obj.items() if k != "status"}
    clean["metadata"] = {k: v for k, v in obj["metadata"].items()
                         if k in ("name", "namespace", "labels", "annotations")}
    helm.kubectl("replace", "-f", "-", input=json.dumps(clean))


def service_account_kubeconfig(cluster: RealCluster, backend: RealBackend, namespace: str, account: str,
                               path: Path) -> Path:
    code, body = backend.request(
        "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}})
    assert code == 201, f"TokenRequest answered {code}: {body}"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "draco",
        "clusters": [{"name": "real", "cluster": {"server": cluster.url,
                                                  "certificate-authority": str(cluster.dir / "pki" / "ca.crt")}}],
        "users": [{"name": account, "user": {"token": body["status"]["token"]}}],
        "contexts": [{"name": "draco", "context": {"cluster": "real", "user": account}}]}))
    return path


@pytest.fixture(scope="module")
def release(real_cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Release]:
    workdir = tmp_path_factory.mktemp("rbac")
    helm = Helm(real_cluster, workdir)
    namespace = f"draco-rbac-{uuid.uuid4().hex[:6]}"
    admin = RealBackend(real_cluster, workdir)  # its own namespace, for admin requests
    helm.kubectl("create", "namespace", namespace)
    try:
        helm("install", "draco", str(CHART), "--namespace", namespace)
        kubeconfig = service_account_kubeconfig(real_cluster, admin, namespace, "draco", workdir / "sa.kubeconfig")
        rel = Release(helm, real_cluster, namespace, "draco", kubeconfig,
                      Audit(real_cluster.audit_log, f"system:serviceaccount:{namespace}:draco"))
        for controller in CONTROLLERS:
            binding = helm.get("clusterrolebinding", f"draco-{controller}")
            assert binding is not None
            rel.bindings[controller] = binding
        yield rel
    finally:
        helm("uninstall", "draco", "--namespace", namespace, check=False)
        helm.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
        admin.cleanup()


def run_flows(release: Release, controllers: tuple[str, ...], flows: tuple[str, ...], workdir: Path,
              seconds: float, stop_on_refusal: bool) -> tuple[dict[str, bool], list[str]]:
    """Start CONTROLLERS as draco's ServiceAccount (none: draco runs already), run FLOWS;
    which finished, and the 403s."""
    for name in flows:
        (workdir / name).mkdir(parents=True, exist_ok=True)
    backends = {name: RealBackend(release.cluster, workdir / name) for name in flows}
    release.audit.scope = tuple(b.ns for b in backends.values())
    release.audit.mark()
    previous = os.environ.get("KUBECONFIG")
    os.environ["KUBECONFIG"] = str(release.kubeconfig)
    op = OperatorThread(list(controllers), SETTINGS).start() if controllers else None
    try:
        checks = {name: FLOWS[name](backends[name]) for name in flows}
        finished = {name: False for name in flows}
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for name, check in checks.items():
                finished[name] = finished[name] or check()
            if all(finished.values()) or (stop_on_refusal and release.audit.refusals()):
                break
            time.sleep(0.25)
        return finished, release.audit.refusals()
    finally:
        if op is not None:
            op.stop()  # a shutdown that hangs fails the test, with a rule removed too
        if previous is None:
            os.environ.pop("KUBECONFIG", None)
        else:
            os.environ["KUBECONFIG"] = previous
        for backend in backends.values():
            backend.cleanup()


def test_every_flow_passes_as_the_service_account_with_no_403(release: Release, tmp_path: Path) -> None:
    # the ServiceAccount really is what the operator runs as
    review = who_am_i(release.cluster, release.kubeconfig)
    assert review["status"]["userInfo"]["username"] == release.audit.user
    finished, refused = run_flows(release, CONTROLLERS, CONTROLLERS, tmp_path, FLOW_SECONDS, stop_on_refusal=False)
    assert finished == {name: True for name in CONTROLLERS}
    # let background writes (Events, conditions) reach the audit log too
    time.sleep(2)
    assert release.audit.refusals() == [] and refused == []


def who_am_i(cluster: RealCluster, kubeconfig: Path) -> dict[str, Any]:
    """A SelfSubjectReview made with the kubeconfig draco runs with."""
    config = yaml.safe_load(kubeconfig.read_text())
    token = config["users"][0]["user"]["token"]
    body = json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}).encode()
    req = urllib.request.Request(cluster.url + "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                                 data=body, method="POST",
                                 headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"})
    context = ssl.create_default_context(cafile=str(cluster.dir / "pki" / "ca.crt"))
    with urllib.request.urlopen(req, context=context, timeout=10) as resp:
        return dict(json.loads(resp.read()))


# Subresources only newer servers check: writing a claim's allocation or reservedFor also
# needs `resourceclaims/binding` from 1.36 (DRAResourceClaimGranularStatusAuthorization).
NEWER_THAN_134 = {"resourceclaims/binding"}


def rule_text(rule: dict[str, Any]) -> str:
    groups = ",".join(g or "core" for g in rule["apiGroups"])
    return f"{groups} {','.join(rule['resources'])}: {','.join(rule['verbs'])}"


@pytest.mark.timeout(900)
@pytest.mark.parametrize("controller", CONTROLLERS)
def test_each_rule_of_the_controllers_cluster_role_is_needed(release: Release, controller: str,
                                                             tmp_path: Path) -> None:
    role = release.role(controller)
    rules = list(role["rules"])
    release.bind_only(controller)
    try:
        # the controller's own ClusterRole is enough for its flow
        finished, refused = run_flows(release, (controller,), (controller,), tmp_path / "all", FLOW_SECONDS,
                                      stop_on_refusal=False)
        assert finished == {controller: True} and refused == [], refused
        unused = []
        for i, rule in enumerate(rules):
            if set(rule["resources"]) <= NEWER_THAN_134:
                continue  # this 1.34 server never asks for it; tests/e2e/test_real_node.py (1.37) does
            release.apply({**role, "rules": rules[:i] + rules[i + 1:]})
            try:
                wait_for(lambda: len(release.role(controller)["rules"]) == len(rules) - 1, 10,
                         what="the reduced ClusterRole")
                finished, refused = run_flows(release, (controller,), (controller,), tmp_path / f"rule-{i}",
                                              REFUSED_SECONDS, stop_on_refusal=True)
            finally:
                release.apply({**role, "rules": rules})
            named = [r for r in refused if r.split(" ", 2)[2] in rule["resources"]]
            if finished[controller] and not named:
                unused.append(f"{rule_text(rule)} (refused instead: {refused})")
        assert unused == [], f"rules of {controller} whose removal changed nothing"
    finally:
        release.bind_only(None)


# --------------------------------------------------------------------------- `draco run`


def chart_environment(release: Release, pod: str) -> dict[str, str]:
    """The container environment of the release's Deployment, as the kubelet would give it
    to POD (ports moved to free ones on 127.0.0.1, so that runs side by side never clash)."""
    dep = release.helm.get("-n", release.namespace, "deployment", release.name)
    assert dep is not None
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["run"]
    fields = {"metadata.name": pod, "metadata.namespace": release.namespace}
    env = {e["name"]: e["value"] if "value" in e else fields[e["valueFrom"]["fieldRef"]["fieldPath"]]
           for e in container["env"]}
    env.update(DRACO_METRICS_PORT=str(free_port()), DRACO_HEALTH_PORT=str(free_port()),
               DRACO_METRICS_ADDRESS="127.0.0.1", DRACO_HEALTH_ADDRESS="127.0.0.1")
    return env


def http_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as err:
        return int(err.code)
    except OSError:
        return 0


def lease_holder(release: Release) -> str | None:
    lease = release.helm.get("-n", release.namespace, "lease", release.name)
    return None if lease is None else lease["spec"].get("holderIdentity") or ""


def start_draco(release: Release, pod: str, log: Path) -> tuple[subprocess.Popen[bytes], dict[str, str]]:
    """`draco run` (the image's ENTRYPOINT and CMD) with the chart's environment, as the SA."""
    env = chart_environment(release, pod)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DRACO_")}
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "operators", "run"], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL,
                                env={**clean, **env, "KUBECONFIG": str(release.kubeconfig)})
    return proc, env


def stop_draco(proc: subprocess.Popen[bytes]) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
        raise


@pytest.mark.timeout(600)
def test_draco_run_with_the_charts_environment_leads_and_serves_as_the_service_account(
        release: Release, tmp_path: Path) -> None:
    """What the chart's pod does, minus the container: `draco run` with the Deployment's
    DRACO_* variables takes the Lease in the release namespace, turns ready, runs every
    controller's flow, is never refused, and on SIGTERM releases the Lease and exits 0."""
    release.audit.mark()
    proc, env = start_draco(release, "draco-0", tmp_path / "draco.log")
    ready = f"http://127.0.0.1:{env['DRACO_HEALTH_PORT']}/readyz"
    try:
        wait_for(lambda: proc.poll() is None and http_status(ready) == 200 or proc.poll() is not None, 90,
                 what="draco run to be ready")
        assert proc.poll() is None, (tmp_path / "draco.log").read_text()[-3000:]
        assert (lease_holder(release) or "").startswith("draco-0")
        assert http_status(f"http://127.0.0.1:{env['DRACO_HEALTH_PORT']}/healthz") == 200
        finished, refused = run_flows(release, (), CONTROLLERS, tmp_path, FLOW_SECONDS, stop_on_refusal=False)
        assert finished == {name: True for name in CONTROLLERS}
    finally:
        code = stop_draco(proc)
    assert code == 0, (tmp_path / "draco.log").read_text()[-3000:]
    assert lease_holder(release) == "", "the Lease was not released on SIGTERM"
    assert release.audit.refusals() == [] and refused == []


@pytest.mark.timeout(600)
def test_without_the_lease_rule_draco_run_never_acts(release: Release, tmp_path: Path) -> None:
    role_name = f"{release.name}-leader-election"
    role = release.helm.get("-n", release.namespace, "role", role_name)
    assert role is not None and len(role["rules"]) == 1
    release.helm.kubectl("delete", "-n", release.namespace, "lease", release.name, "--ignore-not-found")
    release.apply({**role, "rules": []})
    try:
        proc, _ = start_draco(release, "draco-1", tmp_path / "draco.log")
        try:
            finished, _ = run_flows(release, (), ("patches",), tmp_path, REFUSED_SECONDS, stop_on_refusal=False)
            assert proc.poll() is None or proc.returncode != 0
            assert finished == {"patches": False}
            assert lease_holder(release) is None  # (a standby is still ready: readiness is not leadership)
        finally:
            if proc.poll() is None:
                stop_draco(proc)
    finally:
        release.apply(role)

