"""The nomination of a preemption, kept in the API: the preemptor's nominated devices
and its victims, as an annotation on the preemptor pod. Pure: parse, render, decide.

Why on the pod: a nomination lives exactly as long as its preemptor waits. Deleting the
pod deletes the nomination with it (never left behind), `kubectl get pod -o yaml` shows
it, and every draco (a restarted one, a newly elected leader) reads it from the pods it
already watches, then finishes the same preemption: the same victims, no new ones.

    resource.draco.dev/nomination: {"node": "node-1" | null,
        "devices": ["driver/pool/device", ...], "victims": ["ns/name", ...],
        "deadline": "2026-11-28T10:00:00Z"}

A nomination stands until the preemptor's claims are allocated, the pod is gone, or the
deadline passes; while it stands, the nominated devices go to no other pod.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from operators.model import DeviceID, NamespacedName, Pod

NOMINATION_ANNOTATION = "resource.draco.dev/nomination"


class NominationError(ValueError):
    """The annotation cannot be read (it is then ignored, and said so)."""


@dataclass(frozen=True, slots=True)
class Nomination:
    node: str | None
    devices: tuple[DeviceID, ...]
    victims: tuple[NamespacedName, ...]
    deadline: datetime

    def to_annotation(self) -> str:
        return json.dumps({
            "node": self.node,
            "devices": [str(d) for d in self.devices],
            "victims": [f"{v.namespace}/{v.name}" for v in self.victims],
            "deadline": self.deadline.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }, separators=(",", ":"))

    def expired(self, now: datetime) -> bool:
        return now >= self.deadline


def parse_device(text: object) -> DeviceID:
    if not isinstance(text, str) or text.count("/") < 2:
        raise NominationError(f"devices: expected driver/pool/device, not {text!r}")
    driver, pool, device = text.rsplit("/", 2)
    if not driver or not pool or not device:
        raise NominationError(f"devices: expected driver/pool/device, not {text!r}")
    return DeviceID(driver, pool, device)


def parse_victim(text: object) -> NamespacedName:
    if not isinstance(text, str) or text.count("/") != 1 or text.startswith("/") or text.endswith("/"):
        raise NominationError(f"victims: expected namespace/name, not {text!r}")
    ns, name = text.split("/")
    return NamespacedName(ns, name)


def parse_nomination(text: str) -> Nomination:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise NominationError(f"not JSON: {exc}") from None
    if not isinstance(data, Mapping):
        raise NominationError("expected a JSON object")
    node = data.get("node")
    if node is not None and not isinstance(node, str):
        raise NominationError("node: expected a string or null")
    devices, victims = data.get("devices"), data.get("victims")
    if not isinstance(devices, list) or not isinstance(victims, list):
        raise NominationError("devices and victims: expected lists")
    deadline = data.get("deadline")
    if not isinstance(deadline, str):
        raise NominationError("deadline: expected an RFC 3339 time")
    try:
        when = datetime.fromisoformat(deadline.replace("Z", "+00:00"))
    except ValueError:
        raise NominationError(f"deadline: not an RFC 3339 time: {deadline!r}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return Nomination(node, tuple(parse_device(d) for d in devices), tuple(parse_victim(v) for v in victims),
                      when)


def nomination_of(pod: Pod) -> Nomination | None:
    """The pod's nomination; None when it has none or it cannot be read."""
    text = pod.meta.annotations.get(NOMINATION_ANNOTATION)
    if text is None:
        return None
    try:
        return parse_nomination(text)
    except NominationError:
        return None


def nominated_devices(nominations: Iterable[tuple[NamespacedName, Nomination]],
                      now: datetime) -> dict[DeviceID, NamespacedName]:
    """Each device a standing nomination promises, and to which pod."""
    out: dict[DeviceID, NamespacedName] = {}
    for pod, nomination in nominations:
        if not nomination.expired(now):
            for device in nomination.devices:
                out.setdefault(device, pod)
    return out


__all__ = ["NOMINATION_ANNOTATION", "Nomination", "NominationError", "nominated_devices",
           "nomination_of", "parse_device", "parse_nomination", "parse_victim"]
