"""docs/reference/cli.md is generated from draco's argparse definitions (hack/cli-reference)
and current, so the reference lists exactly the commands and options draco accepts."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from operators.cli import kubectl_plugin
from operators.cli.main import COMMANDS, build_parser
from tests.chart.test_chart_files import load_script

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "reference" / "cli.md"
cli_reference = load_script("cli-reference")


def test_cli_reference_is_current() -> None:
    assert PAGE.read_text() == cli_reference.reference(), \
        "docs/reference/cli.md is stale: run hack/cli-reference --write docs/reference/cli.md"


def test_draco_variables_do_not_change_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """`draco run` reads DRACO_<FLAG> as defaults; the page is the same whatever is set,
    and the variables are still set afterwards (the generator runs in-process here)."""
    monkeypatch.setenv("DRACO_QPS", "5")
    monkeypatch.setenv("DRACO_LEADER_ELECT", "true")
    assert cli_reference.reference() == PAGE.read_text()
    assert os.environ["DRACO_QPS"] == "5"


def test_every_command_and_option_is_documented() -> None:
    page = PAGE.read_text()
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name in COMMANDS:
        assert f"\n## draco {name}\n" in page
        for action in sub.choices[name]._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert flag in page, f"draco {name} {flag}"
    assert "\n## kubectl draco\n" in page
    for long, _, variable in kubectl_plugin.FLAGS:
        assert f"| `{long}` |" in page and variable in page
