"""draco as users run it: its own image, installed with helm, on a real node.

`hack/cluster up --real-node` (Kubernetes 1.37) gives one real node, `real-0`, beside a
kwok node: kubelet, containerd and runc, a CNI bridge, kube-proxy, and the upstream DRA
test driver's kubelet plugin publishing four devices. draco's image from `hack/image`
is imported into the node's containerd (`hack/cluster load-image`) and the chart is
installed with only what a user of such a node passes: its toleration and node
selector, and the gate webhook on for one labelled namespace. Then, with real
containers: both Deployments run from the image and pass their probes; a workload pod
is gated by the webhook, allocated by draco on a device the driver publishes, narrowed,
bound by kube-scheduler, its claim prepared by the driver's plugin and the device seen
inside the container (the CDI environment the driver writes); a NoExecute DeviceTaintRule
evicts it, the kubelet stops it gracefully, `kubectl wait` sees EvictionInProgress turn
False, and its replacement runs on another device. SIGTERM stops each draco container
with exit code 0 and releases the Lease, and the standby replica takes over.

Where this test bed is not a production cluster, and why (nothing else differs):
- no cluster DNS: the kubelet warns `MissingClusterDNS` and pods use the host's resolver;
  draco needs only the API server's Service address, which the kubelet puts in its env;
- the real node is tainted `draco.dev/real-node=true:NoSchedule` so that only pods that
  tolerate it land there and kwok keeps the scale tests; every pod here tolerates it;
- the image is imported, not pulled (no registry): the chart's default `IfNotPresent`
  finds it under the chart's default name, `draco:0.1.0`.

Needs root (containerd, runc, cgroups, the bridge), as CI has; only one real node runs on
a machine, so this module owns it.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from operators.apiserver.testing import wait_for
from tests.chart.helm import CHART
from tests.e2e.backends import HACK_CLUSTER, RealCluster
from tests.e2e.test_helm import Helm
from tests.e2e.test_rbac import Audit

pytestmark = [pytest.mark.real, pytest.mark.timeout(900)]

NS = "draco-system"
WORK = "work"
NODE = "real-0"
DRIVER = "test-driver.cdi.k8s.io"
CDI_DIR = Path("/var/lib/draco-node/cdi")
VALUES = {
    "nodeSelector": {"draco.dev/real-node": "true"},
    "tolerations": [{"key": "draco.dev/real-node", "operator": "Equal", "value": "true",
                     "effect": "NoSchedule"}],
    "webhook": {"enabled": True, "namespaceSelector": "draco.dev/gate=enabled"},
}
TOLERATION = {"key": "draco.dev/real-node", "operator": "Exists", "effect": "NoSchedule"}
# The workload: prints the claim variables the driver's CDI spec gives it, stops on TERM.
WORKLOAD_SCRIPT = ('env | grep "^claim_" | sort; trap "echo got SIGTERM; exit 0" TERM; '
                   "while true; do sleep 1; done")


def stamp(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


@pytest.fixture(scope="module")
def node_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    cluster = RealCluster.start("1.37", tmp_path_factory.mktemp("real-node"), nodes=1, real_node=True)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def helm(node_cluster: RealCluster, draco_image: tuple[Path, str, float],
         tmp_path_factory: pytest.TempPathFactory) -> Helm:
    """The image imported into the node, the chart installed, every pod Ready."""
    out, digest, _ = draco_image
    loaded = subprocess.run([str(HACK_CLUSTER), "load-image", "--dir", str(node_cluster.dir),
                             str(out / "draco.tar")], capture_output=True, text=True, timeout=300)
    assert loaded.returncode == 0, loaded.stderr
    assert "draco:0.1.0" in loaded.stdout and digest in loaded.stdout, loaded.stdout
    workdir = tmp_path_factory.mktemp("helm")
    values = workdir / "values.yaml"
    values.write_text(yaml.safe_dump(VALUES))
    helm = Helm(node_cluster, workdir)
    installed = helm("install", "draco", str(CHART), "--namespace", NS, "--create-namespace",
                     "-f", str(values), "--wait", "--timeout", "240s", check=False)
    assert installed.returncode == 0, f"{installed.stderr}\n{describe(helm)}"
    return helm


def describe(helm: Helm) -> str:
    pods = helm.kubectl("-n", NS, "get", "pods", "-o", "wide", check=False).stdout
    logs = helm.kubectl("-n", NS, "logs", "--all-containers", "--prefix", "--tail", "20",
                        "-l", "app.kubernetes.io/instance=draco", check=False)
    return f"{pods}\n{logs.stdout}{logs.stderr}"


def pods(helm: Helm, namespace: str, selector: str) -> list[dict[str, Any]]:
    found = helm.get("-n", namespace, "pods", "-l", selector)
    assert found is not None
    return list(found["items"])


def ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True"
               for c in pod["status"].get("conditions", []))


def exec_in(helm: Helm, pod: str, script: str) -> subprocess.CompletedProcess[str]:
    return helm.kubectl("-n", NS, "exec", pod, "--", "sh", "-c", script, check=False)


def image_config_digest(image_dir: Path, digest: str) -> str:
    blob = image_dir / "oci" / "blobs" / "sha256" / digest.removeprefix("sha256:")
    return str(json.loads(blob.read_text())["config"]["digest"])


def test_both_deployments_run_from_the_image_read_only_and_pass_their_probes(
        helm: Helm, draco_image: tuple[Path, str, float]) -> None:
    image_dir, digest, _ = draco_image

    def all_ready() -> list[dict[str, Any]] | None:
        # A pod may miss a probe or two while the machine is saturated (the suite runs
        # beside Go builds): Ready within a minute is what a user sees; no restart below.
        found = pods(helm, NS, "app.kubernetes.io/instance=draco")
        return found if len(found) == 4 and all(ready(pod) for pod in found) else None

    try:
        wait_for(all_ready, 60, interval=1, what="all four pods Ready")
    except AssertionError as failed:
        raise AssertionError(f"{failed}\n{describe(helm)}") from None
    controllers = pods(helm, NS, "app.kubernetes.io/component!=webhook")
    webhooks = pods(helm, NS, "app.kubernetes.io/component=webhook")
    assert len(controllers) == 2 and len(webhooks) == 2, describe(helm)
    for pod in controllers + webhooks:
        name = pod["metadata"]["name"]
        assert pod["spec"]["nodeName"] == NODE, name
        assert ready(pod), name
        (container,) = pod["spec"]["containers"]
        assert container["readinessProbe"]["httpGet"] and container["livenessProbe"]["httpGet"]
        (status,) = pod["status"]["containerStatuses"]
        assert status["restartCount"] == 0, describe(helm)
        assert status["imageID"] == image_config_digest(image_dir, digest), status
        became_ready = next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")
        took = stamp(became_ready["lastTransitionTime"]) - stamp(status["state"]["running"]["startedAt"])
        assert took < 30, f"{name} was Ready {took:.0f} s after its container started"
        # as the chart declares: UID 65532, a read-only root, writes only where it mounts
        probe = exec_in(helm, name, 'id -u; grep " / " /proc/self/mounts | cut -d" " -f4; '
                                    "for d in / /opt/draco /home/nonroot /tmp; do "
                                    'touch "$d/.w" 2>/dev/null && echo "$d writable"; done')
        assert probe.returncode == 0, probe.stderr
        uid, options, *writable = probe.stdout.split("\n")
        assert uid == "65532" and options.split(",")[0] == "ro", probe.stdout
        assert [w for w in writable if w] == ["/tmp writable"], probe.stdout
    tls = exec_in(helm, webhooks[0]["metadata"]["name"], "ls /etc/draco/webhook")
    assert tls.stdout.split() == ["ca.crt", "tls.crt", "tls.key"], tls.stdout + tls.stderr


def workload(helm: Helm, name: str) -> None:
    helm.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([
        {"apiVersion": "v1", "kind": "Namespace",
         "metadata": {"name": WORK, "labels": {"draco.dev/gate": "enabled"}}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "test"},
         "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
         "metadata": {"name": "one-device", "namespace": WORK},
         "spec": {"spec": {"devices": {"requests": [
             {"name": "dev", "exactly": {"deviceClassName": "test"}}]}}}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": WORK},
         "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                  "template": {"metadata": {"labels": {"app": name}}, "spec": {
                      "tolerations": [TOLERATION], "terminationGracePeriodSeconds": 20,
                      "resourceClaims": [{"name": "dev", "resourceClaimTemplateName": "one-device"}],
                      "containers": [{"name": "app", "image": "draco:0.1.0",
                                      "command": ["sh", "-c", WORKLOAD_SCRIPT],
                                      "resources": {"claims": [{"name": "dev"}]}}]}}}},
    ]))


def running_pod(helm: Helm, app: str, other_than: str = "") -> dict[str, Any]:
    def one() -> dict[str, Any] | None:
        found = [p for p in pods(helm, WORK, f"app={app}")
                 if p["metadata"]["name"] != other_than and not p["metadata"].get("deletionTimestamp")]
        return found[0] if len(found) == 1 and ready(found[0]) else None

    pod = wait_for(one, 120, what=f"a running pod of {app}")
    assert pod is not None
    return pod


def device_of(helm: Helm, pod: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    (status,) = pod["status"]["resourceClaimStatuses"]
    claim = helm.get("-n", WORK, "resourceclaim", status["resourceClaimName"])
    assert claim is not None
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert (result["driver"], result["pool"]) == (DRIVER, NODE)
    return str(result["device"]), claim


def events_of(helm: Helm, pod: dict[str, Any]) -> list[dict[str, Any]]:
    found = helm.get("-n", WORK, "events", "--field-selector",
                     f"involvedObject.uid={pod['metadata']['uid']}")
    assert found is not None
    return list(found["items"])


def assert_prepared_and_visible(helm: Helm, pod: dict[str, Any]) -> str:
    """The device of POD's claim, after checking that it ran through draco and the driver:
    gated by the webhook, allocated and narrowed by draco, bound by kube-scheduler to the
    real node, prepared by the driver (its CDI spec on the node, its env in the container)."""
    device, claim = device_of(helm, pod)
    name = pod["metadata"]["name"]
    assert pod["spec"]["nodeName"] == NODE
    reasons = {e["reason"]: e["source"].get("component") or e.get("reportingComponent")
               for e in events_of(helm, pod)}
    assert {"Allocated", "Narrowed", "Scheduled", "Started"} <= set(reasons), reasons
    spec_file = CDI_DIR / f"{DRIVER}-{claim['metadata']['uid']}-dev.json"
    assert spec_file.exists(), sorted(p.name for p in CDI_DIR.iterdir())
    variable = "claim_" + "".join(c if c.isalnum() else "_" for c in claim["metadata"]["name"]) + "_dev"
    logs = wait_for(lambda: (lambda out: out if variable in out else None)(
        helm.kubectl("-n", WORK, "logs", name, check=False).stdout), 30, what="the container's claim env")
    assert f"{variable}=true" in str(logs).split()
    return device


def test_a_workload_runs_on_a_device_is_evicted_by_a_taint_rule_and_replaced(helm: Helm,
                                                                              node_cluster: RealCluster) -> None:
    audit = Audit(node_cluster.audit_log, f"system:serviceaccount:{NS}:draco")
    audit.mark()
    workload(helm, "app")
    first = running_pod(helm, "app")
    device = assert_prepared_and_visible(helm, first)
    _, claim = device_of(helm, first)
    # the kubelet's graceful stop, seen from inside: the container's own TERM handler
    follow = subprocess.Popen([node_cluster.kubectl_binary, "--kubeconfig", str(node_cluster.admin_kubeconfig),
                               "-n", WORK, "logs", "-f", first["metadata"]["name"]],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    rule = f"{device}-maintenance"
    helm.kubectl("apply", "-f", "-", input=yaml.safe_dump({
        "apiVersion": "resource.draco.dev/v1alpha1", "kind": "DeviceTaintRule", "metadata": {"name": rule},
        "spec": {"deviceSelector": {"driver": DRIVER, "pool": NODE, "device": device},
                 "taint": {"key": "example.com/maintenance", "value": "planned", "effect": "NoExecute"}}}))
    waited = helm.kubectl("wait", "--for=condition=EvictionInProgress=false",
                          f"devicetaintrule.resource.draco.dev/{rule}", "--timeout=120s", check=False)
    assert waited.returncode == 0, waited.stderr + describe(helm)
    try:
        said, _ = follow.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        follow.kill()
        said, _ = follow.communicate()
    assert "got SIGTERM" in said, said
    assert helm.get("-n", WORK, "pod", first["metadata"]["name"]) is None
    replacement = running_pod(helm, "app", other_than=first["metadata"]["name"])
    assert assert_prepared_and_visible(helm, replacement) != device
    # the evicted pod's claim was unprepared by the driver: its CDI spec is gone
    wait_for(lambda: not (CDI_DIR / f"{DRIVER}-{claim['metadata']['uid']}-dev.json").exists(), 60,
             what="the driver to unprepare the evicted pod's claim")
    assert audit.refusals() == [], "the chart's ServiceAccount was refused"


def watch_pod(cluster: RealCluster, pod: str, into: Path) -> subprocess.Popen[bytes]:
    """A kubectl watch of POD written to INTO: the states the kubelet reports before the
    object goes away, the terminated one among them."""
    with open(into, "wb") as out:
        return subprocess.Popen([cluster.kubectl_binary, "--kubeconfig", str(cluster.admin_kubeconfig), "-n", NS,
                                 "get", "pod", pod, "--watch", "-o", "json"], stdout=out, stderr=subprocess.DEVNULL)


def first_object(watched: Path) -> bool:
    """Whether the watch wrote its first object (the pod as it was listed)."""
    try:
        json.JSONDecoder().raw_decode(watched.read_text().lstrip())
    except ValueError:
        return False
    return True


def terminated(watched: Path) -> tuple[int, float] | None:
    """The first terminated state (exit code, finishedAt) among the watched objects."""
    text, decoder, at = watched.read_text(), json.JSONDecoder(), 0
    while True:
        at = len(text) - len(text[at:].lstrip())
        try:
            pod, at = decoder.raw_decode(text, at)
        except ValueError:
            return None  # the end, or an object still being written
        for status in pod.get("status", {}).get("containerStatuses", []):
            state = status.get("state", {}).get("terminated")
            if state:
                return int(state["exitCode"]), stamp(state["finishedAt"])


def lease(helm: Helm) -> dict[str, Any]:
    found = helm.get("-n", NS, "lease", "draco")
    assert found is not None
    return dict(found["spec"])


def test_sigterm_exits_zero_releases_the_lease_and_another_replica_takes_over(
        helm: Helm, node_cluster: RealCluster, tmp_path: Path) -> None:
    before = lease(helm)
    leader = before["holderIdentity"].split("_")[0]
    webhook = pods(helm, NS, "app.kubernetes.io/component=webhook")[0]["metadata"]["name"]
    watches = {name: (watch_pod(node_cluster, name, tmp_path / name), tmp_path / name)
               for name in (leader, webhook)}
    for name, (_, watched) in watches.items():  # kubectl watches on from the version it printed first
        wait_for(lambda watched=watched: first_object(watched), 30, what=f"the watch of {name} to print the pod")
    helm.kubectl("-n", NS, "delete", "pod", leader, webhook, "--wait=false")
    # the standby, or the Deployment's replacement pod if it asks first: both are candidates
    after = wait_for(lambda: (lambda spec: spec if spec.get("holderIdentity")
                              and not spec["holderIdentity"].startswith(leader + "_") else None)(lease(helm)),
                     60, what="another replica to take the Lease")
    assert after is not None
    for name, (proc, watched) in watches.items():
        wait_for(lambda watched=watched: terminated(watched), 60, what=f"{name} to terminate")
        proc.kill()
        code, finished = terminated(watched) or (None, 0.0)
        assert code == 0, f"{name} exited {code}"
        if name == leader:
            # released, not expired: the standby took it well before leaseDuration ran out
            took = stamp(after["acquireTime"]) - finished
            assert took < before["leaseDurationSeconds"] - 5, f"taken {took:.1f} s after the exit"
            assert after["leaseTransitions"] == before["leaseTransitions"] + 1
    # the new leader acts: a new workload is allocated, narrowed and runs
    workload(helm, "after-failover")
    assert_prepared_and_visible(helm, running_pod(helm, "after-failover"))
    wait_for(lambda: len([p for p in pods(helm, NS, "app.kubernetes.io/instance=draco") if ready(p)]) == 4,
             120, what="the Deployments to replace the deleted pods")
