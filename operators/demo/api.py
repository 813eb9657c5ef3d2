"""The demo's own small, synchronous view of the API server.

The demo checks every step against the API, as a user with kubectl would, through the
same kubeconfig it prints; the controllers use their own clients.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

# (API prefix, plural, namespaced) of every kind the demo writes or reads.
KINDS: dict[str, tuple[str, str, bool]] = {
    "Namespace": ("/api/v1", "namespaces", False),
    "Node": ("/api/v1", "nodes", False),
    "Pod": ("/api/v1", "pods", True),
    "Event": ("/api/v1", "events", True),
    "ResourceSlice": ("/apis/resource.k8s.io/v1", "resourceslices", False),
    "DeviceClass": ("/apis/resource.k8s.io/v1", "deviceclasses", False),
    "ResourceClaim": ("/apis/resource.k8s.io/v1", "resourceclaims", True),
    "DeviceTaintRule": ("/apis/resource.draco.dev/v1alpha1", "devicetaintrules", False),
    "ResourceSlicePatch": ("/apis/resource.draco.dev/v1alpha1", "resourceslicepatches", False),
    "CustomResourceDefinition": ("/apis/apiextensions.k8s.io/v1", "customresourcedefinitions", False),
}


class ApiError(Exception):
    """An answer the demo did not expect, in one line naming the request."""


def path(kind: str, name: str | None = None, namespace: str | None = None) -> str:
    prefix, plural, namespaced = KINDS[kind]
    base = f"{prefix}/namespaces/{namespace}/{plural}" if namespaced and namespace else f"{prefix}/{plural}"
    return f"{base}/{quote(name, safe='')}" if name else base


class Api:
    """Plain REST calls with the credentials of one kubeconfig file."""

    def __init__(self, kubeconfig: str) -> None:
        from kubernetes import client, config

        from operators.kube.client import KUBECONFIG_LOCK

        configuration = client.Configuration()
        with KUBECONFIG_LOCK:
            config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
        self.host = str(configuration.host)
        self._api = client.ApiClient(configuration)

    def request(self, method: str, url: str, body: Any = None,
                content_type: str = "application/json") -> tuple[int, Any]:
        from kubernetes.client.rest import ApiException

        headers = {"Accept": "application/json", "Content-Type": content_type}
        verb, full, hdrs, data, _ = self._api.param_serialize(
            method, url, header_params=headers, body=body, auth_settings=["BearerToken"])
        try:
            resp = self._api.call_api(verb, full, header_params=hdrs, body=data, _request_timeout=15)
            resp.read()
            status, raw = int(resp.status), resp.data
        except ApiException as exc:
            status, raw = int(exc.status or 0), exc.body
        except Exception as exc:  # noqa: BLE001 - connection problems, in one line
            raise ApiError(f"{method} {url}: cannot reach the API server at {self.host}: "
                           f"{' '.join(str(exc).split())[:200]}") from exc
        try:
            return status, json.loads(raw or b"null")
        except ValueError:
            return status, (raw or b"").decode(errors="replace") if isinstance(raw, bytes) else raw

    def _expect(self, method: str, url: str, ok: tuple[int, ...], body: Any = None,
                content_type: str = "application/json") -> Any:
        status, answer = self.request(method, url, body, content_type)
        if status not in ok:
            message = answer.get("message") if isinstance(answer, dict) else answer
            raise ApiError(f"{method} {url}: HTTP {status}: {' '.join(str(message).split())[:300]}")
        return answer

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        return dict(self._expect("POST", path(obj["kind"], namespace=meta.get("namespace")), (201, 200), obj))

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        status, answer = self.request("GET", path(kind, name, namespace))
        if status == 404:
            return None
        if status != 200:
            raise ApiError(f"GET {path(kind, name, namespace)}: HTTP {status}")
        return dict(answer)

    def list(self, kind: str, namespace: str | None = None, selector: str | None = None) -> list[dict[str, Any]]:
        url = path(kind, namespace=namespace)
        if selector:
            url += f"?labelSelector={quote(selector, safe='')}"
        answer = self._expect("GET", url, (200,))
        return [dict(i) for i in answer.get("items") or []]

    def merge_patch(self, kind: str, name: str, patch: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        return dict(self._expect("PATCH", path(kind, name, namespace), (200,), patch,
                                 "application/merge-patch+json"))

    def delete(self, kind: str, name: str, namespace: str | None = None) -> None:
        self._expect("DELETE", path(kind, name, namespace), (200, 202, 404))

    def close(self) -> None:
        self._api.close()
