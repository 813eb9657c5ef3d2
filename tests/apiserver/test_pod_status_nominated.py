"""pods/status carries `status.nominatedNodeName` on the embedded server as on
kube-apiserver: set, read back (kubectl's NOMINATED NODE column), cleared with null, ignored
when written through the main resource, and a changed non-empty value must be a node name
(ValidatePodStatusUpdate's check)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from operators.apiserver.testing import EmbeddedCluster
from tests.apiserver.http import call


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    c = EmbeddedCluster(tmp_path_factory.mktemp("nominated"))
    try:
        yield c
    finally:
        c.stop()


def _pod(cluster: EmbeddedCluster, name: str) -> str:
    url = f"{cluster.url}/api/v1/namespaces/default/pods"
    code, _ = call(url, "POST", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                                 "spec": {"schedulingGates": [{"name": "resource.draco.dev/allocation"}],
                                          "containers": [{"name": "c", "image": "busybox"}]}})
    assert code == 201
    return f"{url}/{name}"


def _patch(url: str, status: dict[str, Any]) -> tuple[int, Any]:
    return call(url, "PATCH", {"status": status}, "application/merge-patch+json")


# (the values written one after the other through pods/status, the answer to the last one,
#  the value stored after it)
CASES = [
    (["node-1"], 200, "node-1"),
    (["node-1", None], 200, None),
    (["node-1", "node-2"], 200, "node-2"),
    (["Bad_Name"], 422, None),
    (["node-1", "node.example.com"], 200, "node.example.com"),
]


@pytest.mark.parametrize(("values", "code", "stored"), CASES)
def test_nominated_node_name_through_pods_status(cluster: EmbeddedCluster, values: list[str | None],
                                                 code: int, stored: str | None) -> None:
    url = _pod(cluster, f"p-{abs(hash(tuple(values))) % 10**8}")
    answers = [_patch(f"{url}/status", {"nominatedNodeName": v}) for v in values]
    assert answers[-1][0] == code, answers[-1][1]
    if code == 422:
        assert answers[-1][1]["details"]["causes"][0]["field"] == "status.nominatedNodeName"
    _, pod = call(url)
    assert (pod.get("status") or {}).get("nominatedNodeName") == stored


def test_the_main_resource_does_not_write_status(cluster: EmbeddedCluster) -> None:
    url = _pod(cluster, "main-resource")
    code, _ = _patch(url, {"nominatedNodeName": "node-1"})
    assert code == 200
    _, pod = call(url)
    assert "nominatedNodeName" not in (pod.get("status") or {})


def test_kubectl_shows_the_nominated_node(cluster: EmbeddedCluster, tmp_path: Path) -> None:
    url = _pod(cluster, "shown")
    _patch(f"{url}/status", {"nominatedNodeName": "node-7"})
    out = cluster.kubectl("get", "pod", "shown", "-o", "wide").stdout
    header, row = out.splitlines()[:2]
    assert row.split()[header.split().index("NOMINATED")] == "node-7"
