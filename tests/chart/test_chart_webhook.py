"""The gate webhook's own Deployment, rendered by the pinned helm (no cluster).

The controllers' Deployment runs one acting replica (the Lease holder); a webhook served
from it would fail on every standby. So the webhook is a second, stateless Deployment
(`draco run --controllers none`) with a selector of its own: its Service, PDB and
NetworkPolicy reach its pods only, and the controllers' Deployment (whose selector is
immutable and must never change) is the same whether the webhook is on or off.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.chart.helm import ALL_ENABLED, CERT_MANAGER, CHART, find, objects, run_helm, template

ON = ("--set", "webhook.enabled=true")
CONTROLLER_SELECTOR = {"app.kubernetes.io/name": "draco", "app.kubernetes.io/instance": "draco"}
WEBHOOK_SELECTOR = {"app.kubernetes.io/name": "draco-webhook", "app.kubernetes.io/instance": "draco"}


def container(dep: dict[str, Any]) -> dict[str, Any]:
    (only,) = dep["spec"]["template"]["spec"]["containers"]
    return dict(only)


def env_of(dep: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container(dep)["env"]}


def pod_labels(dep: dict[str, Any]) -> dict[str, str]:
    return dict(dep["spec"]["template"]["metadata"]["labels"])


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return selector.items() <= labels.items()


def deployments(objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objs if o["kind"] == "Deployment"}


@pytest.mark.parametrize("values", [ON, ("-f", str(ALL_ENABLED)), ("-f", str(CERT_MANAGER))],
                         ids=["on", "all-enabled", "cert-manager"])
def test_two_deployments_whose_selectors_never_overlap(values: tuple[str, ...]) -> None:
    deps = deployments(objects(template(*values)))
    assert set(deps) == {"draco", "draco-webhook"}
    controller, webhook = deps["draco"], deps["draco-webhook"]
    # the controllers' selector is what it always was (immutable: an upgrade must keep it)
    assert controller["spec"]["selector"] == {"matchLabels": CONTROLLER_SELECTOR}
    assert webhook["spec"]["selector"] == {"matchLabels": WEBHOOK_SELECTOR}
    for dep in deps.values():
        assert selects(dep["spec"]["selector"]["matchLabels"], pod_labels(dep))
    assert not selects(CONTROLLER_SELECTOR, pod_labels(webhook))
    assert not selects(WEBHOOK_SELECTOR, pod_labels(controller))


def test_the_controllers_deployment_is_the_same_with_or_without_the_webhook() -> None:
    off = find(objects(template()), "Deployment", "draco")
    on = find(objects(template(*ON)), "Deployment", "draco")
    assert on == off
    assert not [name for name in env_of(on) if name.startswith("DRACO_GATE_")]
    assert {p["name"] for p in container(on)["ports"]} == {"metrics", "health"}
    assert "webhook-tls" not in {v["name"] for v in on["spec"]["template"]["spec"]["volumes"]}
    assert "annotations" not in on["spec"]["template"]["metadata"]


def test_the_webhook_deployment_serves_only_the_webhook_without_a_lease() -> None:
    objs = objects(template(*ON, "--set", "webhook.namespaceSelector=team=gpu,webhook.podSelector=!skip"))
    dep = find(objs, "Deployment", "draco-webhook")
    env = env_of(dep)
    assert dep["spec"]["replicas"] == 2
    assert container(dep)["args"] == ["run"]
    assert env["DRACO_CONTROLLERS"] == "none" and env["DRACO_LEADER_ELECT"] == "false"
    assert not [name for name in env if name.startswith("DRACO_LEADER_ELECT_") or name == "DRACO_METRICS_PORT"]
    assert "POD_NAME" not in env  # no Lease identity to take
    assert env["DRACO_GATE_WEBHOOK_PORT"] == "9443" and env["DRACO_GATE_WEBHOOK_ADDRESS"] == "0.0.0.0"
    assert env["DRACO_GATE_WEBHOOK_CERTFILE"] == "/etc/draco/webhook/tls.crt"
    assert env["DRACO_GATE_WEBHOOK_KEYFILE"] == "/etc/draco/webhook/tls.key"
    assert env["DRACO_GATE_NAMESPACE_SELECTOR"] == "team=gpu" and env["DRACO_GATE_POD_SELECTOR"] == "!skip"
    assert env["DRACO_HEALTH_PORT"] == "8081"
    assert {p["name"]: p["containerPort"] for p in container(dep)["ports"]} == {"webhook": 9443, "health": 8081}
    assert container(dep)["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container(dep)["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert container(dep)["resources"] == {"requests": {"cpu": "50m", "memory": "128Mi"},
                                           "limits": {"memory": "256Mi"}}
    # a rollout adds a pod before it takes one away: admission calls always find a replica
    assert dep["spec"]["strategy"]["rollingUpdate"] == {"maxUnavailable": 0, "maxSurge": 1}
    spec = dep["spec"]["template"]["spec"]
    mounts = {m["name"]: m for m in container(dep)["volumeMounts"]}
    assert mounts["webhook-tls"] == {"name": "webhook-tls", "mountPath": "/etc/draco/webhook", "readOnly": True}
    assert {"name": "webhook-tls", "secret": {"secretName": "draco-webhook-tls"}} in spec["volumes"]
    term = spec["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["podAffinityTerm"] == {"topologyKey": "kubernetes.io/hostname",
                                       "labelSelector": {"matchLabels": WEBHOOK_SELECTOR}}


def test_the_webhook_pods_are_hardened_like_the_controllers() -> None:
    deps = deployments(objects(template(*ON)))
    controller, webhook = deps["draco"], deps["draco-webhook"]
    pod = webhook["spec"]["template"]["spec"]["securityContext"]
    assert pod == controller["spec"]["template"]["spec"]["securityContext"]
    assert pod["runAsNonRoot"] is True and pod["seccompProfile"] == {"type": "RuntimeDefault"}
    sec = container(webhook)["securityContext"]
    assert sec == container(controller)["securityContext"]
    assert sec["readOnlyRootFilesystem"] is True and sec["allowPrivilegeEscalation"] is False
    assert sec["capabilities"] == {"drop": ["ALL"]}


def test_the_webhook_service_selects_the_webhook_pods_only() -> None:
    objs = objects(template(*ON))
    deps = deployments(objs)
    service = find(objs, "Service", "draco-webhook")
    assert service["spec"]["selector"] == WEBHOOK_SELECTOR
    assert selects(service["spec"]["selector"], pod_labels(deps["draco-webhook"]))
    assert not selects(service["spec"]["selector"], pod_labels(deps["draco"]))
    assert service["spec"]["ports"] == [{"name": "webhook", "port": 443, "targetPort": "webhook", "protocol": "TCP"}]
    metrics = find(objs, "Service", "draco-metrics")
    assert selects(metrics["spec"]["selector"], pod_labels(deps["draco"]))
    assert not selects(metrics["spec"]["selector"], pod_labels(deps["draco-webhook"]))


def test_one_pod_disruption_budget_per_deployment() -> None:
    objs = objects(template("-f", str(ALL_ENABLED)))
    deps = deployments(objs)
    budgets = {o["metadata"]["name"]: o for o in objs if o["kind"] == "PodDisruptionBudget"}
    assert set(budgets) == {"draco", "draco-webhook"}
    for name, budget in budgets.items():
        chosen = [d for d, dep in deps.items() if selects(budget["spec"]["selector"]["matchLabels"], pod_labels(dep))]
        assert chosen == [name]
    assert budgets["draco-webhook"]["spec"]["minAvailable"] == 2  # webhook.podDisruptionBudget.minAvailable
    assert budgets["draco"]["spec"]["minAvailable"] == 1
    # one webhook replica: a budget would block every drain of its node
    one = objects(template(*ON, "--set", "webhook.replicaCount=1"))
    assert [o["metadata"]["name"] for o in one if o["kind"] == "PodDisruptionBudget"] == ["draco"]
    off = objects(template(*ON, "--set", "webhook.podDisruptionBudget.enabled=false"))
    assert [o["metadata"]["name"] for o in off if o["kind"] == "PodDisruptionBudget"] == ["draco"]


def bound(objs: list[dict[str, Any]], account: str) -> set[str]:
    """The roles bound to ServiceAccount ACCOUNT (of draco-system)."""
    subject = {"kind": "ServiceAccount", "name": account, "namespace": "draco-system"}
    return {o["roleRef"]["name"] for o in objs
            if o["kind"] in ("ClusterRoleBinding", "RoleBinding") and subject in o["subjects"]}


def test_the_webhook_has_its_own_service_account_with_least_privilege() -> None:
    plain = objects(template(*ON))
    accounts = {o["metadata"]["name"] for o in plain if o["kind"] == "ServiceAccount"}
    assert accounts == {"draco", "draco-webhook"}
    assert find(plain, "Deployment", "draco-webhook")["spec"]["template"]["spec"]["serviceAccountName"] \
        == "draco-webhook"
    # without a namespace selector the webhook reads nothing: no role at all
    assert bound(plain, "draco-webhook") == set()
    assert "draco-webhook" not in {o["metadata"]["name"] for o in plain if o["kind"] == "ClusterRole"}
    selected = objects(template(*ON, "--set", "webhook.namespaceSelector=team=gpu"))
    assert bound(selected, "draco-webhook") == {"draco-webhook"}
    assert find(selected, "ClusterRole", "draco-webhook")["rules"] == [
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]}]
    # and the controllers' account does not get it
    assert "draco-webhook" not in bound(selected, "draco")
    assert bound(selected, "draco") == {"draco-eviction", "draco-patches", "draco-allocator", "draco-narrowing", "draco-health",
                                        "draco-leader-election"}


def test_an_existing_service_account_for_the_webhook() -> None:
    objs = objects(template(*ON, "--set", "serviceAccount.create=false,serviceAccount.name=ops,"
                                          "webhook.serviceAccountName=ops-hook,webhook.namespaceSelector=a=b"))
    assert not [o for o in objs if o["kind"] == "ServiceAccount"]
    assert find(objs, "Deployment", "draco-webhook")["spec"]["template"]["spec"]["serviceAccountName"] == "ops-hook"
    assert find(objs, "ClusterRoleBinding", "draco-webhook")["subjects"] == [
        {"kind": "ServiceAccount", "name": "ops-hook", "namespace": "draco-system"}]


def test_network_policies_let_the_api_server_reach_the_webhook_pods() -> None:
    objs = objects(template("-f", str(ALL_ENABLED)))
    deps = deployments(objs)
    policies = {o["metadata"]["name"]: o for o in objs if o["kind"] == "NetworkPolicy"}
    assert set(policies) == {"draco", "draco-webhook"}
    for name, policy in policies.items():
        chosen = [d for d, dep in deps.items() if selects(policy["spec"]["podSelector"]["matchLabels"],
                                                          pod_labels(dep))]
        assert chosen == [name]

    def ports(policy: dict[str, Any]) -> set[str]:
        return {p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]}

    assert ports(policies["draco"]) == {"metrics", "health"}
    assert ports(policies["draco-webhook"]) == {"webhook", "health"}
    # the webhook port is open to any source: the API server's address differs per cluster
    (webhook_rule,) = [r for r in policies["draco-webhook"]["spec"]["ingress"]
                       if r["ports"] == [{"port": "webhook", "protocol": "TCP"}]]
    assert "from" not in webhook_rule


def test_the_webhook_is_off_by_default() -> None:
    objs = objects(template())
    assert set(deployments(objs)) == {"draco"}
    assert not [o for o in objs if o["kind"] in ("MutatingWebhookConfiguration", "Secret", "NetworkPolicy")]
    assert {o["metadata"]["name"] for o in objs if o["kind"] == "ServiceAccount"} == {"draco"}


def test_cert_manager_webhook_pods_mount_the_issued_secret() -> None:
    objs = objects(template("-f", str(CERT_MANAGER)))
    dep = find(objs, "Deployment", "draco-webhook")
    assert {"name": "webhook-tls", "secret": {"secretName": "draco-webhook-tls"}} \
        in dep["spec"]["template"]["spec"]["volumes"]
    assert find(objs, "Certificate", "draco-webhook")["spec"]["secretName"] == "draco-webhook-tls"
    # cert-manager renews in place (the kubelet refreshes the files): no checksum to roll on
    assert "checksum/webhook-tls" not in (dep["spec"]["template"]["metadata"].get("annotations") or {})


@pytest.mark.parametrize("key", ["replicaCount", "podDisruptionBudget", "resources"])
def test_values_reused_from_an_older_chart_are_named_with_the_remedy(key: str) -> None:
    """`helm upgrade --reuse-values` from a chart without the webhook Deployment keeps that
    chart's values (seen on the real cluster: a nil-pointer error in pdb.yaml); the chart
    names the missing key and the flag that works (--reset-then-reuse-values)."""
    proc = run_helm("template", "draco", str(CHART), *ON, "--set", f"webhook.{key}=null", check=False)
    assert proc.returncode != 0
    assert f"webhook.{key} is missing" in proc.stderr and "--reset-then-reuse-values" in proc.stderr
