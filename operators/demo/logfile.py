"""The controllers' logs go to a file during the demo: the terminal is for the narration."""

from __future__ import annotations

import logging
import threading
from collections.abc import MutableMapping
from pathlib import Path
from typing import IO, Any

import structlog


def _plain(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for key, value in list(event.items()):
        if not isinstance(value, str | int | float | bool | type(None) | dict | list):
            event[key] = str(value)
    return event


def to_file(path: Path) -> IO[str]:
    """structlog and every stdlib logger (kopf, aiohttp, asyncio) write JSON lines to `path`;
    uncaught exceptions in threads and Python warnings land there too. Returns the file."""
    sink = path.open("a", encoding="utf-8", buffering=1)
    shared: list[Any] = [structlog.processors.add_log_level, structlog.processors.TimeStamper(fmt="iso")]
    renderer = structlog.processors.JSONRenderer()
    structlog.configure(processors=[*shared, _plain, renderer], logger_factory=structlog.PrintLoggerFactory(sink))
    handler = logging.StreamHandler(sink)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name, structlog.stdlib.ExtraAdder()],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, _plain, renderer]))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    logging.getLogger("kopf").setLevel(logging.WARNING)
    logging.getLogger("urllib3").setLevel(logging.ERROR)
    logging.captureWarnings(True)
    log = logging.getLogger("draco.demo")

    def thread_failed(args: threading.ExceptHookArgs) -> None:
        log.error("thread %s failed", getattr(args.thread, "name", "?"),
                  exc_info=(args.exc_type, args.exc_value, args.exc_traceback))  # type: ignore[arg-type]

    threading.excepthook = thread_failed
    return sink
