"""What the demo prints: short, aligned lines for a person watching a terminal.

Step headers start at the margin, everything else is indented under them, results
start with `ok` (or `FAILED`), and the time a step took is on its result line.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterable, Sequence
from typing import TextIO

INDENT = "      "
WIDTH = 100


class Narrator:
    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout

    def _write(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def line(self, text: str = "") -> None:
        self._write(text)

    def step(self, number: int, total: int, title: str) -> None:
        self._write(f"\n[{number}/{total}] {title}")

    def say(self, text: str) -> None:
        """A sentence of narration, wrapped under the step."""
        for line in textwrap.wrap(text, WIDTH - len(INDENT)) or [""]:
            self._write(INDENT + line)

    def table(self, rows: Iterable[Sequence[str]], indent: str = INDENT) -> None:
        """Rows aligned in columns (the last column is free text)."""
        rows = [tuple(r) for r in rows]
        if not rows:
            return
        widths = [max(len(r[i]) for r in rows if i < len(r)) for i in range(max(len(r) for r in rows))]
        for r in rows:
            cells = [c.ljust(widths[i]) if i < len(r) - 1 else c for i, c in enumerate(r)]
            self._write((indent + "  ".join(cells)).rstrip())

    def verbatim(self, text: str, command: str | None = None, indent: str = INDENT) -> None:
        """A command's own output, as the user would see it, indented."""
        if command:
            self._write(f"{indent}$ {command}")
        for line in text.rstrip("\n").splitlines():
            self._write(f"{indent}  {line}".rstrip())

    def ok(self, text: str, seconds: float | None = None) -> None:
        took = f"  ({seconds:.1f} s)" if seconds is not None else ""
        self._write(f"{INDENT}ok  {text}{took}")

    def failed(self, text: str) -> None:
        self._write(f"{INDENT}FAILED  {text}")
