"""CRD schema changes the hostile-object run led to, pinned without a cluster.

A ResourceSlicePatch's `version` attribute was any string up to 64 characters: the API
server took `not.a.version`, draco patched it onto devices, and every selector reading
it then failed on those devices. Upstream refuses such a version in a ResourceSlice
(semver.org 2.0.0, as blang/semver parses); the CRD now refuses it in a patch, and its
pattern agrees with draco's own strict parser on every row here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from operators.model.semver import Semver

ROOT = Path(__file__).resolve().parents[2]


def version_pattern() -> re.Pattern[str]:
    crd = yaml.safe_load((ROOT / "crds" / "resourceslicepatches.yaml").read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    attribute = spec["properties"]["devices"]["properties"]["attributes"]["additionalProperties"]
    return re.compile(attribute["properties"]["version"]["pattern"])


VERSIONS = [
    ("1.0.0", True), ("0.0.0", True), ("10.20.30", True), ("1.2.3-alpha", True), ("1.2.3-alpha.1", True),
    ("1.2.3-0.3.7", True), ("1.2.3-x.7.z.92", True), ("1.2.3+build.5", True), ("1.2.3-rc.1+b.2", True),
    ("1.2.3--", True), ("1.2.3-0a", True), ("1.2.3+001", True),
    ("not.a.version", False), ("v1.2.3", False), ("1.2", False), ("1", False), ("01.2.3", False),
    ("1.02.3", False), ("1.2.03", False), ("1.2.3-01", False), ("1.2.3-", False), ("1.2.3+", False),
    ("1.2.3-ü", False), ("1.2.3 ", False), (" 1.2.3", False), ("1.2.3-a..b", False), ("", False),
    ("1.2.3+a+b", False), ("1.2.3.4", False),
]


@pytest.mark.parametrize(("text", "valid"), VERSIONS)
def test_the_crds_version_pattern_is_strict_semver_as_draco_parses_it(text: str, valid: bool) -> None:
    assert bool(version_pattern().fullmatch(text)) is valid
    try:
        Semver.parse(text)
        parsed = True
    except ValueError:
        parsed = False
    assert parsed is valid, f"draco's parser and the table disagree on {text!r}"
