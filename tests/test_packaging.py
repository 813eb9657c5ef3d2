"""What ships: CRDs identical in crds/ and inside the package, and the CLI entry points."""

from __future__ import annotations

from pathlib import Path

import yaml

from operators.apiserver.runner import PACKAGED_CRDS
from operators.cli.main import COMMANDS, build_parser

ROOT = Path(__file__).resolve().parents[1]


def test_packaged_crds_are_the_files_in_crds() -> None:
    shipped = {p.name: p.read_bytes() for p in (ROOT / "crds").glob("*.yaml")}
    packaged = {p.name: p.read_bytes() for p in PACKAGED_CRDS.glob("*.yaml")}
    assert shipped == packaged and set(shipped) == {"devicetaintrules.yaml", "resourceslicepatches.yaml",
                                                    "devicehealthpolicies.yaml", "gangs.yaml"}
    for name, body in shipped.items():
        crd = yaml.safe_load(body)
        scope = "Namespaced" if name == "gangs.yaml" else "Cluster"  # a gang's pods share one
        assert crd["spec"]["group"] == "resource.draco.dev" and crd["spec"]["scope"] == scope


def test_help_lists_only_working_commands() -> None:
    text = build_parser().format_help()
    for name in COMMANDS:
        assert name in text
    assert set(COMMANDS) == {"devices", "allocate", "evictions", "taint", "health", "run", "apiserver", "demo"}
