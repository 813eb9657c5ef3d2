"""The chart against the real 1.34 API server: every rendered object accepted by a
server-side dry run, and a release installed, upgraded and uninstalled with the pinned
helm. The pods never run (kwok fakes nodes and there is no image); the objects are
what is checked.

The chart's optional ServiceMonitor and cert-manager objects need their CRDs: minimal
stand-ins (third_party_crds.yaml, schemas open) are installed for the dry run and
removed afterwards.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from operators.apiserver.testing import wait_for
from tests.chart.helm import ALL_ENABLED, CERT_MANAGER, CHART, ROOT, objects, run_helm
from tests.e2e.backends import RealCluster

pytestmark = pytest.mark.real

THIRD_PARTY_CRDS = Path(__file__).resolve().parent / "third_party_crds.yaml"
DRACO_CRDS = ("devicetaintrules.resource.draco.dev", "resourceslicepatches.resource.draco.dev")


class Helm:
    """The pinned helm against one cluster, with its caches kept out of $HOME."""

    def __init__(self, cluster: RealCluster, home: Path) -> None:
        self.cluster = cluster
        self.env = dict(os.environ, KUBECONFIG=str(cluster.admin_kubeconfig),
                        HELM_CACHE_HOME=str(home / "cache"), HELM_CONFIG_HOME=str(home / "config"),
                        HELM_DATA_HOME=str(home / "data"))

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run_helm(*args, check=check, env=self.env, timeout=180)

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([self.cluster.kubectl_binary, "--kubeconfig", str(self.cluster.admin_kubeconfig),
                               *args], input=input, capture_output=True, text=True, timeout=120)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed:\n{proc.stderr}")
        return proc

    def get(self, *args: str) -> dict[str, Any] | None:
        proc = self.kubectl("get", *args, "-o", "json", check=False)
        if proc.returncode != 0:
            assert "NotFound" in proc.stderr, proc.stderr
            return None
        return dict(json.loads(proc.stdout))


@pytest.fixture
def helm(real_cluster: RealCluster, tmp_path: Path) -> Helm:
    return Helm(real_cluster, tmp_path)


@pytest.fixture
def namespace(helm: Helm) -> Iterator[str]:
    name = f"draco-{uuid.uuid4().hex[:8]}"
    helm.kubectl("create", "namespace", name)
    try:
        yield name
    finally:
        helm.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture(scope="module")
def third_party_crds(real_cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    helm = Helm(real_cluster, tmp_path_factory.mktemp("crds"))
    helm.kubectl("apply", "-f", str(THIRD_PARTY_CRDS))
    helm.kubectl("wait", "--for=condition=Established", "-f", str(THIRD_PARTY_CRDS), "--timeout=60s")
    try:
        yield
    finally:
        helm.kubectl("delete", "-f", str(THIRD_PARTY_CRDS), "--wait=true", "--timeout=60s", check=False)


@pytest.mark.parametrize("values", [None, ALL_ENABLED, CERT_MANAGER], ids=["default", "all-enabled", "cert-manager"])
def test_every_rendered_object_passes_a_server_side_dry_run(
        helm: Helm, namespace: str, third_party_crds: None, values: Path | None) -> None:
    extra = ("-f", str(values)) if values else ()
    rendered = helm("template", "draco", str(CHART), "--namespace", namespace, *extra).stdout
    expected = {(o["kind"], o["metadata"]["name"]) for o in objects(rendered)}
    out = helm.kubectl("apply", "--dry-run=server", "-o", "json", "-f", "-", input=rendered).stdout
    accepted = json.loads(out)
    items = accepted["items"] if accepted.get("kind") == "List" else [accepted]
    assert {(o["kind"], o["metadata"]["name"]) for o in items} == expected
    # nothing of the pod templates was dropped (e.g. the webhook's preStop sleep, GA in 1.34)
    for dep in (o for o in objects(rendered) if o["kind"] == "Deployment"):
        (kept,) = [o for o in items if o["kind"] == "Deployment" and o["metadata"]["name"] == dep["metadata"]["name"]]
        for mine, theirs in zip(dep["spec"]["template"]["spec"]["containers"],
                                kept["spec"]["template"]["spec"]["containers"], strict=True):
            assert theirs.get("lifecycle") == mine.get("lifecycle")
            assert theirs["securityContext"] == mine["securityContext"]


def test_plain_manifests_pass_a_server_side_dry_run(helm: Helm) -> None:
    # A dry run creates nothing, not even the file's own Namespace, which its namespaced
    # objects need: make it for real first (a real `kubectl apply` creates it in order).
    created = helm.get("namespace", "draco-system") is None
    if created:
        helm.kubectl("create", "namespace", "draco-system")
    try:
        out = helm.kubectl("apply", "--dry-run=server", "-f", str(ROOT / "crds"),
                           "-f", str(ROOT / "manifests")).stdout
    finally:
        if created:
            helm.kubectl("delete", "namespace", "draco-system", "--wait=false")
    assert "deployment.apps/draco created (server dry run)" in out
    assert "namespace/draco-system" in out


def deployment_env(dep: dict[str, Any]) -> dict[str, str]:
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value", "") for e in container["env"]}


def selects(selector: dict[str, str], dep: dict[str, Any]) -> bool:
    return selector.items() <= dep["spec"]["template"]["metadata"]["labels"].items()


def test_install_upgrade_uninstall_keeps_the_crds(helm: Helm, namespace: str) -> None:
    release = namespace  # contains "draco": the release name is every object's name prefix
    # helm installs the CRDs from the chart's crds/ only when they are missing: remove them
    # first (no test leaves draco objects behind), so that this release installs them.
    helm.kubectl("delete", "crd", *DRACO_CRDS, "--wait=true", "--timeout=60s")
    try:
        helm("install", release, str(CHART), "--namespace", namespace,
             "--set", "webhook.enabled=true,webhook.namespaceSelector=draco.dev/gate=enabled")
        for crd in DRACO_CRDS:
            assert helm.get("crd", crd) is not None
        dep = helm.get("-n", namespace, "deployment", release)
        assert dep is not None and dep["spec"]["replicas"] == 2
        assert helm.get("serviceaccount", "-n", namespace, release) is not None
        # the webhook: a Deployment of its own, its Service selecting only its pods
        hook_dep = helm.get("-n", namespace, "deployment", f"{release}-webhook")
        assert hook_dep is not None and hook_dep["spec"]["replicas"] == 2
        assert deployment_env(hook_dep)["DRACO_CONTROLLERS"] == "none"
        assert not [v for v in deployment_env(dep) if v.startswith("DRACO_GATE_")]
        service = helm.get("-n", namespace, "service", f"{release}-webhook")
        assert service is not None
        assert selects(service["spec"]["selector"], hook_dep) and not selects(service["spec"]["selector"], dep)
        for name, owner in ((release, dep), (f"{release}-webhook", hook_dep)):
            budget = helm.get("-n", namespace, "poddisruptionbudget", name)
            assert budget is not None and selects(budget["spec"]["selector"]["matchLabels"], owner)
        assert helm.get("serviceaccount", "-n", namespace, f"{release}-webhook") is not None
        webhook_binding = helm.get("clusterrolebinding", f"{release}-webhook")
        assert webhook_binding is not None and webhook_binding["subjects"] == [
            {"kind": "ServiceAccount", "name": f"{release}-webhook", "namespace": namespace}]
        roles = {f"{release}-{c}" for c in ("eviction", "patches", "allocator", "narrowing", "health", "webhook",
                                            "view", "edit")}
        for role in roles:
            assert helm.get("clusterrole", role) is not None, role
        secret = helm.get("-n", namespace, "secret", f"{release}-webhook-tls")
        hook = helm.get("mutatingwebhookconfiguration", f"{release}-webhook")
        assert secret is not None and hook is not None
        assert hook["webhooks"][0]["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
        assert base64.b64decode(secret["data"]["tls.crt"]).startswith(b"-----BEGIN CERTIFICATE-----")
        # the aggregation controller folds draco's view role into the built-in one
        wait_for(lambda: any("devicetaintrules" in r.get("resources", [])
                             for r in (helm.get("clusterrole", "view") or {}).get("rules", [])),
                 30, what="the view ClusterRole to aggregate draco's rules")

        helm("upgrade", release, str(CHART), "--namespace", namespace, "--reuse-values",
             "--set", "replicaCount=3,controllers.patches.enabled=false,client.qps=50,webhook.replicaCount=3")
        upgraded = helm.get("-n", namespace, "deployment", release)
        assert upgraded is not None and upgraded["spec"]["replicas"] == 3
        # patched in place: same object, same (immutable) selector
        assert upgraded["metadata"]["uid"] == dep["metadata"]["uid"]
        assert upgraded["spec"]["selector"] == dep["spec"]["selector"]
        dep = upgraded
        hook_again = helm.get("-n", namespace, "deployment", f"{release}-webhook")
        assert hook_again is not None and hook_again["spec"]["replicas"] == 3
        assert hook_again["metadata"]["uid"] == hook_dep["metadata"]["uid"]
        # the same certificate, so the pods were not rolled for a new one
        checksum = "checksum/webhook-tls"
        assert hook_again["spec"]["template"]["metadata"]["annotations"][checksum] == \
            hook_dep["spec"]["template"]["metadata"]["annotations"][checksum]
        env = deployment_env(dep)
        assert env["DRACO_CONTROLLERS"] == "eviction,allocator,narrowing,health" and env["DRACO_QPS"] == "50"
        assert helm.get("clusterrole", f"{release}-patches") is None
        assert helm.get("clusterrolebinding", f"{release}-patches") is None
        # the self-signed webhook certificate is kept across upgrades (helm's lookup)
        again = helm.get("-n", namespace, "secret", f"{release}-webhook-tls")
        assert again is not None and again["data"] == secret["data"]
        status = json.loads(helm("status", release, "--namespace", namespace, "-o", "json").stdout)
        assert status["version"] == 2 and status["info"]["status"] == "deployed"

        helm("uninstall", release, "--namespace", namespace)
        assert helm.get("-n", namespace, "deployment", release) is None
        assert helm.get("-n", namespace, "deployment", f"{release}-webhook") is None
        assert helm.get("-n", namespace, "serviceaccount", f"{release}-webhook") is None
        for role in roles:
            assert helm.get("clusterrole", role) is None, role
        assert helm.get("mutatingwebhookconfiguration", f"{release}-webhook") is None
        for crd in DRACO_CRDS:  # CRDs survive uninstall, as helm documents for crds/
            assert helm.get("crd", crd) is not None
    finally:
        helm("uninstall", release, "--namespace", namespace, check=False)
        # whatever happened, leave the CRDs as the session installed them
        helm.kubectl("apply", "-f", str(ROOT / "crds"))
        helm.kubectl("wait", "--for=condition=Established", "crd", *DRACO_CRDS, "--timeout=60s")


def test_turning_the_webhook_on_and_off_leaves_the_controllers_alone(helm: Helm, namespace: str) -> None:
    """The webhook moved out of the controllers' Deployment: switching it on or off in an
    upgrade adds or removes its own objects and never touches (or rolls) the controllers."""
    release = namespace
    helm("install", release, str(CHART), "--namespace", namespace, "--skip-crds")
    try:
        before = helm.get("-n", namespace, "deployment", release)
        assert before is not None and helm.get("-n", namespace, "deployment", f"{release}-webhook") is None
        helm("upgrade", release, str(CHART), "--namespace", namespace, "--reuse-values",
             "--set", "webhook.enabled=true")
        on = helm.get("-n", namespace, "deployment", release)
        assert on is not None
        assert (on["metadata"]["uid"], on["metadata"]["generation"]) == \
            (before["metadata"]["uid"], before["metadata"]["generation"])
        for kind in ("deployment", "service", "serviceaccount", "poddisruptionbudget", "secret"):
            name = f"{release}-webhook-tls" if kind == "secret" else f"{release}-webhook"
            assert helm.get("-n", namespace, kind, name) is not None, kind
        assert helm.get("mutatingwebhookconfiguration", f"{release}-webhook") is not None
        helm("upgrade", release, str(CHART), "--namespace", namespace, "--reuse-values",
             "--set", "webhook.enabled=false")
        off = helm.get("-n", namespace, "deployment", release)
        assert off is not None and off["metadata"]["generation"] == before["metadata"]["generation"]
        for kind in ("deployment", "service", "serviceaccount", "poddisruptionbudget"):
            assert helm.get("-n", namespace, kind, f"{release}-webhook") is None, kind
        assert helm.get("mutatingwebhookconfiguration", f"{release}-webhook") is None
    finally:
        helm("uninstall", release, "--namespace", namespace, check=False)
