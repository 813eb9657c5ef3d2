"""The devices check (`draco run --admission-check`) learns the cluster's release as the
claim allocator does: once, when Kueue is served, logged and published; where Kueue is
absent it asks nothing."""

from __future__ import annotations

from typing import Any

from structlog.testing import capture_logs

from operators.kube.client import Response
from tests.admission.kueue import workload
from tests.admission.test_admission_controller import Draco, KueueAPI, workers, world
from tests.fake_api import run


class VersionedKueueAPI(KueueAPI):
    def __init__(self, kueue: bool = True, git_version: str = "v1.38.0-beta.0") -> None:
        super().__init__(kueue)
        self.git_version = git_version

    def _get(self, path: str) -> Response:
        if path == "/version":
            return Response(200, {"gitVersion": self.git_version})
        return super()._get(path)


def draco(objects: list[dict[str, Any]], *, kueue: bool = True, git_version: str) -> Draco:
    d = Draco(objects, kueue=kueue)
    api = VersionedKueueAPI(kueue, git_version)
    api.objects, api.nodes, api.templates, api.rv = d.api.objects, d.api.nodes, d.api.templates, d.api.rv
    d.api = api
    d.restart()
    return d


def test_the_check_answers_as_the_servers_release_and_says_so_once() -> None:
    d = draco(world(workload("w", [workers(2)])), git_version="v1.38.0-beta.0")
    with capture_logs() as logs:
        run(d.settle())
        run(d.settle())
    assert d.controller.k8s_release.release.name == "1.38"
    assert d.api.check_of()["state"] == "Ready"
    chosen = [e for e in logs if e.get("controller") == "admission" and e["log_level"] == "info"
              and e.get("release")]
    assert [(e["release"], e["server_version"]) for e in chosen] == [("1.38", "v1.38.0-beta.0")]
    assert [p for m, p, _ in d.api.calls if p == "/version"] == ["/version"]


def test_an_unknown_newer_server_is_answered_as_the_newest_release_with_a_warning() -> None:
    d = draco(world(workload("w", [workers(1)])), git_version="v1.39.1")
    with capture_logs() as logs:
        run(d.settle())
    assert d.controller.k8s_release.release.name == "1.38"
    warned = [e["event"] for e in logs if e["log_level"] == "warning" and e.get("controller") == "admission"]
    assert len(warned) == 1 and "v1.39.1 is outside the releases draco knows" in warned[0]


def test_without_kueue_nothing_is_asked() -> None:
    d = draco(world(), kueue=False, git_version="v1.38.0-beta.0")
    run(d.settle())
    assert not d.controller.k8s_release.known
    assert [p for m, p, _ in d.api.calls if p == "/version"] == []
