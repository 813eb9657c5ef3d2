"""The allocator controller's Preemptor on its own: the nominations it keeps, what they
keep away from other pods, and what it asks of its owner, with a recording owner and no
API server (every write it would start is recorded, never run)."""

from __future__ import annotations

from collections.abc import Coroutine
from datetime import UTC, datetime, timedelta
from typing import Any

from operators.allocator.reserved import Reserved
from operators.allocator_controller.controller import AllocatorSettings
from operators.allocator_controller.preempt_loop import Preemptor
from operators.model import DeviceID, NamespacedName, Pod
from operators.model.objects import parse_pod_object
from operators.preemption.nomination import NOMINATION_ANNOTATION, Nomination
from operators.tracker import Tracker

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
GPU0, GPU1, GPU2 = (DeviceID("gpu.example.com", "node-1", f"gpu-{i}") for i in range(3))
A, B = NamespacedName("team", "a"), NamespacedName("team", "b")


class Owner:
    """Records what the preemptor asks; closes the coroutines it is handed."""

    def __init__(self) -> None:
        self.asked: list[tuple[Any, ...]] = []

    def spawn(self, key: NamespacedName, coro: Coroutine[Any, Any, None]) -> None:
        self.asked.append(("spawn", key, coro.__qualname__))
        coro.close()

    def background(self, coro: Coroutine[Any, Any, None]) -> None:
        self.asked.append(("background", coro.__qualname__))
        coro.close()

    def retry(self, key: NamespacedName) -> None:
        self.asked.append(("retry", key))

    def decide_again(self, key: NamespacedName | None) -> None:
        self.asked.append(("decide_again", key))

    def decide_gang_again(self, gkey: Any) -> None:
        self.asked.append(("decide_gang_again", gkey))

    def retry_gang(self, gkey: Any) -> None:
        self.asked.append(("retry_gang", gkey))


def preemptor() -> tuple[Preemptor, Owner]:
    owner = Owner()
    settings = AllocatorSettings(preemption=True)
    return Preemptor(Tracker(), None, settings, None, owner, lambda: NOW), owner  # type: ignore[arg-type]


def nomination(*devices: DeviceID, minutes: int = 5) -> Nomination:
    return Nomination("node-1", devices, (NamespacedName("team", "victim"),),
                      NOW + timedelta(minutes=minutes))


def pod(key: NamespacedName, annotation: str | None) -> Pod:
    meta: dict[str, Any] = {"name": key.name, "namespace": key.namespace, "uid": f"uid-{key.name}"}
    if annotation is not None:
        meta["annotations"] = {NOMINATION_ANNOTATION: annotation}
    return parse_pod_object({"metadata": meta, "spec": {"containers": []}, "status": {}})


def test_without_nominations_in_use_is_passed_through_untouched() -> None:
    p, _ = preemptor()
    in_use = {GPU0}
    assert p.nominated_from((A,), in_use) is in_use


def test_a_nomination_keeps_its_devices_from_every_other_pod_not_from_its_own() -> None:
    p, _ = preemptor()
    p.note_nomination(pod(B, nomination(GPU1, GPU2).to_annotation()))
    for_a = p.nominated_from((A,), {GPU0})
    assert isinstance(for_a, Reserved)
    assert sorted(for_a) == [GPU0, GPU1, GPU2]
    assert sorted(p.nominated_from((B,), {GPU0})) == [GPU0]  # its own devices are its to take
    expired = nomination(GPU1, minutes=-1)
    p.note_nomination(pod(B, expired.to_annotation()))
    assert sorted(p.nominated_from((A,), {GPU0})) == [GPU0]  # past its deadline: promises nothing


def test_an_unreadable_nomination_is_ignored_and_remembered_as_such() -> None:
    p, owner = preemptor()
    p.note_nomination(pod(A, nomination(GPU1).to_annotation()))
    p.note_nomination(pod(A, "{not json"))
    assert A not in p.nominations and A in p.unreadable
    assert owner.asked == []  # reading writes nothing


def test_the_preemptors_allocation_ends_its_nomination_and_removes_it_and_its_fences() -> None:
    p, owner = preemptor()
    p.note_nomination(pod(A, nomination(GPU1).to_annotation()))
    p.nomination_done(A, "uid-a")
    assert A not in p.nominations
    assert owner.asked == [("background", "Preemptor.clear"), ("background", "Preemptor.unfence")]
    owner.asked.clear()
    p.nomination_done(A, "uid-a")  # no nomination: nothing to remove
    assert owner.asked == []


async def test_a_pod_or_gang_being_preempted_for_is_busy_until_its_task_ends() -> None:
    p, owner = preemptor()
    gang = ("Gang", "team", "g")
    ran: list[str] = []

    async def write(what: str) -> None:
        assert p.busy(A if what == "pod" else gang)
        ran.append(what)

    pod_task, gang_task = p.task(A, write("pod")), p.task(gang, write("gang"))
    assert p.busy(A) and p.busy(gang)
    await pod_task
    await gang_task
    assert ran == ["pod", "gang"] and not p.busy(A) and not p.busy(gang)
    # a pod is decided again at once; for a gang the loop is only woken
    assert owner.asked == [("decide_again", A), ("decide_again", None)]
