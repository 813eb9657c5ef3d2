"""The reporter's API writes: the status subresource and core/v1 Events.

Uses the kubernetes client's low-level call API (the same client the views use), run
in a worker thread so kopf's event loop never blocks on the network.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from operators.patches.report import EventSpec, rfc3339

COMPONENT = "draco-patches"
EVENT_NAMESPACE = "default"  # where Events about cluster-scoped objects go (as kubectl does)
STATUS_PATH = "/apis/resource.draco.dev/v1alpha1/resourceslicepatches/{name}/status"


class KubePatchWriter:
    def __init__(self, api_client: Any | None = None) -> None:
        self._api = api_client
        self.instance = socket.gethostname()

    def _client(self) -> Any:
        if self._api is None:
            from kubernetes import client, config

            try:
                config.load_kube_config()
            except Exception:  # noqa: BLE001 - fall back to the in-cluster account
                config.load_incluster_config()
            self._api = client.ApiClient()
        return self._api

    def _call(self, method: str, path: str, body: Mapping[str, Any], content_type: str) -> None:
        from kubernetes.client.rest import ApiException

        api = self._client()
        verb, url, headers, payload, _ = api.param_serialize(
            method, path,
            header_params={"Accept": "application/json", "Content-Type": content_type},
            body=dict(body), auth_settings=["BearerToken"],
        )
        resp = api.call_api(verb, url, header_params=headers, body=payload)
        resp.read()
        if resp.status >= 400:
            raise ApiException(status=resp.status, reason=resp.reason, http_resp=resp)

    async def patch_status(self, name: str, status: Mapping[str, Any]) -> None:
        """A merge patch: no resourceVersion, the reporter owns these fields. A patch
        deleted meanwhile (404) needs no status."""
        from kubernetes.client.rest import ApiException

        try:
            await asyncio.to_thread(
                self._call, "PATCH", STATUS_PATH.format(name=name), {"status": dict(status)},
                "application/merge-patch+json",
            )
        except ApiException as exc:
            if exc.status != 404:
                raise

    async def post_event(self, involved: Mapping[str, Any], event: EventSpec) -> None:
        now = rfc3339(datetime.now(UTC))
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{involved['name']}.", "namespace": EVENT_NAMESPACE},
            "involvedObject": dict(involved),
            "reason": event.reason,
            "message": event.message,
            "type": event.type,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self.instance,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        await asyncio.to_thread(
            self._call, "POST", f"/api/v1/namespaces/{EVENT_NAMESPACE}/events",
            body, "application/json",
        )
