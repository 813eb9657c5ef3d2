"""The `draco` command line (also installed as `kubectl-draco`).

Each command lives in its own module exposing `register(subparsers)`; this module only
assembles them, so a command that does not exist yet is simply not listed.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from operators.cli.inputs import InputError

# Modules under operators.cli, in the order `draco --help` lists them.
COMMANDS: tuple[str, ...] = ("devices", "evictions", "taint", "run", "apiserver")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="draco",
        description=(
            "DRA control-plane operators: device-taint eviction, ResourceSlicePatch, "
            "claim allocation and gated-pod narrowing for GA DRA clusters."
        ),
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"operators.cli.{name}")
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        return int(func(args) or 0)
    except InputError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    except KeyboardInterrupt:
        return 130
