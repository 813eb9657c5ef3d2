"""Fuzzing the command line: every numeric option accepts exactly the finite, in-range
values and rejects everything else with a one-line message and exit code 2; no
combination of arguments produces a traceback."""

from __future__ import annotations

import contextlib
import io
import math
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from operators.cli.main import build_parser, main

SETTINGS = settings(max_examples=80, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])
ROOT = Path(__file__).resolve().parents[2]
CLUSTER = str(ROOT / "examples" / "cluster.yaml")
YEAR = 365 * 24 * 3600

# (command prefix, option, "float" or "int", lowest, highest, lowest excluded)
NUMERIC: list[tuple[list[str], str, str, float, float, bool]] = [
    (["run"], "--qps", "float", 0, 1e6, True),
    (["run"], "--burst", "int", 1, 1_000_000, False),
    (["run"], "--eviction-workers", "int", 1, 10_000, False),
    (["run"], "--grace-period", "float", 0, YEAR, False),
    (["run"], "--metrics-port", "int", 0, 65535, False),
    (["evictions"], "--grace-period", "float", 0, YEAR, False),
    (["apiserver"], "--port", "int", 0, 65535, False),
]

numbers_as_text = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda f: f"{f:e}"),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.integers(min_value=-5, max_value=70000).map(str),
    st.sampled_from(["", " ", "1e400", "-1e400", "nan", "NaN", "inf", "-inf", "0x10", "1_000", "٣",
                     "1e15", "1e-400", "+5", "-0", "5.", ".5", "1,5", "12abc", "🙂"]),
    st.text(max_size=6),
)


def _oracle(kind: str, text: str, low: float, high: float, low_open: bool) -> float | None:
    """The value draco must accept, or None when it must refuse."""
    try:
        value: float = int(text, 10) if kind == "int" else float(text)
    except ValueError:
        return None
    if kind == "float" and not math.isfinite(value):
        return None
    if (value <= low if low_open else value < low) or value > high:
        return None
    return value


def _parse(argv: list[str]) -> tuple[int, object, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            return 0, build_parser().parse_args(argv), err.getvalue()
        except SystemExit as exc:
            return int(exc.code or 0), None, err.getvalue()


@pytest.mark.parametrize(("command", "option", "kind", "low", "high", "low_open"), NUMERIC,
                         ids=[f"{c[0][0]} {c[1]}" for c in NUMERIC])
@SETTINGS
@given(text=numbers_as_text)
def test_numeric_options_are_validated(command: list[str], option: str, kind: str, low: float,
                                       high: float, low_open: bool, text: str) -> None:
    code, args, err = _parse([*command, f"{option}={text}"])
    expected = _oracle(kind, text, low, high, low_open)
    if expected is None:
        assert code == 2
        assert f"argument {option}: " in err and "Traceback" not in err
        assert len([line for line in err.splitlines() if "error:" in line]) == 1
    else:
        assert code == 0, err
        assert getattr(args, option.lstrip("-").replace("-", "_")) == expected


TOKENS = ["devices", "evictions", "taint", "--from", CLUSTER, "-", "-o", "json", "yaml", "wide", "table",
          "--now", "2026-11-22T10:00:00Z", "9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+14:00",
          "--grace-period", "5", "1e400", "--dry-run", "--yes", "--all-devices", "--name", "x",
          "pool=node-a", "", "k:NoExecute", "k:NoExecute-", "=:", ":", "--bogus", "-h"]


@SETTINGS
@given(st.lists(st.sampled_from(TOKENS) | st.text(max_size=5), min_size=1, max_size=7))
def test_no_argument_list_makes_a_traceback(argv: list[str]) -> None:
    if "-" in argv:  # stdin is not a file here
        argv = [a for a in argv if a != "-"]
    out, err = io.StringIO(), io.StringIO()
    old = os.environ.get("KUBECONFIG")
    os.environ["KUBECONFIG"] = str(ROOT / "no-such-kubeconfig")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:
                code = int(exc.code) if isinstance(exc.code, int) else 2
    finally:
        if old is None:
            os.environ.pop("KUBECONFIG", None)
        else:
            os.environ["KUBECONFIG"] = old
    assert code in (0, 1, 2), (argv, err.getvalue())
    assert "Traceback" not in err.getvalue() and "bug in draco" not in err.getvalue(), (argv, err.getvalue())
