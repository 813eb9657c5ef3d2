"""Leader election through a coordination.k8s.io/v1 Lease, with client-go's semantics.

kopf's peering pauses replicas of equal priority instead of electing one, so two
`draco run` replicas would both act. This module lets exactly one of them act:

- A candidate reads the Lease and takes it when nobody holds it, or when the record
  it last saw has not changed for the record's `leaseDurationSeconds`, measured on
  the candidate's own monotonic clock from the moment it saw that record (as client-go
  does: clocks of different nodes are never compared). Taking it writes
  holderIdentity, leaseDurationSeconds, acquireTime, renewTime and leaseTransitions+1.
- Every write is an update with the resourceVersion last read (or a create when the
  Lease does not exist): of two candidates racing for an expired Lease, the API
  server lets one win and answers 409 to the other.
- The leader renews every retry period. A renewal round that has not succeeded within
  the renew deadline ends the leadership (the caller must stop acting at once; `draco
  run` exits), so the old leader has stopped before anyone else may take over:
  renew deadline < lease duration. Seeing another holder in the Lease ends it at once.
- Release (on a graceful stop, after the controllers stopped) writes an empty holder
  with a 1 s duration, so a standby takes over at its next retry instead of waiting
  out the lease.

Durations are validated like client-go's: lease duration > renew deadline > 1.2 x
retry period, all positive.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import secrets
import socket
import time
from collections.abc import Awaitable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Protocol

import structlog
from prometheus_client import Gauge

log = structlog.get_logger("draco.leader")

JITTER = 1.2  # client-go's JitterFactor: retries wait retry period x (1 + up to 1.2)
SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"

LEADER = Gauge("draco_leader", "1 while this process holds the leader Lease and acts, else 0; "
               "without --leader-elect, lease=\"\" is 1 on a process that runs controllers.", ["lease"])


class LeaseError(Exception):
    """The Lease could not be read or written (including 409 Conflict)."""


@dataclass(frozen=True)
class ElectionConfig:
    namespace: str
    name: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def problems(self) -> list[str]:
        """What is wrong with these settings (client-go's rules), empty when usable."""
        found = []
        if self.lease_duration < 1 or self.renew_deadline <= 0 or self.retry_period <= 0:
            found.append("the lease duration must be at least 1 s and the renew deadline and "
                         "retry period more than 0")
        if self.lease_duration <= self.renew_deadline:
            found.append(f"the lease duration ({self.lease_duration:g} s) must be longer than the "
                         f"renew deadline ({self.renew_deadline:g} s)")
        if self.renew_deadline <= JITTER * self.retry_period:
            found.append(f"the renew deadline ({self.renew_deadline:g} s) must be longer than "
                         f"{JITTER} x the retry period ({self.retry_period:g} s)")
        if not self.identity:
            found.append("the identity is empty")
        return found

    @property
    def describe(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class LeaseRecord:
    """The Lease spec fields leader election reads and writes."""

    holder: str = ""
    duration: int = 0
    acquire_time: str = ""
    renew_time: str = ""
    transitions: int = 0

    def spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"holderIdentity": self.holder, "leaseDurationSeconds": self.duration,
                                "leaseTransitions": self.transitions}
        if self.acquire_time:
            spec["acquireTime"] = self.acquire_time
        if self.renew_time:
            spec["renewTime"] = self.renew_time
        return spec

    @classmethod
    def from_spec(cls, spec: Any) -> LeaseRecord:
        spec = spec if isinstance(spec, dict) else {}

        def whole(value: Any) -> int:
            return value if isinstance(value, int) and not isinstance(value, bool) else 0

        return cls(holder=str(spec.get("holderIdentity") or ""),
                   duration=whole(spec.get("leaseDurationSeconds")),
                   acquire_time=str(spec.get("acquireTime") or ""),
                   renew_time=str(spec.get("renewTime") or ""),
                   transitions=whole(spec.get("leaseTransitions")))


class LeaseAPI(Protocol):
    """One Lease, like client-go's LeaseLock: it remembers the object last read or
    written, and `update` sends that object's resourceVersion."""

    async def get(self) -> LeaseRecord | None: ...  # None: the Lease does not exist

    async def create(self, record: LeaseRecord) -> None: ...

    async def update(self, record: LeaseRecord) -> None: ...


class Clock(Protocol):
    def monotonic(self) -> float: ...

    def wall(self) -> datetime: ...

    async def sleep(self, seconds: float) -> None: ...


class RealClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def wall(self) -> datetime:
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def micro_time(moment: datetime) -> str:
    """metav1.MicroTime's wire form: RFC 3339 in UTC with microseconds."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """One candidate. `acquire` waits for leadership, `renew` keeps it until it is lost
    or the caller stops, `release` gives it up."""

    def __init__(self, config: ElectionConfig, api: LeaseAPI, clock: Clock | None = None,
                 rng: random.Random | None = None) -> None:
        problems = config.problems()
        if problems:
            raise ValueError("; ".join(problems))
        self.config = config
        self.api = api
        self.clock: Clock = clock or RealClock()
        self.rng = rng or random.Random()
        self.observed: LeaseRecord | None = None
        self.observed_at = 0.0
        self.reported_leader = ""
        self.leading = False  # acquired and not yet lost or released
        LEADER.labels(lease=config.describe).set(0)

    # --- state -------------------------------------------------------------------------
    def is_leader(self) -> bool:
        """The record last seen names this candidate."""
        return self.observed is not None and self.observed.holder == self.config.identity

    def leader(self) -> str:
        return self.observed.holder if self.observed is not None else ""

    def _lease_valid(self, now: float) -> bool:
        return self.observed is not None and self.observed_at + self.observed.duration > now

    def _observe(self, record: LeaseRecord) -> None:
        self.observed = record
        self.observed_at = self.clock.monotonic()

    def _report_leader(self) -> None:
        holder = self.leader()
        if holder != self.reported_leader:
            self.reported_leader = holder
            if holder and holder != self.config.identity:
                log.info("another replica leads", lease=self.config.describe, leader=holder)

    # --- one step ----------------------------------------------------------------------
    async def try_acquire_or_renew(self) -> bool:
        """One attempt to take or keep the Lease; True when this candidate holds it now."""
        now = self.clock.monotonic()
        stamp = micro_time(self.clock.wall())
        desired = LeaseRecord(holder=self.config.identity, duration=int(self.config.lease_duration),
                              acquire_time=stamp, renew_time=stamp)
        # Fast path: the leader updates the object it wrote last, without reading first.
        if self.is_leader() and self._lease_valid(now):
            assert self.observed is not None
            mine = replace(desired, acquire_time=self.observed.acquire_time,
                           transitions=self.observed.transitions)
            try:
                await self.api.update(mine)
                self._observe(mine)
                return True
            except LeaseError as exc:
                log.warning("renewing the lease failed; reading it again", lease=self.config.describe,
                            error=str(exc))
        try:
            current = await self.api.get()
        except LeaseError as exc:
            log.warning("cannot read the lease", lease=self.config.describe, error=str(exc))
            return False
        if current is None:
            try:
                await self.api.create(desired)
            except LeaseError as exc:
                log.warning("cannot create the lease", lease=self.config.describe, error=str(exc))
                return False
            self._observe(desired)
            return True
        if current != self.observed:
            self._observe(current)
        if current.holder and current.holder != self.config.identity and self._lease_valid(now):
            return False
        if current.holder == self.config.identity:
            desired = replace(desired, acquire_time=current.acquire_time or stamp,
                              transitions=current.transitions)
        else:
            desired = replace(desired, transitions=current.transitions + 1)
        try:
            await self.api.update(desired)
        except LeaseError as exc:
            log.info("lost the race for the lease", lease=self.config.describe, error=str(exc))
            return False
        self._observe(desired)
        return True

    # --- loops -------------------------------------------------------------------------
    async def _bounded(self, attempt: Awaitable[bool], limit: float) -> bool:
        """One attempt that may take at most `limit` seconds (a hung request is a failure)."""
        try:
            async with asyncio.timeout(max(limit, 0.001)):  # not wait_for: see kube/shell.py
                return await attempt
        except TimeoutError:
            log.warning("lease request timed out", lease=self.config.describe)
            return False

    async def acquire(self, stop: asyncio.Event) -> bool:
        """Wait until this candidate holds the Lease (True) or `stop` is set (False)."""
        log.info("waiting to acquire the leader lease", lease=self.config.describe,
                 identity=self.config.identity)
        while not stop.is_set():
            ok = await self._bounded(self.try_acquire_or_renew(), self.config.renew_deadline)
            self._report_leader()
            if ok and stop.is_set():  # taken just as the process was asked to stop
                await self.release()
                return False
            if ok:
                self.leading = True
                LEADER.labels(lease=self.config.describe).set(1)
                log.info("became the leader", lease=self.config.describe, identity=self.config.identity,
                         transitions=self.observed.transitions if self.observed else 0)
                return True
            pause = self.config.retry_period * (1 + self.rng.random() * JITTER)
            await self._wait(stop, pause)
        return False

    async def renew(self, stop: asyncio.Event) -> bool:
        """Keep the Lease until `stop` is set (returns True) or it is lost (False): no
        successful renewal for the renew deadline, or another holder seen in the Lease.

        The deadline counts from the last successful renewal (client-go counts it from
        the start of each retry round, one retry period later): the leader then gives
        up strictly before a standby, which waits the lease duration from the same
        renewal or later, may take over.
        """
        renewed_at = self.clock.monotonic()
        while not stop.is_set():
            until_deadline = self.config.renew_deadline - (self.clock.monotonic() - renewed_at)
            await self._wait(stop, min(self.config.retry_period, until_deadline))
            if stop.is_set():
                return True
            left = self.config.renew_deadline - (self.clock.monotonic() - renewed_at)
            if left > 0:
                renewed = await self._bounded(self.try_acquire_or_renew(), left)
                if renewed:
                    renewed_at = self.clock.monotonic()
                    continue
                if self.observed is not None and self.observed.holder and not self.is_leader():
                    self._lost()
                    return False
                if self.config.renew_deadline - (self.clock.monotonic() - renewed_at) > 0:
                    continue
            if stop.is_set():
                return True
            self._lost()
            return False
        return True

    def _lost(self) -> None:
        self.leading = False
        LEADER.labels(lease=self.config.describe).set(0)
        log.error("lost the leader lease; stopping at once", lease=self.config.describe,
                  identity=self.config.identity, leader=self.leader() or None)

    async def release(self) -> bool:
        """Give the Lease up (only when this candidate holds it), so another replica
        takes over at its next retry."""
        if not self.is_leader():
            self.leading = False
            LEADER.labels(lease=self.config.describe).set(0)
            return True
        assert self.observed is not None
        stamp = micro_time(self.clock.wall())
        freed = LeaseRecord(holder="", duration=1, acquire_time=stamp, renew_time=stamp,
                            transitions=self.observed.transitions)
        self.leading = False
        LEADER.labels(lease=self.config.describe).set(0)
        try:
            await self._bounded_none(self.api.update(freed), self.config.renew_deadline)
        except (LeaseError, TimeoutError) as exc:
            log.warning("cannot release the leader lease; the next leader waits for it to expire",
                        lease=self.config.describe, error=str(exc) or type(exc).__name__)
            return False
        self._observe(freed)
        log.info("released the leader lease", lease=self.config.describe, identity=self.config.identity)
        return True

    @staticmethod
    async def _bounded_none(call: Awaitable[None], limit: float) -> None:
        async with asyncio.timeout(limit):  # not wait_for: see kube/shell.py
            await call

    async def _wait(self, stop: asyncio.Event, seconds: float) -> None:
        """Sleep on the elector's clock, waking early when `stop` is set."""
        if seconds <= 0 or stop.is_set():
            return
        sleeper = asyncio.ensure_future(self.clock.sleep(seconds))
        stopper = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({sleeper, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sleeper, stopper):
                task.cancel()
            for task in (sleeper, stopper):
                with contextlib.suppress(asyncio.CancelledError):
                    await task


class KubeLease:
    """`LeaseAPI` over draco's API client (a client of its own: renewals must not queue
    behind the controllers' rate limit)."""

    def __init__(self, client: Any, namespace: str, name: str) -> None:
        self.client = client
        self.namespace = namespace
        self.name = name
        self.obj: dict[str, Any] | None = None

    @property
    def _collection(self) -> str:
        return LEASES.format(namespace=self.namespace)

    def _fail(self, what: str, resp: Any) -> LeaseError:
        body = resp.body if isinstance(resp.body, dict) else {}
        return LeaseError(f"{what} lease {self.namespace}/{self.name}: HTTP {resp.status} "
                          f"{body.get('reason') or ''} {body.get('message') or ''}".strip())

    async def get(self) -> LeaseRecord | None:
        resp = await self.client.get(f"{self._collection}/{self.name}")
        if resp.status == 404:
            return None
        if not resp.ok or not isinstance(resp.body, dict):
            raise self._fail("reading", resp)
        self.obj = resp.body
        return LeaseRecord.from_spec(resp.body.get("spec"))

    async def create(self, record: LeaseRecord) -> None:
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace}, "spec": record.spec()}
        resp = await self.client.post(self._collection, body)
        if not resp.ok or not isinstance(resp.body, dict):
            raise self._fail("creating", resp)
        self.obj = resp.body

    async def update(self, record: LeaseRecord) -> None:
        if self.obj is None:
            raise LeaseError(f"lease {self.namespace}/{self.name} not read yet")
        body = {**self.obj, "spec": {**(self.obj.get("spec") or {}), **record.spec()}}
        resp = await self.client.request("PUT", f"{self._collection}/{self.name}", body)
        if not resp.ok or not isinstance(resp.body, dict):
            raise self._fail("updating", resp)
        self.obj = resp.body


def default_namespace(environ: dict[str, str] | None = None,
                      service_account_file: str = SERVICE_ACCOUNT_NAMESPACE) -> str:
    """$POD_NAMESPACE, else the service account's namespace, else "default"."""
    env = os.environ if environ is None else environ
    if env.get("POD_NAMESPACE"):
        return env["POD_NAMESPACE"]
    try:
        with open(service_account_file, encoding="utf-8") as fh:
            found = fh.read().strip()
            if found:
                return found
    except OSError:
        pass
    return "default"


def default_identity(environ: dict[str, str] | None = None) -> str:
    """$POD_NAME (else the hostname) plus a random suffix, so a restarted process is a
    new candidate and never mistakes the Lease of its previous life for its own."""
    env = os.environ if environ is None else environ
    base = env.get("POD_NAME") or socket.gethostname() or "draco"
    return f"{base}_{secrets.token_hex(4)}"


__all__ = ["ElectionConfig", "KubeLease", "LEADER", "LeaderElector", "LeaseAPI", "LeaseError",
           "LeaseRecord", "RealClock", "default_identity", "default_namespace", "micro_time"]
