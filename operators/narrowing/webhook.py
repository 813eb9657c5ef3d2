"""kopf shell of the opt-in gate-injection webhook (`draco run --gate-webhook-port PORT`).

A mutating admission webhook for pod CREATE: pods that use ResourceClaims and match
the configured selectors (see `operators.narrowing.gating`) get draco's scheduling gate,
so the narrowing controller places them and users need not edit their pod templates.
kopf serves it over HTTPS; without a certificate draco makes a self-signed one with the
`openssl` command (kopf's own generator needs `certbuilder`/`oscrypto`, which cannot
load OpenSSL 3) and writes it to `--gate-webhook-cadump` for the caBundle of the
MutatingWebhookConfiguration, which the user registers (draco does not manage it).
Any failure to decide answers "no patch": the pod is admitted ungated, never refused.
"""

from __future__ import annotations

import ipaddress
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kopf
import structlog

from operators.kube.client import KubeClient
from operators.narrowing.gating import Selector, apply_ops, gate_ops, parse_selector, wants_gate

log = structlog.get_logger("draco.gate-webhook")
HANDLER_ID = "gate"  # the URL path: https://ADDRESS:PORT/gate


@dataclass(frozen=True)
class WebhookSettings:
    port: int
    address: str
    namespace_selector: Selector
    pod_selector: Selector
    certfile: str | None
    keyfile: str | None
    cadump: str | None


def settings_from(settings: Any) -> WebhookSettings:
    """Raises ValueError for a selector that does not parse (named by its flag)."""
    parsed: dict[str, Selector] = {}
    for flag, attr in (("--gate-namespace-selector", "gate_namespace_selector"),
                       ("--gate-pod-selector", "gate_pod_selector")):
        try:
            parsed[attr] = parse_selector(getattr(settings, attr, None))
        except ValueError as exc:
            raise ValueError(f"{flag}: {exc}") from exc
    return WebhookSettings(
        port=int(getattr(settings, "gate_webhook_port", 0) or 0),
        address=str(getattr(settings, "gate_webhook_address", "127.0.0.1")),
        namespace_selector=parsed["gate_namespace_selector"],
        pod_selector=parsed["gate_pod_selector"],
        certfile=getattr(settings, "gate_webhook_certfile", None),
        keyfile=getattr(settings, "gate_webhook_keyfile", None),
        cadump=getattr(settings, "gate_webhook_cadump", None),
    )


def self_signed(directory: Path, hosts: list[str]) -> tuple[Path, Path]:
    """A one-year self-signed certificate whose SANs are `hosts` (IPs or DNS names)."""
    sans = ",".join(f"IP:{h}" if _is_ip(h) else f"DNS:{h}" for h in hosts)
    cert, key = directory / "tls.crt", directory / "tls.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "365", "-subj", "/CN=draco-gate-webhook",
         "-addext", f"subjectAltName={sans}", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
    return cert, key


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def register(registry: kopf.OperatorRegistry, settings: WebhookSettings, *,
             client: KubeClient | None = None) -> None:
    """Serve the webhook from the operator's kopf loop; a no-op when the port is 0."""
    if not settings.port:
        return
    api: dict[str, KubeClient] = {}
    generated: list[Path] = []  # the self-signed certificate's directory, removed on exit

    @kopf.on.startup(registry=registry)
    def gate_webhook_server(settings: kopf.OperatorSettings, **_: Any) -> None:
        certfile, keyfile = webhook.certfile, webhook.keyfile
        if not certfile or not keyfile:
            hosts = sorted({webhook.address, "127.0.0.1", "localhost"} - {"0.0.0.0", "::"})
            generated.append(Path(tempfile.mkdtemp(prefix="draco-gate-webhook-")))
            certfile, keyfile = (str(p) for p in self_signed(generated[-1], hosts))
        settings.admission.server = kopf.WebhookServer(
            addr=webhook.address, port=webhook.port, certfile=certfile, pkeyfile=keyfile,
            cafile=certfile, cadump=webhook.cadump)
        log.info("gate webhook serving", url=f"https://{webhook.address}:{webhook.port}/{HANDLER_ID}",
                 namespace_selector=webhook.namespace_selector.text or None,
                 pod_selector=webhook.pod_selector.text or None, cadump=webhook.cadump)

    webhook = settings

    @kopf.on.cleanup(registry=registry)
    async def gate_webhook_cleanup(**_: Any) -> None:
        if "client" in api and client is None:
            await api.pop("client").close()
        for directory in generated:
            shutil.rmtree(directory, ignore_errors=True)

    @kopf.on.mutate("pods", id=HANDLER_ID, operations={"CREATE"}, registry=registry)
    async def gate(body: kopf.Body, patch: kopf.Patch, **_: Any) -> None:
        pod = dict(body)
        if not (pod.get("spec") or {}).get("resourceClaims"):
            return
        try:
            ns_labels = await _namespace_labels(pod, webhook, api, client)
        except Exception as exc:  # noqa: BLE001 - admit ungated rather than block pod creation
            log.warning("gate webhook: namespace not readable; pod admitted ungated",
                        namespace=(pod.get("metadata") or {}).get("namespace"), error=str(exc))
            return
        if not wants_gate(pod, ns_labels, webhook.namespace_selector, webhook.pod_selector):
            return
        ops = gate_ops(pod)
        if ops:
            def add_gate(raw: Any) -> None:
                apply_ops(raw, ops)

            patch.fns.append(add_gate)


async def _namespace_labels(pod: dict[str, Any], webhook: WebhookSettings,
                            api: dict[str, KubeClient], client: KubeClient | None) -> dict[str, str]:
    """Read only when a namespace selector is set: most clusters configure just one."""
    if webhook.namespace_selector.empty:
        return {}
    namespace = (pod.get("metadata") or {}).get("namespace") or ""
    kube = client or api.get("client")
    if kube is None:
        kube = api["client"] = KubeClient()
    resp = await kube.get(f"/api/v1/namespaces/{namespace}")
    if not resp.ok:
        raise RuntimeError(f"GET namespace {namespace}: HTTP {resp.status}")
    return dict(((resp.body or {}).get("metadata") or {}).get("labels") or {})
