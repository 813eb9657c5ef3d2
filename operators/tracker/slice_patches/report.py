"""What a patch does and what is wrong with it, and the sentences users read about it.

Pure: the overlay builds `PatchReport`s from its index; `draco devices` (errors list)
and the patch reporter (conditions, Events) both word problems with `problem_messages`,
so a user reads the same sentence wherever a problem shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from operators.model import DeviceID

MAX_EXAMPLES = 3
MAX_FAILURE_MESSAGES = 3  # distinct (expression, error) pairs spelled out


@dataclass(frozen=True, slots=True)
class SelectorFailure:
    """One expression failing with one message, aggregated over devices."""

    expression: str
    error: str
    count: int
    examples: tuple[DeviceID, ...]


@dataclass(frozen=True, slots=True)
class PatchReport:
    """What a patch currently does and what is wrong with it, for Events and status.

    `invalid`: the object could not be parsed (nothing else is known then).
    `compile_errors`: (expression, message) of selectors that do not compile.
    `missing_class`: the filter names a DeviceClass that does not exist.
    """

    name: str
    generation: int
    matched_devices: int = 0
    invalid: str | None = None
    compile_errors: tuple[tuple[str, str], ...] = ()
    missing_class: str | None = None
    failures: tuple[SelectorFailure, ...] = ()
    failed_devices: int = 0

    @property
    def faulty(self) -> bool:
        return bool(self.invalid or self.compile_errors or self.missing_class or self.failures)


def aggregate(failures: Mapping[DeviceID, tuple[str, str]]) -> tuple[SelectorFailure, ...]:
    """One entry per (expression, error), most devices first: a bad selector over 10,000
    devices is one problem to report, with a few devices to look at."""
    groups: dict[tuple[str, str], list[DeviceID]] = {}
    for did, key in failures.items():
        groups.setdefault(key, []).append(did)
    out = [
        SelectorFailure(expr, err, len(ids), tuple(sorted(ids)[:MAX_EXAMPLES]))
        for (expr, err), ids in groups.items()
    ]
    out.sort(key=lambda s: (-s.count, s.expression, s.error))
    return tuple(out)


def problem_messages(report: PatchReport) -> list[str]:
    """One human-readable sentence per problem; the wording users see in views and Events."""
    out: list[str] = []
    if report.invalid is not None:
        out.append(f"invalid ResourceSlicePatch, it patches nothing: {report.invalid}")
    for expression, error in report.compile_errors:
        out.append(f"selector `{expression}` does not compile, the patch matches nothing: {error}")
    if report.missing_class is not None:
        out.append(
            f"DeviceClass {report.missing_class!r} does not exist, the patch matches nothing"
        )
    for fl in report.failures[:MAX_FAILURE_MESSAGES]:
        examples = ", ".join(str(d) for d in fl.examples)
        more = f" and {fl.count - len(fl.examples)} more" if fl.count > len(fl.examples) else ""
        noun = "device" if fl.count == 1 else "devices"
        out.append(
            f"selector `{fl.expression}` failed on {fl.count} {noun} ({examples}{more}), "
            f"which the patch therefore does not patch: {fl.error}"
        )
    rest = report.failures[MAX_FAILURE_MESSAGES:]
    if rest:
        out.append(
            f"{len(rest)} more selector errors on {sum(r.count for r in rest)} devices"
        )
    return out



__all__ = [
    "MAX_EXAMPLES",
    "MAX_FAILURE_MESSAGES",
    "PatchReport",
    "SelectorFailure",
    "aggregate",
    "problem_messages",
]
