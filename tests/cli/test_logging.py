"""`draco run`'s logs: kopf's own records come out through structlog, so JSON mode is
JSON on every line (a log collector must never meet a plain-text line)."""

from __future__ import annotations

import json
import subprocess
import sys

SCRIPT = """
import logging
import structlog
from operators.cli.run import configure_logging
configure_logging({fmt!r})
logging.getLogger("kopf.objects").warning("Handler 'x' failed; will retry.",
    extra={{"k8s_ref": {{"kind": "Pod", "name": "p"}}, "k8s_skip": False, "obj": object()}})
logging.getLogger("kopf").info("kopf chatter at INFO stays quiet")
logging.getLogger("asyncio").error("Task exception was never retrieved")
structlog.get_logger("draco").info("draco starting", version="1")
"""


def _run(fmt: str) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", SCRIPT.format(fmt=fmt)], capture_output=True,
                          text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    return proc.stderr.splitlines()


def test_json_mode_renders_kopf_and_asyncio_records_as_json() -> None:
    lines = [json.loads(line) for line in _run("json")]
    events = [line["event"] for line in lines]
    assert events == ["Handler 'x' failed; will retry.", "Task exception was never retrieved", "draco starting"]
    kopf_line = lines[0]
    assert kopf_line["level"] == "warning" and kopf_line["logger"] == "kopf.objects"
    assert kopf_line["k8s_ref"] == {"kind": "Pod", "name": "p"} and "timestamp" in kopf_line
    assert kopf_line["obj"].startswith("<object object at")  # unserialisable extras become strings


def test_console_mode_is_key_value() -> None:
    lines = _run("console")
    assert len(lines) == 3
    assert "Handler 'x' failed; will retry." in lines[0] and "k8s_ref=" in lines[0]
    assert "draco starting" in lines[2] and "version=1" in lines[2]
