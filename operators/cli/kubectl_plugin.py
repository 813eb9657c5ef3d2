"""`kubectl draco …`: draco's view commands as a kubectl plugin.

kubectl finds the `kubectl-draco` executable on PATH and runs it with every argument
after `draco`, flags included: kubectl itself parses none of them for a plugin. So the
plugin takes kubectl's usual connection flags, anywhere on the line, as admins type
them — `--kubeconfig FILE`, `--context NAME`, `-n/--namespace NS` (also `--flag=value`)
— and hands the rest to draco's own command line:

- `--kubeconfig` and `--context` choose the cluster, as for kubectl (KUBECONFIG and the
  kubeconfig's current context otherwise);
- `--namespace` is the namespace of names given without one (`kubectl draco allocate
  --claim NAME`), as kubectl's own commands read a bare NAME.

Only the commands that read or change a cluster are offered: devices, allocate,
evictions, taint and health (`draco run`, `draco demo` and `draco apiserver` are not
kubectl's business).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

COMMANDS = ("devices", "allocate", "evictions", "taint", "health")
# (long flag, short flag or "", environment variable it becomes)
FLAGS = (("--kubeconfig", "", "KUBECONFIG"), ("--context", "", "DRACO_KUBE_CONTEXT"),
         ("--namespace", "-n", "DRACO_NAMESPACE"))
USAGE = ("usage: kubectl draco {" + "|".join(COMMANDS) + "} [--kubeconfig FILE] "
         "[--context NAME] [-n NAMESPACE] [ARGS…]\n")


class PluginUsage(ValueError):
    pass


def split(argv: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """kubectl's connection flags (as environment variables) and the remaining arguments."""
    env: dict[str, str] = {}
    rest: list[str] = []
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest += args[i:]
            break
        for long, short, var in FLAGS:
            if arg == long or (short and arg == short):
                if i + 1 >= len(args):
                    raise PluginUsage(f"{arg} needs a value")
                env[var] = args[i + 1]
                i += 2
                break
            if arg.startswith(long + "="):
                env[var] = arg.split("=", 1)[1]
                i += 1
                break
            if short and arg.startswith(short) and len(arg) > len(short):
                env[var] = arg[len(short):].lstrip("=")
                i += 1
                break
        else:
            rest.append(arg)
            i += 1
    for var, value in env.items():
        if not value:
            raise PluginUsage(f"an empty value for {var}")
    return env, rest


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        env, rest = split(args)
    except PluginUsage as exc:
        sys.stderr.write(f"error: {exc}\n{USAGE}")
        return 2
    if not rest or rest[0] in ("-h", "--help", "help"):
        sys.stdout.write(USAGE)
        return 0 if rest else 2
    if rest[0] not in COMMANDS:
        sys.stderr.write(f"error: unknown command {rest[0]!r}\n{USAGE}")
        return 2
    os.environ.update(env)
    from operators.cli.main import main as draco_main

    return draco_main(rest)


__all__ = ["COMMANDS", "main", "split"]
