"""`draco run --controllers none`: a process that serves only the gate webhook (the chart's
stateless webhook Deployment), so every replica admits pods and none waits for a Lease."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from operators.cli.main import main
from operators.cli.run import build


def invoke(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


@pytest.mark.parametrize(("argv", "message"), [
    (["run", "--controllers", "none"], "--controllers none runs nothing without --gate-webhook-port"),
    (["run", "--controllers", ""], "(none given)"),
    (["run", "--controllers", "none,patches"], "unknown controller(s) none"),
])
def test_a_run_that_would_do_nothing_is_a_usage_error(
        argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = invoke(argv, capsys)
    assert code == 2
    assert message in err


def test_help_names_the_webhook_only_mode(capsys: pytest.CaptureFixture[str]) -> None:
    code = 0
    try:
        main(["run", "--help"])
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr().out
    assert code == 0
    assert "'none'" in out and "--gate-webhook-port" in out


def test_webhook_only_registers_the_webhook_and_no_watches() -> None:
    settings = SimpleNamespace(gate_webhook_port=18443, gate_webhook_address="127.0.0.1",
                               gate_namespace_selector=None, gate_pod_selector=None,
                               gate_webhook_certfile=None, gate_webhook_keyfile=None, qps=200.0, burst=400)
    registry, _, started = build([], settings)
    assert started == {}
    assert len(registry._webhooks.get_all_handlers()) == 1
    for kind in (registry._watching, registry._changing, registry._spawning, registry._indexing):
        assert kind.get_all_handlers() == []


def test_readiness_waits_for_the_webhook_port_to_listen() -> None:
    """A Service must not send admission calls to a replica whose webhook is not bound yet."""
    import socket

    from operators.cli.lifecycle import Process
    from operators.kube.feed import SyncGate
    from operators.kube.supervision import default_supervisor

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        port = int(server.getsockname()[1])
        process = Process([], SyncGate(), default_supervisor(), ("0.0.0.0", port))
        ready, why = process.webhook_listening()
        assert not ready and why == f"gate webhook not listening on 0.0.0.0:{port} yet"
        server.listen()
        assert process.webhook_listening() == (True, "")
    assert Process([], SyncGate(), default_supervisor()).webhook_listening() == (True, "not served")
