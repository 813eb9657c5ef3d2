"""`draco run --admission-check` (or DRACO_ADMISSION_CHECK=true) wires the devices check;
without it no check controller runs and nothing of Kueue is watched."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from operators.admission_controller.controller import AdmissionController
from operators.cli.main import build_parser
from operators.cli.run import FEEDS, build


def test_the_flag_wires_the_check_controller_with_its_settings() -> None:
    args = build_parser().parse_args(["run", "--admission-check", "--admission-pod-timeout", "90",
                                      "--admission-requeue-after", "5"])
    assert args.admission_check is True and args.admission_pod_timeout == 90.0
    _, _, started = build(["narrowing"], args)
    controller = started["admission"]
    assert isinstance(controller, AdmissionController)
    assert controller.settings.pod_timeout == 90.0 and controller.settings.requeue_after == 5
    assert controller.settings.controller_name == "resource.draco.dev/devices"
    assert {"ResourceSlice", "ResourceClaim", "Pod", "Gang"} <= set(FEEDS["admission"])


def test_off_by_default(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("DRACO_ADMISSION_CHECK", raising=False)
    assert build_parser().parse_args(["run"]).admission_check is False
    _, _, started = build(["narrowing"], SimpleNamespace())
    assert "admission" not in started
    monkeypatch.setenv("DRACO_ADMISSION_CHECK", "true")
    assert build_parser().parse_args(["run"]).admission_check is True


def test_the_requeue_time_is_a_whole_number_of_seconds_from_one(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("DRACO_ADMISSION_REQUEUE_AFTER", raising=False)
    assert build_parser().parse_args(["run"]).admission_requeue_after == 30  # Kueue's int32 seconds
    monkeypatch.setenv("DRACO_ADMISSION_REQUEUE_AFTER", "120")  # the chart's way
    assert build_parser().parse_args(["run"]).admission_requeue_after == 120
    for bad in ("0", "1.5", "-3"):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["run", "--admission-requeue-after", bad])
