"""Lease leader election: client-go's rules, checked on a fake clock against a fake API
server that enforces resourceVersion preconditions like the real one (409 on a stale
write). Every test runs in milliseconds: the clock only moves when a candidate sleeps.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from operators.kube.leader import (
    LEADER,
    ElectionConfig,
    LeaderElector,
    LeaseError,
    LeaseRecord,
    default_identity,
    default_namespace,
    micro_time,
)

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def monotonic(self) -> float:
        return self.t

    def wall(self) -> datetime:
        return EPOCH + timedelta(seconds=self.t)

    async def sleep(self, seconds: float) -> None:
        self.t += seconds
        await asyncio.sleep(0)


class FakeServer:
    """One Lease object with a resourceVersion; `down` makes every request fail."""

    def __init__(self) -> None:
        self.record: LeaseRecord | None = None
        self.rv = 0
        self.down = False
        self.writes: list[LeaseRecord] = []

    def put(self, record: LeaseRecord) -> None:
        self.record = record
        self.rv += 1


class FakeLease:
    """A candidate's view of the Lease, remembering the resourceVersion it last saw."""

    def __init__(self, server: FakeServer) -> None:
        self.server = server
        self.seen_rv: int | None = None

    def _check(self) -> None:
        if self.server.down:
            raise LeaseError("HTTP 503")

    async def get(self) -> LeaseRecord | None:
        self._check()
        self.seen_rv = self.server.rv if self.server.record is not None else None
        return self.server.record

    async def create(self, record: LeaseRecord) -> None:
        self._check()
        if self.server.record is not None:
            raise LeaseError("HTTP 409 AlreadyExists")
        self.server.put(record)
        self.server.writes.append(record)
        self.seen_rv = self.server.rv

    async def update(self, record: LeaseRecord) -> None:
        self._check()
        if self.seen_rv is None:
            raise LeaseError("not read yet")
        if self.seen_rv != self.server.rv:
            raise LeaseError("HTTP 409 Conflict")
        self.server.put(record)
        self.server.writes.append(record)
        self.seen_rv = self.server.rv


def config(identity: str, lease: float = 4, renew: float = 3, retry: float = 1) -> ElectionConfig:
    return ElectionConfig(namespace="ns", name="draco", identity=identity, lease_duration=lease,
                          renew_deadline=renew, retry_period=retry)


def candidate(server: FakeServer, clock: FakeClock, identity: str) -> LeaderElector:
    return LeaderElector(config(identity), FakeLease(server), clock)


def held_by(holder: str, duration: int = 4, transitions: int = 0, at: float = 0.0) -> LeaseRecord:
    stamp = micro_time(EPOCH + timedelta(seconds=at))
    return LeaseRecord(holder=holder, duration=duration, acquire_time=stamp, renew_time=stamp,
                       transitions=transitions)


# (case, existing lease or None, seconds the candidate watches it unchanged first,
#  acquired?, holder afterwards, transitions afterwards)
ACQUIRE_CASES = [
    ("no Lease yet: created, first term", None, 0, True, "me", 0),
    ("held and fresh: wait", held_by("other"), 0, False, "other", 0),
    ("held, unchanged for less than its duration: wait", held_by("other"), 3.9, False, "other", 0),
    ("held, unchanged for its duration: take over", held_by("other", transitions=2), 4.0, True, "me", 3),
    ("the record's duration counts, not mine", held_by("other", duration=10), 9.0, False, "other", 0),
    ("released (empty holder): take at once", held_by("", duration=1, transitions=5), 0, True, "me", 6),
]


@pytest.mark.parametrize(("case", "existing", "watch", "acquired", "holder", "transitions"),
                         ACQUIRE_CASES, ids=[c[0] for c in ACQUIRE_CASES])
async def test_acquire_rules(case: str, existing: LeaseRecord | None, watch: float, acquired: bool,
                             holder: str, transitions: int) -> None:
    server, clock = FakeServer(), FakeClock()
    if existing is not None:
        server.put(existing)
    me = candidate(server, clock, "me")
    if existing is not None:
        assert not await me.try_acquire_or_renew() or not existing.holder  # first sight
        clock.t += watch
    got = await me.try_acquire_or_renew()
    assert got is acquired
    assert server.record is not None
    assert (server.record.holder, server.record.transitions) == (holder, transitions)
    if acquired:
        assert server.record.duration == 4
        assert server.record.acquire_time == server.record.renew_time == micro_time(clock.wall())


async def test_a_renewal_seen_resets_the_standbys_wait() -> None:
    server, clock = FakeServer(), FakeClock()
    leader, standby = candidate(server, clock, "a"), candidate(server, clock, "b")
    assert await leader.try_acquire_or_renew()
    assert not await standby.try_acquire_or_renew()
    for _ in range(10):  # the leader renews every 3 s; the standby never sees 4 s unchanged
        clock.t += 3
        assert await leader.try_acquire_or_renew()
        assert not await standby.try_acquire_or_renew()
    clock.t += 4  # the leader stops renewing (killed)
    assert await standby.try_acquire_or_renew()
    assert server.record is not None and server.record.holder == "b"
    assert server.record.transitions == 1


async def test_renewal_keeps_acquire_time_and_transitions() -> None:
    server, clock = FakeServer(), FakeClock()
    server.put(held_by("", duration=1, transitions=7))
    me = candidate(server, clock, "me")
    assert await me.try_acquire_or_renew()
    first = server.record
    clock.t += 1.5
    assert await me.try_acquire_or_renew()
    assert server.record is not None and first is not None
    assert server.record.acquire_time == first.acquire_time
    assert server.record.transitions == first.transitions == 8
    assert server.record.renew_time == micro_time(clock.wall()) != first.renew_time


async def test_two_candidates_racing_for_an_expired_lease_one_wins() -> None:
    server, clock = FakeServer(), FakeClock()
    server.put(held_by("dead"))
    a, b = candidate(server, clock, "a"), candidate(server, clock, "b")
    assert not await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    clock.t += 5
    # Both read the expired Lease before either writes: the second write is stale.
    real_a, real_b = a.api, b.api
    assert isinstance(real_a, FakeLease) and isinstance(real_b, FakeLease)
    await real_a.get()
    await real_b.get()
    results = await asyncio.gather(a.try_acquire_or_renew(), b.try_acquire_or_renew())
    assert sorted(results) == [False, True]
    assert server.record is not None and server.record.holder in ("a", "b")
    assert server.record.transitions == 1


async def test_renew_loop_gives_up_within_the_renew_deadline_of_the_last_renewal() -> None:
    server, clock = FakeServer(), FakeClock()
    me = candidate(server, clock, "me")
    assert await me.acquire(asyncio.Event())
    assert me.leading and LEADER.labels(lease="ns/draco")._value.get() == 1
    renewing = asyncio.ensure_future(me.renew(asyncio.Event()))
    try:
        while clock.t < 5.5:  # renewals every retry period
            await asyncio.sleep(0)
        assert not renewing.done()
        assert server.record is not None
        server.down = True
        last_renewal = (datetime.fromisoformat(server.record.renew_time) - EPOCH).total_seconds()
        assert last_renewal >= 5
        assert await asyncio.wait_for(renewing, 5) is False
    finally:
        renewing.cancel()
    # Given up exactly at the renew deadline after the last renewal, before the 4 s a
    # standby waits from that same renewal.
    assert clock.t - last_renewal == pytest.approx(3)
    assert not me.leading and LEADER.labels(lease="ns/draco")._value.get() == 0


async def test_renew_loop_stops_at_once_when_another_holder_appears() -> None:
    server, clock = FakeServer(), FakeClock()
    me = candidate(server, clock, "me")
    assert await me.acquire(asyncio.Event())
    assert server.record is not None
    server.put(replace(server.record, holder="usurper"))  # e.g. written by hand
    started = clock.t
    assert await asyncio.wait_for(me.renew(asyncio.Event()), 5) is False
    assert clock.t - started <= 1  # at the next renewal, without waiting out the 3 s deadline
    assert me.leader() == "usurper"


async def test_release_lets_the_standby_take_over_at_its_next_retry() -> None:
    server, clock = FakeServer(), FakeClock()
    leader, standby = candidate(server, clock, "a"), candidate(server, clock, "b")
    assert await leader.acquire(asyncio.Event())
    assert not await standby.try_acquire_or_renew()
    assert await leader.release()
    assert server.record is not None
    assert (server.record.holder, server.record.duration, server.record.transitions) == ("", 1, 0)
    assert not leader.leading
    assert await standby.try_acquire_or_renew()  # no lease duration to wait out
    assert server.record.holder == "b" and server.record.transitions == 1


async def test_release_by_a_candidate_that_does_not_hold_the_lease_writes_nothing() -> None:
    server, clock = FakeServer(), FakeClock()
    server.put(held_by("other"))
    me = candidate(server, clock, "me")
    await me.try_acquire_or_renew()
    writes = len(server.writes)
    assert await me.release()
    assert len(server.writes) == writes and server.record is not None and server.record.holder == "other"


async def test_acquire_retries_with_jitter_until_the_lease_expires_and_stops_on_request() -> None:
    server, clock = FakeServer(), FakeClock()
    server.put(held_by("other"))
    me = candidate(server, clock, "me")
    assert await asyncio.wait_for(me.acquire(asyncio.Event()), 5)
    # Taken only after the record sat unchanged for its 4 s, at most one jittered retry later.
    assert 4 <= clock.t <= 4 + 1 * (1 + 1.2)
    stop = asyncio.Event()
    other = candidate(server, clock, "late")
    waiting = asyncio.ensure_future(other.acquire(stop))
    await asyncio.sleep(0)
    stop.set()
    assert await asyncio.wait_for(waiting, 5) is False


async def test_unreadable_lease_is_a_failed_attempt_not_a_crash() -> None:
    server, clock = FakeServer(), FakeClock()
    server.down = True
    me = candidate(server, clock, "me")
    assert await me.try_acquire_or_renew() is False
    server.down = False
    assert await me.try_acquire_or_renew() is True


# (lease duration, renew deadline, retry period, accepted) — client-go's NewLeaderElector rules
CONFIG_CASES = [
    (15, 10, 2, True),
    (4, 3, 1, True),
    (10, 10, 2, False),   # lease duration must exceed the renew deadline
    (15, 2.4, 2, False),  # renew deadline must exceed 1.2 x the retry period
    (15, 2.5, 2, True),
    (15, 10, 0, False),
    (0.5, 0.4, 0.1, False),  # the Lease records whole seconds: at least 1
]


@pytest.mark.parametrize(("lease", "renew", "retry", "accepted"), CONFIG_CASES)
def test_durations_are_validated_like_client_go(lease: float, renew: float, retry: float,
                                                accepted: bool) -> None:
    cfg = config("me", lease, renew, retry)
    assert (not cfg.problems()) is accepted
    if not accepted:
        with pytest.raises(ValueError):
            LeaderElector(cfg, FakeLease(FakeServer()), FakeClock())


def test_lease_spec_round_trip_and_micro_time() -> None:
    rec = held_by("pod-a_1234", duration=15, transitions=3, at=1.25)
    assert rec.spec()["renewTime"] == "2026-01-01T00:00:01.250000Z"
    assert LeaseRecord.from_spec(rec.spec()) == rec
    assert LeaseRecord.from_spec(None) == LeaseRecord()
    assert LeaseRecord.from_spec({"leaseDurationSeconds": "15", "holderIdentity": None}) == LeaseRecord()


def test_default_namespace_and_identity(tmp_path: Path) -> None:
    sa = tmp_path / "namespace"
    sa.write_text("draco-system\n")
    assert default_namespace({"POD_NAMESPACE": "from-env"}, str(sa)) == "from-env"
    assert default_namespace({}, str(sa)) == "draco-system"
    assert default_namespace({}, str(tmp_path / "missing")) == "default"
    first, second = default_identity({"POD_NAME": "draco-7d9f"}), default_identity({"POD_NAME": "draco-7d9f"})
    assert first.startswith("draco-7d9f_") and second.startswith("draco-7d9f_")
    assert first != second  # a restarted process is a new candidate
