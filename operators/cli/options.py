"""Option types shared by the commands: every number is checked where argparse reads it.

A value out of range is bad usage (exit 2, argparse's own message naming the flag), so
no NaN, infinity or overflowing duration ever reaches a controller or a view.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from operators.allocator.releases import Release

# Durations beyond a year make no sense for draco's waits and would overflow timedelta
# (at about 8.6e13 s) long before they mean anything.
MAX_SECONDS = 365 * 24 * 3600.0


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, not {text!r}")
    return value


def _whole(text: str) -> int:
    try:
        return int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


def _show(bound: float) -> str:
    return f"{bound:.0f}" if float(bound).is_integer() else f"{bound:g}"


def float_range(low: float, high: float, *, low_open: bool = False) -> Callable[[str], float]:
    """A finite float in [low, high] (or (low, high] with low_open)."""
    def parse(text: str) -> float:
        value = _number(text)
        if (value <= low if low_open else value < low) or value > high:
            bound = f"greater than {_show(low)}" if low_open else f"at least {_show(low)}"
            raise argparse.ArgumentTypeError(f"must be {bound} and at most {_show(high)}, not {text}")
        return value
    parse.__name__ = "number"  # argparse says "invalid number value" on other errors
    return parse


def int_range(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = _whole(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low} and {high}, not {text}")
        return value
    parse.__name__ = "integer"
    return parse


def seconds(text: str) -> float:
    """A duration in seconds: finite, not negative, at most a year."""
    return float_range(0.0, MAX_SECONDS)(text)


seconds.__name__ = "seconds"
port = int_range(0, 65535)


def gate_list(text: str) -> str:
    """Comma-separated scheduling gate names, or `*` (see `operators.model.gates`), checked
    and given back as one canonical string (sorted, no blanks): a flag's value and its
    DRACO_ variable read the same."""
    from operators.model.gates import parse_gate_list

    try:
        return ",".join(sorted(parse_gate_list(text)))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


gate_list.__name__ = "gate list"


def kubernetes_version(text: str) -> Release:
    """A Kubernetes release draco answers as (`1.38`, `v1.38.0-beta.0`): its default
    gates and allocator behaviour (see `operators.allocator.releases`)."""
    from operators.allocator.releases import parse_release

    try:
        return parse_release(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


kubernetes_version.__name__ = "Kubernetes version"
