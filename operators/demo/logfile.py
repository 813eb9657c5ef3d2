"""The controllers' logs go to a file during the demo: the terminal is for the narration."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import IO

from operators.kube.logs import configure


def to_file(path: Path) -> IO[str]:
    """structlog and every stdlib logger (kopf, aiohttp, asyncio) write JSON lines to `path`;
    uncaught exceptions in threads and Python warnings land there too. Returns the file."""
    sink = path.open("a", encoding="utf-8", buffering=1)
    configure(json_logs=True, sink=sink)
    logging.captureWarnings(True)
    log = logging.getLogger("draco.demo")

    def thread_failed(args: threading.ExceptHookArgs) -> None:
        log.error("thread %s failed", getattr(args.thread, "name", "?"),
                  exc_info=(args.exc_type, args.exc_value, args.exc_traceback))  # type: ignore[arg-type]

    threading.excepthook = thread_failed
    return sink
