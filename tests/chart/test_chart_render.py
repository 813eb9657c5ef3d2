"""The chart rendered by the pinned helm (no cluster): what an admin gets by default and
with every option on, and what the chart refuses."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path
from typing import Any

import pytest

from operators.cli.main import build_parser
from tests.chart.helm import (
    ALL_ENABLED,
    CERT_MANAGER,
    CHART,
    ROOT,
    find,
    objects,
    run_helm,
    template,
)

CONTROLLERS = ("eviction", "patches", "allocator", "narrowing")


def run_flags() -> set[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    run = sub.choices["run"]  # type: ignore[attr-defined]
    return {opt for action in run._actions for opt in action.option_strings if opt.startswith("--")}


def env_of(deployment: dict[str, Any]) -> dict[str, Any]:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def test_lint_passes_with_default_and_all_enabled_values() -> None:
    for extra in ((), ("-f", str(ALL_ENABLED)), ("-f", str(CERT_MANAGER))):
        out = run_helm("lint", "--strict", str(CHART), *extra)
        assert "0 chart(s) failed" in out.stdout


def test_default_render_is_a_hardened_two_replica_deployment() -> None:
    objs = objects(template())
    dep = find(objs, "Deployment", "draco")
    spec = dep["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    assert dep["spec"]["replicas"] == 2
    assert container["image"] == "draco:0.1.0"
    assert container["args"] == ["run"]
    assert spec["serviceAccountName"] == "draco"
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sec = container["securityContext"]
    assert sec["readOnlyRootFilesystem"] is True
    assert sec["allowPrivilegeEscalation"] is False
    assert sec["capabilities"] == {"drop": ["ALL"]}
    assert sec["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"metrics": 8080, "health": 8081}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    env = env_of(dep)
    assert env["DRACO_CONTROLLERS"] == "eviction,patches,allocator,narrowing,health"
    assert env["DRACO_LEADER_ELECT"] == "true"
    assert env["DRACO_LEADER_ELECT_NAMESPACE"] == "draco-system"
    assert env["DRACO_METRICS_PORT"] == "8080" and env["DRACO_HEALTH_PORT"] == "8081"
    assert env["POD_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    kinds = sorted(o["kind"] for o in objs)
    assert kinds == sorted(["ServiceAccount", "Deployment", "Service", "PodDisruptionBudget", "Role",
                            "RoleBinding", *["ClusterRole"] * 7, *["ClusterRoleBinding"] * 5,
                            "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"])
    cluster_scoped = ("ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy",
                      "ValidatingAdmissionPolicyBinding")
    for o in objs:
        if o["kind"] not in cluster_scoped:
            assert o["metadata"]["namespace"] == "draco-system", o["kind"]


def test_every_draco_variable_the_chart_sets_is_a_flag_of_draco_run() -> None:
    """`draco run` ignores unknown DRACO_* variables, so a typo here would go unnoticed."""
    flags = run_flags()
    deployments = 0
    for values in ((), ("-f", str(ALL_ENABLED))):
        for dep in (o for o in objects(template(*values)) if o["kind"] == "Deployment"):
            deployments += 1
            env = env_of(dep)
            names = {name for name in env if name.startswith("DRACO_")}
            assert names
            for name in names:
                flag = "--" + name.removeprefix("DRACO_").lower().replace("_", "-")
                assert flag in flags, f"{name}: `draco run` has no {flag}"
    assert deployments == 3  # the controllers' (twice) and the webhook's


def test_no_service_link_variable_can_reach_draco_as_a_setting() -> None:
    """The kubelet adds `<SERVICE>_PORT=tcp://…` for every Service of the namespace unless
    told not to: the `draco-metrics` Service became DRACO_METRICS_PORT, which the webhook
    (which does not set it) read as its metrics port and refused, found on a real node."""
    for values in ((), ("-f", str(ALL_ENABLED))):
        objs = objects(template(*values))
        services = [o["metadata"]["name"] for o in objs if o["kind"] == "Service"]
        assert any(name.startswith("draco-") for name in services)
        for dep in (o for o in objs if o["kind"] == "Deployment"):
            assert dep["spec"]["template"]["spec"]["enableServiceLinks"] is False, \
                dep["metadata"]["name"]


@pytest.mark.parametrize(("args", "message"), [
    (("--set", "bogus=1"), "additional properties 'bogus' not allowed"),
    (("--set", "controllers.eviction.bogus=1"), "additional properties 'bogus' not allowed"),
    (("--set", "webhook.certManager.issuerRef.bogus=x"), "additional properties 'bogus' not allowed"),
    (("--set", "webhook.bogus=1"), "additional properties 'bogus' not allowed"),
    (("--set", "webhook.podDisruptionBudget.bogus=1"), "additional properties 'bogus' not allowed"),
    (("--set", "webhook.extraEnv[0].name=DRACO_X,webhook.extraEnv[0].bogus=1"),
     "additional properties 'bogus' not allowed"),
    (("--set", "webhook.replicaCount=0"), "replicaCount"),
    (("--set", "webhook.podDisruptionBudget.enabled=yes"), "enabled"),
    (("--set", "webhook.enabled=true,serviceAccount.create=false,serviceAccount.name=ops"),
     "webhook.serviceAccountName is required"),
    (("--set", "webhook.enabled=true,webhook.serviceAccountName=draco"),
     "webhook.serviceAccountName must differ from the controllers' ServiceAccount"),
    (("--set", "replicaCount=0"), "replicaCount"),
    (("--set", "logFormat=xml"), "logFormat"),
    (("--set", "controllers.eviction.enabled=false,controllers.patches.enabled=false,"
               "controllers.allocator.enabled=false,controllers.narrowing.enabled=false,controllers.health.enabled=false"),
     "enable at least one of"),
    (("--kube-version", "1.33.9"), "kubeVersion"),
])
def test_chart_refuses(args: tuple[str, ...], message: str) -> None:
    proc = run_helm("template", "draco", str(CHART), *args, check=False)
    assert proc.returncode != 0
    assert message in proc.stderr


def test_offline_template_assumes_a_current_kubernetes() -> None:
    """helm's built-in capabilities come from the ldflags of hack/cluster_helm.py: a plain
    `go install` would assume Kubernetes 1.20 and refuse the chart's kubeVersion."""
    out = run_helm("template", "draco", str(CHART), "--show-only", "templates/deployment.yaml")
    assert "kind: Deployment" in out.stdout
    version = run_helm("version", "--short").stdout
    assert version.startswith("v3.22.0")


def rules_of(objs: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return list(find(objs, "ClusterRole", name)["rules"])


def grants(rules: list[dict[str, Any]], group: str, resource: str, verb: str) -> bool:
    return any(group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"] for r in rules)


def test_one_cluster_role_per_enabled_controller() -> None:
    objs = objects(template("--set", "controllers.patches.enabled=false"))
    roles = {o["metadata"]["name"] for o in objs if o["kind"] == "ClusterRole"}
    assert roles == {"draco-eviction", "draco-allocator", "draco-narrowing", "draco-health", "draco-view",
                     "draco-edit"}
    bindings = [o for o in objs if o["kind"] == "ClusterRoleBinding"]
    assert {b["roleRef"]["name"] for b in bindings} == {"draco-eviction", "draco-allocator", "draco-narrowing",
                                                        "draco-health"}
    for b in bindings:
        assert b["subjects"] == [{"kind": "ServiceAccount", "name": "draco", "namespace": "draco-system"}]
    assert env_of(find(objs, "Deployment"))["DRACO_CONTROLLERS"] == "eviction,allocator,narrowing,health"


def test_eviction_api_swaps_pod_delete_for_pods_eviction() -> None:
    plain = rules_of(objects(template()), "draco-eviction")
    api = rules_of(objects(template("--set", "controllers.eviction.useEvictionAPI=true")), "draco-eviction")
    assert grants(plain, "", "pods", "delete") and not grants(plain, "", "pods/eviction", "create")
    assert grants(api, "", "pods/eviction", "create") and not grants(api, "", "pods", "delete")


def test_no_role_grants_wildcards_or_secrets() -> None:
    objs = objects(template("-f", str(ALL_ENABLED)))
    for role in (o for o in objs if o["kind"] in ("ClusterRole", "Role")):
        for rule in role["rules"]:
            assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"], role["metadata"]["name"]
            assert "secrets" not in rule["resources"]


def test_aggregated_roles_reach_view_and_edit() -> None:
    objs = objects(template())
    view, edit = find(objs, "ClusterRole", "draco-view"), find(objs, "ClusterRole", "draco-edit")
    assert view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
    assert edit["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"] == "true"
    assert set(view["rules"][0]["verbs"]) == {"get", "list", "watch"}
    assert {"create", "delete", "patch"} <= set(edit["rules"][0]["verbs"])
    for role in (view, edit):
        assert set(role["rules"][0]["resources"]) >= {"devicetaintrules", "resourceslicepatches"}


def test_leader_election_role_is_namespaced_to_leases() -> None:
    objs = objects(template())
    role = find(objs, "Role", "draco-leader-election")
    assert role["rules"] == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                              "verbs": ["get", "create", "update"]}]
    off = objects(template("--set", "leaderElection.enabled=false,replicaCount=1"))
    assert not [o for o in off if o["kind"] in ("Role", "RoleBinding", "PodDisruptionBudget")]
    assert env_of(find(off, "Deployment"))["DRACO_LEADER_ELECT"] == "false"


def test_all_enabled_render_has_every_optional_object() -> None:
    objs = objects(template("-f", str(ALL_ENABLED)))
    kinds = {o["kind"] for o in objs}
    assert {"ServiceMonitor", "NetworkPolicy", "MutatingWebhookConfiguration", "Secret", "PrometheusRule"} <= kinds
    assert find(objs, "ConfigMap", "draco-dashboard")["metadata"]["annotations"] == {"grafana_folder": "DRA"}
    dep = find(objs, "Deployment", "draco")
    env = env_of(dep)
    assert env["DRACO_QPS"] == "50" and env["DRACO_BURST"] == "100" and env["DRACO_EVICTION_WORKERS"] == "8"
    assert dep["spec"]["replicas"] == 3
    hook_env = env_of(find(objs, "Deployment", "draco-webhook"))
    assert hook_env["DRACO_GATE_WEBHOOK_PORT"] == "9443"
    assert hook_env["DRACO_GATE_NAMESPACE_SELECTOR"] == "draco.dev/gate=enabled"
    assert hook_env["DRACO_GATE_WEBHOOK_CADUMP"] == ""  # webhook.extraEnv
    webhook_role = rules_of(objs, "draco-webhook")
    assert webhook_role == [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]}]
    monitor = find(objs, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    service = find(objs, "Service", "draco-metrics")
    assert service["spec"]["selector"].items() <= monitor["spec"]["selector"]["matchLabels"].items()


def test_self_signed_webhook_certificate_chains_to_the_ca_bundle(tmp_path: Path) -> None:
    objs = objects(template("-f", str(ALL_ENABLED)))
    secret = find(objs, "Secret", "draco-webhook-tls")
    hook = find(objs, "MutatingWebhookConfiguration", "draco-webhook")["webhooks"][0]
    assert hook["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
    assert hook["clientConfig"]["service"] == {"name": "draco-webhook", "namespace": "draco-system",
                                               "path": "/gate", "port": 443}
    assert hook["sideEffects"] == "None" and hook["failurePolicy"] == "Ignore"
    for key in ("ca.crt", "tls.crt", "tls.key"):
        (tmp_path / key).write_bytes(base64.b64decode(secret["data"][key]))
    verify = subprocess.run(["openssl", "verify", "-CAfile", str(tmp_path / "ca.crt"), str(tmp_path / "tls.crt")],
                            capture_output=True, text=True, timeout=30)
    assert verify.returncode == 0, verify.stderr
    text = subprocess.run(["openssl", "x509", "-noout", "-ext", "subjectAltName", "-in", str(tmp_path / "tls.crt")],
                          capture_output=True, text=True, timeout=30, check=True).stdout
    assert "DNS:draco-webhook.draco-system.svc" in text
    dep = find(objs, "Deployment", "draco-webhook")
    assert dep["spec"]["template"]["metadata"]["annotations"]["checksum/webhook-tls"]


def test_cert_manager_issues_the_webhook_certificate() -> None:
    objs = objects(template("-f", str(CERT_MANAGER)))
    assert not [o for o in objs if o["kind"] == "Secret"]
    cert = find(objs, "Certificate", "draco-webhook")
    assert cert["spec"]["secretName"] == "draco-webhook-tls"
    assert cert["spec"]["issuerRef"] == {"kind": "Issuer", "name": "draco-selfsigned"}
    assert find(objs, "Issuer", "draco-selfsigned")["spec"] == {"selfSigned": {}}
    hook = find(objs, "MutatingWebhookConfiguration")
    assert hook["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == "draco-system/draco-webhook"
    assert "caBundle" not in hook["webhooks"][0]["clientConfig"]
    own = objects(template("-f", str(CERT_MANAGER), "--set", "webhook.certManager.issuerRef.kind=ClusterIssuer",
                           "--set", "webhook.certManager.issuerRef.name=corp-ca"))
    assert not [o for o in own if o["kind"] == "Issuer"]
    assert find(own, "Certificate")["spec"]["issuerRef"] == {"kind": "ClusterIssuer", "name": "corp-ca"}


def test_manifests_are_the_chart_rendered_with_default_values() -> None:
    proc = subprocess.run([str(ROOT / "hack" / "render-manifests"), "--check"], capture_output=True,
                          text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    import yaml

    docs = [d for d in yaml.safe_load_all((ROOT / "manifests" / "draco.yaml").read_text()) if d]
    assert docs[0] == {"apiVersion": "v1", "kind": "Namespace",
                       "metadata": {"name": "draco-system", "labels": {"app.kubernetes.io/part-of": "draco"}}}
    assert docs[1:] == objects(template())
