"""Printing command results: a table for people, JSON or YAML as a contract.

With `-o json` stdout carries only the JSON document; anything else goes to stderr so
that `draco … -o json | jq` always works.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

import yaml

FORMATS = ("table", "json", "yaml")


def emit(doc: Any, fmt: str, table: Callable[[Any], str]) -> None:
    if fmt == "json":
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    elif fmt == "yaml":
        sys.stdout.write(yaml.safe_dump(doc, sort_keys=False))
    else:
        sys.stdout.write(table(doc))


def warn(message: str) -> None:
    sys.stderr.write(f"warning: {message}\n")


def render_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A kubectl-style table: upper-case headers, columns padded by three spaces."""
    cells = [[str(h).upper() for h in headers]] + [
        ["<none>" if v is None or v == "" else str(v) for v in row] for row in rows
    ]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines) + "\n"
