"""The `draco` command line (also installed as `kubectl-draco`).

Each command lives in its own module exposing `register(subparsers)`; this module only
assembles them, so a command that does not exist yet is simply not listed.

Exit codes: 0 the command ran; 1 input that cannot be read or a cluster that cannot be
reached; 2 bad usage. No Python traceback reaches a user: an unexpected error is one
line too (set DRACO_DEBUG=1 for the traceback).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Sequence

from operators.cli.inputs import InputError, UsageError, one_line
from operators.cli.version import version

# Modules under operators.cli, in the order `draco --help` lists them.
COMMANDS: tuple[str, ...] = ("devices", "allocate", "evictions", "taint", "health", "run", "apiserver", "demo")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="draco",
        description=(
            "DRA control-plane operators for GA DRA clusters: device-taint eviction "
            "(DeviceTaintRule), ResourceSlicePatch, a claim allocator for gated pods and "
            "gated-pod narrowing, with views of devices, evictions and allocations that also "
            "read YAML offline."
        ),
    )
    parser.add_argument("--version", action="version", version=f"draco {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"operators.cli.{name}")
        module.register(sub)
    return parser


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Unknown options are reported by the command's own parser, with its usage."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        commands = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        command = getattr(args, "command", None)
        owner = commands.choices.get(command, parser) if commands and command else parser
        owner.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def _prefetch_for_run(argv: Sequence[str]) -> None:
    """`draco run` started from the command line: ask for the big first lists now, while
    the rest of draco is imported (kube/prefetch.py); never for --help or `none`."""
    if not argv or argv[0] != "run" or any(a in ("-h", "--help") for a in argv):
        return
    from operators.cli.run import FEEDS
    from operators.kube import prefetch

    chosen = os.environ.get("DRACO_CONTROLLERS", ",".join(FEEDS))
    for i, arg in enumerate(argv):
        if arg == "--controllers" and i + 1 < len(argv):
            chosen = argv[i + 1]
        elif arg.startswith("--controllers="):
            chosen = arg.partition("=")[2]
    kinds = {kind for name in chosen.split(",") for kind in FEEDS.get(name.strip(), ())}
    prefetch.start([path for kind, path in prefetch.PATHS.items() if kind in kinds])


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:  # a process of its own (tests calling main() in-process pass argv)
        _prefetch_for_run(sys.argv[1:])
    parser = build_parser()
    args = _parse(parser, argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        return int(func(args) or 0)
    except UsageError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    except InputError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `draco … | head`
        return 0
    except Exception as exc:  # noqa: BLE001 - the last line of defence against tracebacks
        if os.environ.get("DRACO_DEBUG"):
            traceback.print_exc()
        sys.stderr.write(f"error: {type(exc).__name__}: {one_line(exc)} "
                         "(a bug in draco: please report it; DRACO_DEBUG=1 shows the traceback)\n")
        return 1
