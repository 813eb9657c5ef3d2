"""The gate webhook's RBAC proven by the real authorizer (the chart's webhook Deployment
has a ServiceAccount of its own; see test_rbac.py for the controllers').

A release with webhook.namespaceSelector set; `draco run --controllers none` with the
webhook Deployment's environment and a TokenRequest token of its ServiceAccount serves
the chart's MutatingWebhookConfiguration, repointed at 127.0.0.1 (kwok runs no
containers, so the chart's Service has no endpoints; the chart's Secret names the
Service, so a certificate for 127.0.0.1 stands in for it), and the real API server calls
it. Pods are gated by their namespace's labels with no 403 in the audit log; removing
each rule of the webhook's ClusterRole (there is one: get namespaces) gets a 403 and an
ungated pod; and without a namespace selector the account needs no binding at all, as
the chart renders it. What webhook-only mode asks of the API server beyond that is
nothing: kopf's CRD scanning is off when no controller runs.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from operators.apiserver.testing import wait_for
from operators.narrowing import DRACO_GATE
from tests.chart.helm import CHART
from tests.e2e import test_gate_webhook as gate_webhook
from tests.e2e.backends import RealBackend, RealCluster
from tests.e2e.test_helm import Helm
from tests.e2e.test_rbac import (
    Audit,
    free_port,
    http_status,
    replace,
    rule_text,
    service_account_kubeconfig,
    stop_draco,
    who_am_i,
)

pytestmark = pytest.mark.real

WEBHOOK_RELEASE = "draco-wh"  # its own release: cluster-scoped names must not clash with `release`'s
GATE_SELECTOR = ("draco.dev/gate", "enabled")  # the release's webhook.namespaceSelector


@dataclass
class WebhookRelease:
    helm: Helm
    cluster: RealCluster
    namespace: str
    kubeconfig: Path
    audit: Audit
    port: int
    cert: Path
    key: Path
    run: str  # the label value that lets the configuration call draco for a namespace

    @property
    def name(self) -> str:
        return f"{WEBHOOK_RELEASE}-webhook"  # Deployment, ServiceAccount, ClusterRole(Binding), configuration

    def namespace_for(self, backend: RealBackend, *, gate: bool) -> None:
        labels = {"draco-rbac-webhook": self.run}
        if gate:
            labels[GATE_SELECTOR[0]] = GATE_SELECTOR[1]
        backend.merge_patch(f"/api/v1/namespaces/{backend.ns}", {"metadata": {"labels": labels}})


@pytest.fixture(scope="module")
def webhook_release(real_cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebhookRelease]:
    from operators.narrowing.webhook import self_signed

    workdir = tmp_path_factory.mktemp("rbac-webhook")
    helm = Helm(real_cluster, workdir)
    namespace = f"draco-rbac-wh-{uuid.uuid4().hex[:6]}"
    admin = RealBackend(real_cluster, workdir)
    helm.kubectl("create", "namespace", namespace)
    try:
        helm("install", WEBHOOK_RELEASE, str(CHART), "--namespace", namespace, "--set",
             "controllers.eviction.enabled=false,controllers.patches.enabled=false,controllers.allocator.enabled=false,"
             f"webhook.enabled=true,webhook.namespaceSelector={'='.join(GATE_SELECTOR)}")
        cert, key = self_signed(workdir, ["127.0.0.1"])
        rel = WebhookRelease(helm, real_cluster, namespace, workdir / "webhook.kubeconfig",
                             Audit(real_cluster.audit_log, f"system:serviceaccount:{namespace}:{WEBHOOK_RELEASE}-webhook"),
                             free_port(), cert, key, uuid.uuid4().hex[:8])
        service_account_kubeconfig(real_cluster, admin, namespace, rel.name, rel.kubeconfig)
        hook = helm.get("mutatingwebhookconfiguration", rel.name)
        assert hook is not None and len(hook["webhooks"]) == 1
        helm.kubectl("patch", "mutatingwebhookconfiguration", rel.name, "--type=json", "-p", json.dumps([
            {"op": "replace", "path": "/webhooks/0/clientConfig",
             "value": {"url": f"https://127.0.0.1:{rel.port}/gate",
                       "caBundle": base64.b64encode(cert.read_bytes()).decode()}},
            {"op": "add", "path": "/webhooks/0/namespaceSelector/matchLabels",
             "value": {"draco-rbac-webhook": rel.run}}]))
        yield rel
    finally:
        helm("uninstall", WEBHOOK_RELEASE, "--namespace", namespace, check=False)
        helm.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
        admin.cleanup()


@contextmanager
def webhook_running(rel: WebhookRelease, log: Path, **overrides: str) -> Iterator[subprocess.Popen[bytes]]:
    """`draco run` with the webhook Deployment's environment, as its ServiceAccount."""
    dep = rel.helm.get("-n", rel.namespace, "deployment", rel.name)
    assert dep is not None
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["run"]
    env = {e["name"]: e.get("value", "") for e in container["env"]}  # the API server drops empty values
    assert env["DRACO_CONTROLLERS"] == "none" and env["DRACO_LEADER_ELECT"] == "false"
    health = free_port()
    env.update(DRACO_GATE_WEBHOOK_ADDRESS="127.0.0.1", DRACO_GATE_WEBHOOK_PORT=str(rel.port),
               DRACO_GATE_WEBHOOK_CERTFILE=str(rel.cert), DRACO_GATE_WEBHOOK_KEYFILE=str(rel.key),
               DRACO_HEALTH_PORT=str(health), DRACO_HEALTH_ADDRESS="127.0.0.1", **overrides)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DRACO_")}
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "operators", "run"], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env={**clean, **env, "KUBECONFIG": str(rel.kubeconfig)})
    try:
        wait_for(lambda: proc.poll() is not None or (http_status(f"http://127.0.0.1:{health}/readyz") == 200
                                                     and gate_webhook.serving(rel.port, rel.cert)),
                 60, 0.2, what="the webhook-only draco run to be ready and serving")
        assert proc.poll() is None, log.read_text()[-3000:]
        yield proc
    finally:
        code = stop_draco(proc)
    assert code == 0, log.read_text()[-3000:]


def create_pod(backend: RealBackend, name: str, *, claims: bool = True, dry_run: bool = False) -> list[str]:
    """Create a pod as the admin; the scheduling gates it was admitted with."""
    extra = ("--dry-run=server",) if dry_run else ()
    out = backend.kubectl("create", *extra, "-o", "json", "-f", "-",
                          input=gate_webhook.pod_yaml(name, backend.ns, claims=claims)).stdout
    return [g["name"] for g in json.loads(out)["spec"].get("schedulingGates") or []]


def until_gated(backend: RealBackend) -> None:
    """The API server picks configuration changes up asynchronously: probe with dry runs."""
    wait_for(lambda: create_pod(backend, "probe", dry_run=True) == [DRACO_GATE], 30,
             what="the API server to call the webhook")


def can_i(rel: WebhookRelease, verb: str, resource: str) -> bool:
    proc = rel.helm.kubectl("auth", "can-i", verb, resource, "--as", rel.audit.user, check=False)
    return proc.stdout.strip() == "yes"


@pytest.fixture
def two_namespaces(webhook_release: WebhookRelease, tmp_path: Path) -> Iterator[tuple[RealBackend, RealBackend]]:
    """One namespace draco's selector matches, one it does not; the configuration calls
    draco for both."""
    (tmp_path / "gated").mkdir()
    (tmp_path / "other").mkdir()
    gated, other = RealBackend(webhook_release.cluster, tmp_path / "gated"), \
        RealBackend(webhook_release.cluster, tmp_path / "other")
    try:
        webhook_release.namespace_for(gated, gate=True)
        webhook_release.namespace_for(other, gate=False)
        yield gated, other
    finally:
        gated.cleanup()
        other.cleanup()


@pytest.mark.timeout(300)
def test_the_webhook_gates_pods_as_its_own_service_account_with_no_403(
        webhook_release: WebhookRelease, two_namespaces: tuple[RealBackend, RealBackend], tmp_path: Path) -> None:
    rel, (gated, other) = webhook_release, two_namespaces
    assert who_am_i(rel.cluster, rel.kubeconfig)["status"]["userInfo"]["username"] == rel.audit.user
    # the webhook's account holds none of the controllers' rights
    assert not can_i(rel, "list", "pods") and not can_i(rel, "create", "leases.coordination.k8s.io")
    rel.audit.mark()
    with webhook_running(rel, tmp_path / "draco.log"):
        until_gated(gated)
        admitted = {"gated/with-claim": create_pod(gated, "with-claim"),
                    "gated/no-claim": create_pod(gated, "no-claim", claims=False),
                    "other/with-claim": create_pod(other, "with-claim")}
        # it did read the namespaces' labels (the one right it has); the audit log is
        # written asynchronously, so that record is waited for, and a further second
        # lets a refusal of the same requests show up too
        wait_for(lambda: "get core namespaces" in rel.audit.answered(200), 30,
                 what="the webhook's read of the namespaces in the audit log")
        time.sleep(1)
    assert admitted == {"gated/with-claim": [DRACO_GATE], "gated/no-claim": [], "other/with-claim": []}
    assert rel.audit.refusals() == []


@pytest.mark.timeout(300)
def test_each_rule_of_the_webhooks_cluster_role_is_needed(
        webhook_release: WebhookRelease, two_namespaces: tuple[RealBackend, RealBackend], tmp_path: Path) -> None:
    rel, (gated, _) = webhook_release, two_namespaces
    role = rel.helm.get("clusterrole", rel.name)
    assert role is not None
    rules = list(role["rules"])
    assert rules, "with webhook.namespaceSelector the webhook's ClusterRole has rules"

    def granted(rule: dict[str, Any]) -> bool:
        return all(can_i(rel, verb, f"{res}.{group}" if group else res)
                   for group in rule["apiGroups"] for res in rule["resources"] for verb in rule["verbs"])

    def revoked(rule: dict[str, Any]) -> bool:
        return not granted(rule)

    unused = []
    with webhook_running(rel, tmp_path / "draco.log"):
        until_gated(gated)  # the full role works
        for i, rule in enumerate(rules):
            replace(rel.helm, {**role, "rules": rules[:i] + rules[i + 1:]})
            try:
                wait_for(functools.partial(revoked, rule), 10, 0.25, what="the authorizer to drop the rule")
                rel.audit.mark()
                gates = create_pod(gated, f"without-rule-{i}")
                deadline = time.monotonic() + 5  # the audit log is written asynchronously
                while not rel.audit.refusals() and time.monotonic() < deadline:
                    time.sleep(0.1)
                refused = rel.audit.refusals()
            finally:
                replace(rel.helm, role)
                wait_for(functools.partial(granted, rule), 10, 0.25, what="the authorizer to restore the rule")
            named = [r for r in refused if r.split(" ", 2)[2] in rule["resources"]]
            if gates == [DRACO_GATE] and not named:
                unused.append(f"{rule_text(rule)} (refused instead: {refused})")
            else:  # refused, and the pod admitted ungated (a failed read never refuses a pod)
                assert gates == [] and named, (gates, refused)
    assert unused == [], "rules of the webhook whose removal changed nothing"


@pytest.mark.timeout(300)
def test_without_a_namespace_selector_the_webhook_needs_no_rights_at_all(
        webhook_release: WebhookRelease, two_namespaces: tuple[RealBackend, RealBackend], tmp_path: Path) -> None:
    """What the chart renders without webhook.namespaceSelector: no ClusterRole for the
    webhook. Its account, with no binding left, still gates every pod with claims."""
    rel, (gated, other) = webhook_release, two_namespaces
    binding = rel.helm.get("clusterrolebinding", rel.name)
    assert binding is not None
    rel.helm.kubectl("delete", "clusterrolebinding", rel.name)
    try:
        wait_for(lambda: not can_i(rel, "get", "namespaces"), 10, 0.25, what="the authorizer to drop the binding")
        rel.audit.mark()
        with webhook_running(rel, tmp_path / "draco.log", DRACO_GATE_NAMESPACE_SELECTOR=""):
            until_gated(gated)
            admitted = [create_pod(gated, "a"), create_pod(other, "b"), create_pod(gated, "c", claims=False)]
            time.sleep(1)
        assert admitted == [[DRACO_GATE], [DRACO_GATE], []]
        assert rel.audit.refusals() == []
    finally:
        clean = {k: binding[k] for k in ("apiVersion", "kind", "roleRef", "subjects")}
        clean["metadata"] = {"name": binding["metadata"]["name"], "labels": binding["metadata"]["labels"],
                             "annotations": binding["metadata"].get("annotations") or {}}
        rel.helm.kubectl("create", "-f", "-", input=json.dumps(clean))
