"""What a DeviceHealthPolicy does, decided over plain data: which devices must carry the
policy's DeviceTaintRule now, which wait out `for`, which recover after `clearAfter`,
and which the `maxUnavailable` cap holds back.

Per device, a small state machine with two timestamps (`Memory`): when its signal was
first seen without a break (`active_since`), and when every signal was first seen gone
while it held a rule (`clear_since`). A rule is written once the signal held for `for`,
and deleted once every signal stayed away for `clearAfter` (never, when it is omitted).
A signal that comes back before `clearAfter` ends keeps the rule as it is, and one that
drops before `for` ends resets the wait: a flapping signal costs one write per real
transition, not one per event. The cap counts the devices the policy holds tainted;
rules already written are never taken back for it, and new ones beyond it wait,
oldest signal first, until room frees up.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from operators.health.policy import HealthPolicy
from operators.model import DeviceID

NAME_MAX = 253
_LABEL_VALUE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True, slots=True)
class Memory:
    """What the controller keeps about one device between passes."""

    active_since: datetime | None = None
    signal: str = ""
    clear_since: datetime | None = None


@dataclass
class Decision:
    """One pass of one policy. `taint` maps each device that must carry a rule to its
    taint value; `untaint` lists rules to delete; the rest is for the status."""

    taint: dict[DeviceID, str] = field(default_factory=dict)
    untaint: list[DeviceID] = field(default_factory=list)
    pending: dict[DeviceID, datetime] = field(default_factory=dict)  # device -> when `for` ends
    recovering: dict[DeviceID, datetime] = field(default_factory=dict)  # -> when `clearAfter` ends
    held_back: list[DeviceID] = field(default_factory=list)
    memory: dict[DeviceID, Memory] = field(default_factory=dict)
    selected: int = 0
    limit: int | None = None

    @property
    def throttled(self) -> bool:
        return bool(self.held_back)

    def next_wake(self) -> datetime | None:
        """The earliest time this decision can change with no new event."""
        times = [*self.pending.values(), *self.recovering.values()]
        return min(times) if times else None


def taint_value(text: str) -> str:
    """A signal's text as a label value (the taint's value): at most 63 characters of
    [A-Za-z0-9._-], starting and ending with an alphanumeric one."""
    value = _LABEL_VALUE.sub("-", text).strip("-._")[:63].rstrip("-._")
    return value or "unhealthy"


def rule_name(policy: str, device: DeviceID) -> str:
    """One rule per device, the same name every time: the policy, the device, and a
    short hash of the whole device ID (pools and drivers may share device names)."""
    digest = hashlib.sha256("/".join(device).encode()).hexdigest()[:10]
    base = re.sub(r"[^a-z0-9.-]+", "-", f"{policy}-{device.device}".lower()).strip("-.")
    # cut where it may, the base must still end in a letter or digit: "a.-…" is no name
    return f"{base[:NAME_MAX - 11].rstrip('-.')}-{digest}"


def decide(policy: HealthPolicy, selected: Iterable[DeviceID],
           active: Mapping[DeviceID, tuple[str, datetime | None]],
           siblings: Mapping[DeviceID, frozenset[DeviceID]],
           ruled: Mapping[DeviceID, str], memory: Mapping[DeviceID, Memory], now: datetime) -> Decision:
    """ACTIVE maps a device with a signal to (the signal's text, when it started if known);
    SIBLINGS maps a device to those sharing its counter sets (partitions of one GPU);
    RULED maps each device the policy holds a rule for to the rule's taint value."""
    chosen = set(selected)
    out = Decision(selected=len(chosen), limit=policy.limit(len(chosen)))
    effective: dict[DeviceID, tuple[str, datetime | None]] = {
        d: signal for d, signal in active.items() if d in chosen}
    if policy.partitions:
        for d in sorted(effective):
            text, since = effective[d]
            if text.startswith("partition of "):
                continue
            for s in sorted(siblings.get(d, frozenset())):
                if policy.selects(s) and s not in active:
                    effective.setdefault(s, (f"partition of {d.device}: {text}", since))
    candidates: list[tuple[datetime, DeviceID, str]] = []
    for d in sorted(set(effective) | set(ruled)):
        mem = memory.get(d, Memory())
        if d in effective:
            text, started = effective[d]
            since = mem.active_since or min(started or now, now)
            out.memory[d] = Memory(since, text, None)
            if d in ruled:
                out.taint[d] = ruled[d]  # unchanged: no write
            elif since + policy.hold_for <= now:
                candidates.append((since, d, policy.taint_value or taint_value(text)))
            else:
                out.pending[d] = since + policy.hold_for
            continue
        # a rule whose signals are gone
        if not policy.selects(d):
            out.untaint.append(d)  # the policy no longer watches it
            continue
        if policy.clear_after is None:
            out.taint[d] = ruled[d]
            out.memory[d] = Memory(None, mem.signal, None)
            continue
        clear_since = mem.clear_since or now
        if clear_since + policy.clear_after <= now:
            out.untaint.append(d)
        else:
            out.taint[d] = ruled[d]
            out.recovering[d] = clear_since + policy.clear_after
            out.memory[d] = Memory(None, mem.signal, clear_since)
    room = None if out.limit is None else max(0, out.limit - len(out.taint))
    for _since, d, value in sorted(candidates):  # oldest signal first
        if room is None or room > 0:
            out.taint[d] = value
            room = None if room is None else room - 1
        else:
            out.held_back.append(d)
    return out
