"""`draco run --admission-check` (or DRACO_ADMISSION_CHECK=true) wires the devices check;
without it no check controller runs and nothing of Kueue is watched."""

from __future__ import annotations

from types import SimpleNamespace

from operators.admission_controller.controller import AdmissionController
from operators.cli.main import build_parser
from operators.cli.run import FEEDS, build


def test_the_flag_wires_the_check_controller_with_its_settings() -> None:
    args = build_parser().parse_args(["run", "--admission-check", "--admission-pod-timeout", "90"])
    assert args.admission_check is True and args.admission_pod_timeout == 90.0
    _, _, started = build(["narrowing"], SimpleNamespace(admission_check=True, admission_pod_timeout=90.0))
    controller = started["admission"]
    assert isinstance(controller, AdmissionController)
    assert controller.settings.pod_timeout == 90.0
    assert controller.settings.controller_name == "resource.draco.dev/devices"
    assert {"ResourceSlice", "ResourceClaim", "Pod", "Gang"} <= set(FEEDS["admission"])


def test_off_by_default(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("DRACO_ADMISSION_CHECK", raising=False)
    assert build_parser().parse_args(["run"]).admission_check is False
    _, _, started = build(["narrowing"], SimpleNamespace())
    assert "admission" not in started
    monkeypatch.setenv("DRACO_ADMISSION_CHECK", "true")
    assert build_parser().parse_args(["run"]).admission_check is True
