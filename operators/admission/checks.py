"""The status bodies the devices check writes, built as Kueue's own check controllers
build them (Kueue v0.19.2, pkg/workload/patching.SetAdmissionCheckState and the
provisioning check's AdmissionCheck reconciler):

- a Workload's `status.admissionChecks[]` entry: `state`, `message`, `podSetUpdates`
  and `requeueAfterSeconds` are replaced; `lastTransitionTime` moves only when the
  state changes; `retryCount` is Kueue's (kept as it is);
- an AdmissionCheck's `Active` condition: True, reason `Active`, with the check's
  generation as `observedGeneration`, written only when its status would change.
Pure: dicts in, dicts out.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from operators.admission.workload import CONTROLLER_NAME


def with_check_state(checks: Sequence[Mapping[str, Any]], name: str, state: str, message: str, now: str,
                     *, pod_set_updates: Sequence[Mapping[str, Any]] = (),
                     requeue_after: int | None = None) -> list[dict[str, Any]]:
    """The Workload's admissionChecks with NAME's entry set (added when missing)."""
    out = [copy.deepcopy(dict(c)) for c in checks]
    entry = next((c for c in out if c.get("name") == name), None)
    if entry is None:
        entry = {"name": name, "lastTransitionTime": now}
        out.append(entry)
    elif entry.get("state") != state or not entry.get("lastTransitionTime"):
        entry["lastTransitionTime"] = now
    entry["state"] = state
    entry["message"] = message
    if pod_set_updates:
        entry["podSetUpdates"] = [copy.deepcopy(dict(u)) for u in pod_set_updates]
    else:
        entry.pop("podSetUpdates", None)
    if requeue_after is not None:
        entry["requeueAfterSeconds"] = requeue_after
    else:
        entry.pop("requeueAfterSeconds", None)
    return out


def check_unchanged(checks: Sequence[Mapping[str, Any]], name: str, state: str, message: str,
                    pod_set_updates: Sequence[Mapping[str, Any]] = (),
                    requeue_after: int | None = None) -> bool:
    """Whether NAME's entry says exactly this already (then nothing is written)."""
    entry = next((c for c in checks if c.get("name") == name), None)
    return entry is not None and entry.get("state") == state and entry.get("message", "") == message \
        and list(entry.get("podSetUpdates") or []) == [dict(u) for u in pod_set_updates] \
        and entry.get("requeueAfterSeconds") == requeue_after


def active_conditions(check: Mapping[str, Any], now: str) -> list[dict[str, Any]] | None:
    """The AdmissionCheck's conditions with `Active` True, or None when it is so already
    (for the check's generation)."""
    md = check.get("metadata") if isinstance(check.get("metadata"), Mapping) else {}
    status = check.get("status") if isinstance(check.get("status"), Mapping) else {}
    assert isinstance(md, Mapping) and isinstance(status, Mapping)
    generation = md.get("generation")
    conditions = [copy.deepcopy(dict(c)) for c in status.get("conditions") or [] if isinstance(c, Mapping)]
    current = next((c for c in conditions if c.get("type") == "Active"), None)
    if current is not None and current.get("status") == "True" and \
            current.get("observedGeneration") == generation:
        return None
    new = {"type": "Active", "status": "True", "reason": "Active",
           "message": f"draco answers the checks of controller {CONTROLLER_NAME}",
           "lastTransitionTime": now if current is None or current.get("status") != "True"
           else current.get("lastTransitionTime", now)}
    if generation is not None:
        new["observedGeneration"] = generation
    return [c for c in conditions if c.get("type") != "Active"] + [new]


__all__ = ["active_conditions", "check_unchanged", "with_check_state"]
