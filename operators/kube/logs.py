"""One logging setup for every draco process: structlog for draco's own lines and the
same renderer for every stdlib record (kopf's, aiohttp's), so JSON mode is JSON on every
line. `draco run` writes to stderr; `draco demo` to a file, keeping the terminal for its
narration."""

from __future__ import annotations

import logging
from collections.abc import MutableMapping
from typing import Any, TextIO

import structlog


def configure(json_logs: bool, sink: TextIO) -> None:
    renderer: Any = (structlog.processors.JSONRenderer() if json_logs
                     else structlog.dev.ConsoleRenderer(colors=False))
    shared: list[Any] = [structlog.processors.add_log_level,
                         structlog.processors.TimeStamper(fmt="iso")]
    structlog.configure(processors=[*shared, renderer],
                        logger_factory=structlog.PrintLoggerFactory(sink))
    handler = logging.StreamHandler(sink)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name, structlog.stdlib.ExtraAdder()],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, plain_values, renderer]))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    # kopf reports every low-level event handler at INFO; draco logs what it does itself.
    logging.getLogger("kopf").setLevel(logging.WARNING)
    # The kubernetes client's connection pool warns on every retry; draco reports the
    # outcome itself, in one line.
    logging.getLogger("urllib3").setLevel(logging.ERROR)


def plain_values(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """kopf attaches objects (its `k8s_ref` dicts, settings) to records: keep what JSON
    can carry and make the rest strings, so no record breaks the renderer."""
    for key, value in list(event.items()):
        if not isinstance(value, str | int | float | bool | type(None) | dict | list):
            event[key] = str(value)
    return event
