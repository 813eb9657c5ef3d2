"""The `operator` fixtures' shared body: start `draco run`'s controllers in threads
against one kubeconfig, and stop every one of them afterwards."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from operators.cli.operator_thread import OperatorThread

Start = Callable[[tuple[str, ...], Any], OperatorThread]


def operator_threads(kubeconfig: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Start]:
    """Yields `start(controllers, settings)`; afterwards stops them all, and then raises
    the first OperatorThreadHung, so one hang neither hides nor leaks the others."""
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    started: list[OperatorThread] = []

    def start(controllers: tuple[str, ...], settings: Any) -> OperatorThread:
        op = OperatorThread(list(controllers), settings).start()
        started.append(op)
        return op

    yield start
    errors: list[Exception] = []
    for op in started:
        try:
            op.stop()
        except Exception as error:
            errors.append(error)
    if errors:
        raise errors[0]
