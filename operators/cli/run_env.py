"""`draco run`'s flags from the environment: DRACO_<FLAG> sets the default of --<flag>.

The Helm chart passes its settings this way. Rules: the variable of `--metrics-port` is
DRACO_METRICS_PORT (upper case, '-' -> '_'); booleans read true/false/1/0/yes/no/on/off;
a flag on the command line wins over its variable; unknown DRACO_* variables are
ignored (other tools share the prefix, e.g. DRACO_DEBUG and the test suite's own).

A variable is checked with the flag's own type and choices when the parser is built,
but a bad value is reported only when `draco run` actually needs it (the flag was not
given on the command line): `check(args)` raises a one-line usage error naming the
variable. Reporting at parse time would print argparse's usage block, and naming only
the flag would send the user looking in the wrong place.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from dataclasses import dataclass

from operators.cli.inputs import UsageError

PREFIX = "DRACO_"
TRUE = frozenset({"true", "1", "yes", "on", "y", "t"})
FALSE = frozenset({"false", "0", "no", "off", "n", "f", ""})


@dataclass(frozen=True)
class BadValue:
    """Stands in for a flag's value when its variable could not be read."""

    variable: str
    value: str
    problem: str

    def message(self) -> str:
        return f"{self.variable}={self.value!r}: {self.problem}"


def variable(action: argparse.Action) -> str | None:
    """The variable of an option (from its first long spelling), None for others."""
    longs = [o for o in action.option_strings if o.startswith("--")]
    if not longs or action.dest in ("help", "version"):
        return None
    return PREFIX + longs[0][2:].upper().replace("-", "_")


def _convert(action: argparse.Action, raw: str) -> object:
    if isinstance(action, argparse._StoreTrueAction | argparse._StoreFalseAction):
        word = raw.strip().lower()
        if word in TRUE:
            on = True
        elif word in FALSE:
            on = False
        else:
            raise ValueError("not a boolean; use true/false, 1/0 or yes/no")
        return on if isinstance(action, argparse._StoreTrueAction) else not on
    if action.nargs == 0:  # counters, constants: no value to read
        raise ValueError("this flag takes no value and cannot come from the environment")
    value: object = raw
    if action.type is not None and callable(action.type):
        try:
            value = action.type(raw)
        except (argparse.ArgumentTypeError, TypeError, ValueError) as exc:
            raise ValueError(str(exc) or "invalid value") from None
    if action.choices is not None and value not in action.choices:
        raise ValueError(f"choose from {', '.join(map(str, action.choices))}")
    return value


def apply(parser: argparse.ArgumentParser, environ: Mapping[str, str] | None = None) -> None:
    """Make each DRACO_<FLAG> in `environ` (default: the process's) the default of its
    flag. Call it after every flag was added."""
    env = os.environ if environ is None else environ
    for action in parser._actions:
        name = variable(action)
        if name is None or name not in env:
            continue
        raw = env[name]
        try:
            action.default = _convert(action, raw)
        except ValueError as exc:
            action.default = BadValue(name, raw, str(exc))
        # store_true's "(default: False)"-style help would now be wrong; say where it came from.
        if action.help and action.help is not argparse.SUPPRESS:
            action.help = f"{action.help} [set by {name}]"


def check(args: argparse.Namespace) -> None:
    """Raise a usage error for the first variable that could not be read."""
    bad = sorted((v for v in vars(args).values() if isinstance(v, BadValue)), key=lambda b: b.variable)
    if bad:
        raise UsageError(bad[0].message())


__all__ = ["BadValue", "PREFIX", "apply", "check", "variable"]
