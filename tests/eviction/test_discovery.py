"""Discovery answers from recorded API answers: the dry-run probe, the version fallback
and which DeviceTaintRule versions upstream serves."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from operators.kube.client import Response
from operators.kube.discovery import PROBE_PATH, Capabilities, discover

KEPT = {"spec": {"devices": [{"name": "probe", "taints": [{"key": "probe.draco.dev/kept", "effect": "NoSchedule"}]}]}}
DROPPED = {"spec": {"devices": [{"name": "probe"}]}}
RULES = {"resources": [{"name": "devicetaintrules"}, {"name": "resourceslices"}]}
NO_RULES = {"resources": [{"name": "resourceslices"}]}


class Answers:
    def __init__(self, answers: dict[tuple[str, str], Response]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, str]] = []

    async def get(self, path: str) -> Response:
        self.calls.append(("GET", path))
        return self.answers.get(("GET", path), Response(404, {}))

    async def post(self, path: str, body: Any) -> Response:
        self.calls.append(("POST", path))
        return self.answers.get(("POST", path), Response(404, {}))


def group(*versions: str, preferred: str | None = None) -> Response:
    return Response(200, {"versions": [{"version": v} for v in versions],
                          "preferredVersion": {"version": preferred or versions[0]}})


# (case, gitVersion, probe answer, group versions, per-version resources) -> capabilities
CASES = [
    ("1.34 default: drops, no rules", "v1.34.4", Response(201, DROPPED), group("v1"), {"v1": NO_RULES},
     (False, "probe", (), False)),
    ("1.37: keeps, v1 rules", "v1.37.2", Response(201, KEPT), group("v1"), {"v1": RULES},
     (True, "probe", ("v1",), True)),
    ("1.36 with the beta API on", "v1.36.1", Response(201, KEPT), group("v1", "v1beta2"),
     {"v1": NO_RULES, "v1beta2": RULES}, (True, "probe", ("v1beta2",), True)),
    ("1.34 with the alpha gates on", "v1.34.4", Response(201, KEPT), group("v1", "v1alpha3", preferred="v1"),
     {"v1": NO_RULES, "v1alpha3": RULES}, (True, "probe", ("v1alpha3",), True)),
    ("probe refused on 1.36: the version decides", "v1.36.0", Response(403, {}), group("v1"),
     {"v1": NO_RULES}, (True, "version", (), True)),
    ("probe refused on 1.35: the version decides", "v1.35.3", Response(403, {}), group("v1"),
     {"v1": NO_RULES}, (False, "version", (), False)),
    ("draco's embedded server never counts as evicting", "v1.34.0-draco", Response(201, KEPT), group("v1"),
     {"v1": NO_RULES}, (True, "probe", (), False)),
]


@pytest.mark.parametrize(("version", "probe", "grp", "resources", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_discover(version: str, probe: Response, grp: Response, resources: dict[str, Any],
                  expected: tuple[bool, str, tuple[str, ...], bool]) -> None:
    answers = {("GET", "/version"): Response(200, {"gitVersion": version}), ("POST", PROBE_PATH): probe,
               ("GET", "/apis/resource.k8s.io"): grp}
    answers.update({("GET", f"/apis/resource.k8s.io/{v}"): Response(200, r) for v, r in resources.items()})
    client = Answers(answers)
    caps: Capabilities = asyncio.run(discover(client))  # type: ignore[arg-type]
    assert (caps.keeps_device_taints, caps.detected_by, caps.rule_versions, caps.upstream_evicts) == expected
    assert caps.server_version == version
    assert "dryRun=All" in PROBE_PATH  # the probe never stores anything


def test_read_only_discovery_writes_nothing() -> None:
    """A standby replica logs its startup line before it leads: no dry run either."""
    client = Answers({("GET", "/version"): Response(200, {"gitVersion": "v1.36.2"}),
                      ("GET", "/apis/resource.k8s.io"): group("v1")})
    caps = asyncio.run(discover(client, probe=False))  # type: ignore[arg-type]
    assert (caps.keeps_device_taints, caps.detected_by) == (True, "version")
    assert [c for c in client.calls if c[0] != "GET"] == []
