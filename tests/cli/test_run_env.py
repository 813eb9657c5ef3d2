"""`draco run` reads every flag from DRACO_<FLAG> too (how the Helm chart configures it):
the command line wins, unknown DRACO_* variables are ignored, and a bad value is one
usage line naming the variable (exit 2), reported before any cluster is contacted."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from operators.cli import run_env
from operators.cli.main import build_parser, main


def run_parser() -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["run"]  # type: ignore[no-any-return]


def parse(argv: list[str]) -> argparse.Namespace:
    args = build_parser().parse_args(["run", *argv])
    run_env.check(args)
    return args


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("DRACO_"):
            monkeypatch.delenv(name)


# (environment, command line, attribute, expected value)
READ_CASES: list[tuple[dict[str, str], list[str], str, Any]] = [
    ({"DRACO_METRICS_PORT": "8080"}, [], "metrics_port", 8080),
    ({"DRACO_HEALTH_PORT": "8081"}, [], "health_port", 8081),
    ({"DRACO_HEALTH_ADDRESS": "127.0.0.1"}, [], "health_address", "127.0.0.1"),
    ({"DRACO_LEADER_ELECT": "true"}, [], "leader_elect", True),
    ({"DRACO_LEADER_ELECT": "YES"}, [], "leader_elect", True),
    ({"DRACO_LEADER_ELECT": "1"}, [], "leader_elect", True),
    ({"DRACO_LEADER_ELECT": "false"}, [], "leader_elect", False),
    ({"DRACO_LEADER_ELECT": "no"}, [], "leader_elect", False),
    ({"DRACO_LEADER_ELECT": "0"}, ["--leader-elect"], "leader_elect", True),  # the flag wins
    ({"DRACO_LEADER_ELECT_NAMESPACE": "draco-system"}, [], "leader_elect_namespace", "draco-system"),
    ({"DRACO_LEADER_ELECT_LEASE_DURATION": "30"}, [], "leader_elect_lease_duration", 30),
    ({"DRACO_LEADER_ELECT_RETRY_PERIOD": "0.5"}, [], "leader_elect_retry_period", 0.5),
    ({"DRACO_CONTROLLERS": "eviction,patches"}, [], "controllers", "eviction,patches"),
    ({"DRACO_QPS": "50"}, [], "qps", 50.0),
    ({"DRACO_QPS": "50"}, ["--qps", "7"], "qps", 7.0),  # the flag wins
    ({"DRACO_QPS": "not-a-number"}, ["--qps", "7"], "qps", 7.0),  # an overridden variable is not read
    ({"DRACO_BURST": "10"}, [], "burst", 10),
    ({"DRACO_EVICTION_WORKERS": "4"}, [], "eviction_workers", 4),
    ({"DRACO_LOG_FORMAT": "json"}, [], "log_format", "json"),
    ({"DRACO_USE_EVICTION_API": "yes"}, [], "use_eviction_api", True),
    ({"DRACO_GATE_WEBHOOK_PORT": "9443"}, [], "gate_webhook_port", 9443),
    ({"DRACO_SOMETHING_ELSE": "x", "DRACO_DEBUG": "1"}, [], "qps", 200.0),  # unknown: ignored
    ({}, [], "health_port", 0),  # nothing set: no port, no Lease
    ({}, [], "leader_elect", False),
]


@pytest.mark.parametrize(("env", "argv", "attr", "expected"), READ_CASES)
def test_variables_set_defaults(env: dict[str, str], argv: list[str], attr: str, expected: Any,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert getattr(parse(argv), attr) == expected


def test_every_flag_has_a_variable_that_round_trips(monkeypatch: pytest.MonkeyPatch) -> None:
    """Flags added later are covered too: each one's default, given as its variable,
    reads back as the same value."""
    parser = run_parser()
    seen = set()
    for action in parser._actions:
        name = run_env.variable(action)
        if name is None:
            continue
        assert name not in seen
        seen.add(name)
        if isinstance(action, argparse._StoreTrueAction):
            monkeypatch.setenv(name, "true")
            expected: Any = True
        elif action.default is None:
            monkeypatch.setenv(name, "x.pem" if "file" in action.dest else "value")
            expected = "x.pem" if "file" in action.dest else "value"
        else:
            monkeypatch.setenv(name, str(action.default))
            expected = action.default
        got = getattr(parse([]), action.dest)
        assert got == expected, name
        monkeypatch.delenv(name)
    assert {"DRACO_HEALTH_PORT", "DRACO_LEADER_ELECT", "DRACO_METRICS_PORT", "DRACO_CONTROLLERS",
            "DRACO_LEADER_ELECT_RENEW_DEADLINE", "DRACO_LOG_FORMAT"} <= seen


# (environment, words the one-line error must contain)
BAD_CASES: list[tuple[dict[str, str], str]] = [
    ({"DRACO_QPS": "fast"}, "DRACO_QPS='fast': not a number"),
    ({"DRACO_METRICS_PORT": "70000"}, "DRACO_METRICS_PORT='70000': must be between 0 and 65535"),
    ({"DRACO_LEADER_ELECT": "maybe"}, "DRACO_LEADER_ELECT='maybe': not a boolean"),
    ({"DRACO_LOG_FORMAT": "xml"}, "DRACO_LOG_FORMAT='xml': choose from auto, json, console"),
    ({"DRACO_LEADER_ELECT_LEASE_DURATION": "1.5"}, "DRACO_LEADER_ELECT_LEASE_DURATION='1.5': not a whole number"),
    ({"DRACO_LEADER_ELECT": "true", "DRACO_LEADER_ELECT_RENEW_DEADLINE": "20"},
     "must be longer than the renew deadline (20 s)"),
    ({"DRACO_LEADER_ELECT": "true", "DRACO_LEADER_ELECT_RETRY_PERIOD": "9"},
     "must be longer than 1.2 x the retry period (9 s)"),
]


@pytest.mark.parametrize(("env", "words"), BAD_CASES)
def test_a_bad_value_is_one_usage_line_naming_the_variable(
        env: dict[str, str], words: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("KUBECONFIG", "/nonexistent/kubeconfig")  # never reached
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    code = main(["run"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith("error: ") and words in err, err
