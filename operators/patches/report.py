"""What the reporter writes for a ResourceSlicePatch: status, its condition, and Events.

Pure decisions over `PatchReport`s (see `operators.tracker.slice_patches`); the kopf
shell in `handlers.py` only performs them.

Status: `matchedDevices`, `observedGeneration` and one metav1.Condition, `Faulty`:
True with the most severe problem's reason (InvalidPatch > InvalidSelector >
DeviceClassNotFound > SelectorFailed) and every problem in the message; False with
reason `NoFaults` otherwise. `lastTransitionTime` moves only when the status flips.

Events are Warnings, one per problem (per failing expression and error, not per
device) when it first appears; a problem that goes away and comes back is announced
again, but never more than `MAX_EVENTS_PER_GENERATION` per patch generation, so a bad
patch over 10,000 devices yields a handful of Events, not 10,000.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from operators.kube.conditions import rfc3339, transition_time
from operators.tracker.slice_patches import PatchReport, problem_messages

CONDITION = "Faulty"
REASON_INVALID_PATCH = "InvalidPatch"
REASON_INVALID_SELECTOR = "InvalidSelector"
REASON_CLASS_NOT_FOUND = "DeviceClassNotFound"
REASON_SELECTOR_FAILED = "SelectorFailed"
REASON_NO_FAULTS = "NoFaults"
MAX_EVENTS_PER_GENERATION = 5
MAX_MESSAGE = 32_768  # metav1.Condition's limit
MAX_EVENT_MESSAGE = 1_024  # what kubectl describe shows comfortably


def _truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True, slots=True)
class EventSpec:
    """One Event to post on the patch. `key` identifies the problem within a generation."""

    reason: str
    message: str
    key: tuple[str, ...]
    type: str = "Warning"


def problems(report: PatchReport) -> list[EventSpec]:
    """Every current problem of the patch, most severe first."""
    out: list[EventSpec] = []
    if report.invalid is not None:
        out.append(EventSpec(REASON_INVALID_PATCH, problem_messages(
            PatchReport(report.name, report.generation, invalid=report.invalid))[0],
            (REASON_INVALID_PATCH, report.invalid)))
        return out
    for expression, error in report.compile_errors:
        only = PatchReport(report.name, report.generation, compile_errors=((expression, error),))
        out.append(EventSpec(REASON_INVALID_SELECTOR, problem_messages(only)[0],
                             (REASON_INVALID_SELECTOR, expression)))
    if report.missing_class is not None:
        only = PatchReport(report.name, report.generation, missing_class=report.missing_class)
        out.append(EventSpec(REASON_CLASS_NOT_FOUND, problem_messages(only)[0],
                             (REASON_CLASS_NOT_FOUND, report.missing_class)))
    for failure in report.failures:
        only = PatchReport(report.name, report.generation, failures=(failure,))
        out.append(EventSpec(REASON_SELECTOR_FAILED, problem_messages(only)[0],
                             (REASON_SELECTOR_FAILED, failure.expression, failure.error)))
    return out


def faulty_condition(
    report: PatchReport, previous: Mapping[str, Any] | None, now: datetime
) -> dict[str, Any]:
    found = problems(report)
    if found:
        status, reason = "True", found[0].reason
        message = _truncate("; ".join(problem_messages(report)), MAX_MESSAGE)
    else:
        status, reason = "False", REASON_NO_FAULTS
        message = f"the filter matches {report.matched_devices} devices without errors"
    since = transition_time(previous, status, rfc3339(now))
    return {
        "type": CONDITION,
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": report.generation,
        "lastTransitionTime": since,
    }


def desired_status(
    report: PatchReport, current: Mapping[str, Any] | None, now: datetime
) -> dict[str, Any]:
    """The full status to write; other condition types found in `current` are kept."""
    conditions = [c for c in (current or {}).get("conditions") or () if isinstance(c, Mapping)]
    previous = next((c for c in conditions if c.get("type") == CONDITION), None)
    mine = faulty_condition(report, previous, now)
    others = [dict(c) for c in conditions if c.get("type") != CONDITION]
    return {
        "matchedDevices": report.matched_devices,
        "observedGeneration": report.generation,
        "conditions": [*others, mine],
    }


def status_differs(current: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> bool:
    """Whether writing `desired` would change anything (ignoring an unchanged timestamp)."""
    current = current or {}
    for key in ("matchedDevices", "observedGeneration"):
        if current.get(key) != desired.get(key):
            return True
    have = {c.get("type"): c for c in current.get("conditions") or () if isinstance(c, Mapping)}
    for cond in desired["conditions"]:
        old = have.get(cond["type"])
        if old is None or any(old.get(k) != cond.get(k) for k in cond):
            return True
    return False


@dataclass
class EventLedger:
    """Remembers which problems were announced, per patch, to keep Events few."""

    announced: dict[str, set[tuple[str, ...]]] = field(default_factory=dict)
    sent: dict[str, tuple[int, int]] = field(default_factory=dict)  # name -> (generation, n)

    def due(self, report: PatchReport) -> list[EventSpec]:
        """Events to post now; records them as posted."""
        current = problems(report)
        keys = {p.key for p in current}
        seen = self.announced.setdefault(report.name, set())
        seen &= keys  # a problem that went away may be announced again
        generation, count = self.sent.get(report.name, (report.generation, 0))
        if generation != report.generation:
            generation, count = report.generation, 0
            seen.clear()
        out = []
        for p in current:
            if p.key in seen or count >= MAX_EVENTS_PER_GENERATION:
                continue
            seen.add(p.key)
            count += 1
            out.append(EventSpec(p.reason, _truncate(p.message, MAX_EVENT_MESSAGE), p.key, p.type))
        self.sent[report.name] = (generation, count)
        return out

    def seed(self, report: PatchReport, current: Mapping[str, Any] | None) -> None:
        """After a restart: problems the stored condition already describes for this
        generation count as announced, so restarts do not repeat Events."""
        if report.name in self.sent:
            return
        conditions = (current or {}).get("conditions") or ()
        cond = next((c for c in conditions
                     if isinstance(c, Mapping) and c.get("type") == CONDITION), None)
        if (cond is None or cond.get("status") != "True"
                or cond.get("observedGeneration") != report.generation):
            return
        message = str(cond.get("message", ""))
        keys = {p.key for p in problems(report) if p.message in message}
        self.announced[report.name] = keys
        self.sent[report.name] = (report.generation, len(keys))

    def forget(self, name: str) -> None:
        self.announced.pop(name, None)
        self.sent.pop(name, None)
