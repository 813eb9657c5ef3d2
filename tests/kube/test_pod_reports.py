"""PodReporter's conditions: one write per pod at a time, the newest last, whatever the
order in which concurrent tasks report (an older report landing after a newer one would
leave the pod saying what draco no longer thinks)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from operators.kube.client import Response
from operators.kube.pod_reports import PodReporter
from operators.model import NamespacedName

A, B = NamespacedName("team", "a"), NamespacedName("team", "b")


class SlowClient:
    """Holds every status write until released, and records the writes in flight."""

    def __init__(self) -> None:
        self.written: list[tuple[str, str]] = []  # (pod, reason), in the order they landed
        self.in_flight: dict[str, int] = {}
        self.most_at_once: dict[str, int] = {}
        self.release = asyncio.Event()

    async def strategic_patch(self, path: str, body: Any) -> Response:
        pod = path.split("/")[-2]
        self.in_flight[pod] = self.in_flight.get(pod, 0) + 1
        self.most_at_once[pod] = max(self.most_at_once.get(pod, 0), self.in_flight[pod])
        await self.release.wait()
        self.in_flight[pod] -= 1
        self.written.append((pod, body["status"]["conditions"][0]["reason"]))
        return Response(200, {})


async def test_concurrent_reports_of_one_pod_land_one_at_a_time_the_newest_last() -> None:
    client = SlowClient()
    reporter = PodReporter(client, "allocator", "draco-allocator", "DracoAllocation",  # type: ignore[arg-type]
                           lambda: datetime(2026, 11, 28, tzinfo=UTC))
    tasks = [asyncio.create_task(reporter.condition(A, "u-a", "False", reason, "why"))
             for reason in ("GangNotFound", "Unschedulable", "GangUnschedulable")]
    tasks.append(asyncio.create_task(reporter.condition(B, "u-b", "False", "WaitingForGate", "why")))
    await asyncio.sleep(0)
    client.release.set()
    await asyncio.gather(*tasks)
    a_writes = [reason for pod, reason in client.written if pod == "a"]
    assert a_writes[-1] == "GangUnschedulable", "the newest report is the one the pod keeps"
    assert a_writes == ["GangNotFound", "GangUnschedulable"], "a superseded report is never written"
    assert client.most_at_once == {"a": 1, "b": 1}, "one write per pod at a time; pods do not wait on each other"
    assert ("b", "WaitingForGate") in client.written
    assert reporter._latest == {} and reporter._writing == set(), "nothing kept once written"
