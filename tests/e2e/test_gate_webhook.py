"""The gate-injection webhook through the real kube-apiserver's admission chain.

draco runs in-process with `--gate-webhook-port` on 127.0.0.1 and its self-signed
certificate; a MutatingWebhookConfiguration (cluster-scoped, deleted afterwards) points
the real 1.34 API server at it. Pods created with kubectl then show whether draco added
its gate. The embedded server calls no admission webhooks, so this runs on the real one only.
"""

from __future__ import annotations

import argparse
import base64
import json
import socket
import ssl
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from operators.apiserver.runner import free_port
from operators.apiserver.testing import wait_for
from operators.cli.operator_thread import OperatorThread
from operators.narrowing import DRACO_GATE
from tests.e2e.backends import RealBackend

pytestmark = pytest.mark.real

WEBHOOKS = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
OTHER_GATE = "example.com/quota"



def serving(port: int, cafile: Path) -> bool:
    """True once the webhook answers TLS with the certificate it dumped."""
    if not cafile.exists() or not cafile.stat().st_size:
        return False
    ctx = ssl.create_default_context(cafile=str(cafile))
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as raw, \
                ctx.wrap_socket(raw, server_hostname="127.0.0.1"):
            return True
    except OSError:
        return False


def pod_yaml(name: str, namespace: str, *, claims: bool = True, labels: dict[str, str] | None = None,
             gates: tuple[str, ...] = ()) -> str:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if claims:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "gpu-claim"}]
        spec["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "spec": spec,
                       "metadata": {"name": name, "namespace": namespace, "labels": labels or {}}})


def gates_of(real: RealBackend, namespace: str, name: str) -> list[str]:
    pod = real.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
    assert pod is not None, f"pod {namespace}/{name} is missing"
    return [g["name"] for g in pod["spec"].get("schedulingGates") or []]


@pytest.fixture
def other_namespace(real: RealBackend) -> Iterator[str]:
    """A second namespace the webhook is called for but draco's selector does not match."""
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    real.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                       "metadata": {"name": name}})
    try:
        yield name
    finally:
        real.request("DELETE", f"/api/v1/namespaces/{name}/pods?gracePeriodSeconds=0")
        real.request("DELETE", f"/api/v1/namespaces/{name}")


def test_webhook_gates_new_pods_with_claims(real: RealBackend, other_namespace: str, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    run = uuid.uuid4().hex[:8]
    # The configuration's own namespaceSelector keeps the API server from calling draco
    # for anyone else's namespaces; draco's selector then decides among these two.
    real.merge_patch(f"/api/v1/namespaces/{real.ns}",
                     {"metadata": {"labels": {"draco-e2e-webhook": run, "gpu-team": "yes"}}})
    real.merge_patch(f"/api/v1/namespaces/{other_namespace}",
                     {"metadata": {"labels": {"draco-e2e-webhook": run}}})

    port, cadump = free_port(), tmp_path / "ca.crt"
    settings = argparse.Namespace(
        narrowing_timeout=300.0, qps=200.0, burst=400, gate_webhook_port=port,
        gate_webhook_address="127.0.0.1", gate_namespace_selector="gpu-team=yes",
        gate_pod_selector="!skip-gate", gate_webhook_certfile=None, gate_webhook_keyfile=None,
        gate_webhook_cadump=str(cadump))
    monkeypatch.setenv("KUBECONFIG", str(real.kubeconfig))
    op = OperatorThread(["narrowing"], settings).start()
    config_name = f"draco-gate-e2e-{run}"
    try:
        wait_for(lambda: serving(port, cadump), 120, what="draco's gate webhook to serve TLS")
        real.create(WEBHOOKS, {
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": config_name},
            "webhooks": [{
                "name": "gate.resource.draco.dev",
                "clientConfig": {"url": f"https://127.0.0.1:{port}/gate",
                                 "caBundle": base64.b64encode(cadump.read_bytes()).decode()},
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"],
                           "operations": ["CREATE"]}],
                "namespaceSelector": {"matchLabels": {"draco-e2e-webhook": run}},
                "admissionReviewVersions": ["v1"], "sideEffects": "None",
                "failurePolicy": "Ignore", "timeoutSeconds": 5,
            }]})

        # The API server picks configurations up asynchronously: probe with dry-run
        # creates (webhooks with sideEffects None are called for those too) until it does.
        def probe_gated() -> bool:
            out = real.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-",
                               input=pod_yaml("probe", real.ns)).stdout
            return DRACO_GATE in [g["name"] for g in json.loads(out)["spec"].get("schedulingGates", [])]

        wait_for(probe_gated, 30, what="the API server to call draco's webhook")

        created = {
            (real.ns, "with-claim"): pod_yaml("with-claim", real.ns),
            (real.ns, "no-claim"): pod_yaml("no-claim", real.ns, claims=False),
            (real.ns, "opted-out"): pod_yaml("opted-out", real.ns, labels={"skip-gate": "1"}),
            (real.ns, "other-gate"): pod_yaml("other-gate", real.ns, gates=(OTHER_GATE,)),
            (real.ns, "already"): pod_yaml("already", real.ns, gates=(DRACO_GATE, OTHER_GATE)),
            (other_namespace, "elsewhere"): pod_yaml("elsewhere", other_namespace),
        }
        for (_, name), manifest in created.items():
            out = real.kubectl("create", "-f", "-", input=manifest).stdout
            assert out.strip() == f"pod/{name} created"
        assert {name: gates_of(real, ns, name) for ns, name in created} == {
            "with-claim": [DRACO_GATE],
            "no-claim": [],
            "opted-out": [],
            "other-gate": [OTHER_GATE, DRACO_GATE],
            "already": [OTHER_GATE, DRACO_GATE],  # draco's gate is moved last: it waits for the others
            "elsewhere": [],
        }
    finally:
        real.request("DELETE", f"{WEBHOOKS}/{config_name}")
        op.stop()
    assert real.get(f"{WEBHOOKS}/{config_name}") is None
