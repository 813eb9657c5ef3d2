"""A DeviceTaintRule whose `timeAdded` lies in the future still gets its condition.

Found by the hostile-object run on real 1.37: a rule created with
`timeAdded: 9999-12-31T23:59:59Z` never got `EvictionInProgress`, because the grace
period after a rule's effect starts counted from that moment. The grace now starts when
draco first sees the rule at the latest, and the user's timeAdded is left as written.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from operators.cli.state import build_tracker
from operators.eviction.controller import EvictionController, EvictionSettings
from tests.eviction.test_controller_clock import RecordingClient

T0 = datetime(2026, 11, 28, tzinfo=UTC)


def rule(time_added: str) -> dict[str, Any]:
    return {"apiVersion": "resource.draco.dev/v1alpha1", "kind": "DeviceTaintRule",
            "metadata": {"name": "r", "uid": "ur", "generation": 1, "resourceVersion": "1",
                         "creationTimestamp": "2026-11-28T00:00:00Z"},
            "spec": {"deviceSelector": {"driver": "gpu.example.com", "device": "d0"},
                     "taint": {"key": "k", "effect": "NoSchedule", "timeAdded": time_added}}}


@pytest.mark.parametrize("time_added", ["9999-12-31T23:59:59Z", "2027-01-01T00:00:00Z", "2026-11-28T00:00:00Z"])
def test_the_condition_comes_after_the_grace_whatever_timeadded_says(time_added: str) -> None:
    now = [T0 + timedelta(seconds=1)]
    tracker = build_tracker([rule(time_added)])
    client = RecordingClient()

    async def scenario() -> None:
        controller = EvictionController(tracker, client, EvictionSettings(), clock=lambda: now[0])  # type: ignore[arg-type]
        await controller.step()
        now[0] = T0 + timedelta(seconds=30)
        await controller.step()
        await asyncio.gather(*controller.tasks)

    asyncio.run(scenario())
    written = [b for m, p, b in client.calls if m == "PATCH" and p.endswith("/r/status")]
    assert written, "no EvictionInProgress condition was written"
    cond = written[-1]["status"]["conditions"][0]
    assert (cond["type"], cond["status"], cond["reason"]) == ("EvictionInProgress", "False", "OtherEffect")
    stamped = [b for m, p, b in client.calls if m == "PATCH" and p.endswith("/devicetaintrules/r")]
    assert stamped == [], "the user's timeAdded is left as written"
