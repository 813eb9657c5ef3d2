"""`draco run --health-port`: what /healthz and /readyz answer in each state of the
process (leader, standby, syncing, a controller loop down), over real HTTP."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest

from operators.cli.lifecycle import Process
from operators.kube.feed import SyncGate
from operators.kube.health import serve
from operators.kube.supervision import Supervisor

Get = Callable[[str], Awaitable[tuple[int, str]]]


@pytest.fixture
async def world() -> AsyncIterator[tuple[Process, Get]]:
    process = Process(["eviction", "patches"], SyncGate(), Supervisor(restart_delay=0.01))
    runner = await serve(process.checks(), "127.0.0.1", 0)
    port = runner.addresses[0][1]
    session = aiohttp.ClientSession()

    async def get(path: str) -> tuple[int, str]:
        async with session.get(f"http://127.0.0.1:{port}{path}") as resp:
            return resp.status, await resp.text()

    try:
        yield process, get
    finally:
        await session.close()
        await runner.cleanup()
        for state in list(process.supervisor.loops.values()):
            await process.supervisor.stop(state)


async def forever() -> None:
    await asyncio.Event().wait()


def act(process: Process) -> None:
    """kopf started, the initial sync done, every controller loop running."""
    process.kopf_ready.set()
    process.gate.primed.set()
    process.gate.done.set()
    for name in process.controllers:
        process.supervisor.start(f"draco-{name}", forever, controller=name)


async def test_acting_replica_is_ready_only_when_synced_and_every_loop_runs(world: Any) -> None:
    process, get = world
    code, body = await get("/readyz")
    assert code == 503
    assert "[-]operator failed: kopf startup handlers not done" in body
    assert "[-]informer-sync failed" in body
    assert "[-]controllers failed: not started: eviction, patches" in body
    assert body.rstrip().endswith("readyz check failed")
    act(process)
    await asyncio.sleep(0)
    assert await get("/readyz") == (200, "ok")
    code, body = await get("/readyz?verbose")
    assert code == 200 and "[+]controllers ok" in body and "[+]leader-election ok (no leader election)" in body


async def test_a_crashed_loop_makes_the_replica_unready_until_restarted(world: Any) -> None:
    process, get = world
    act(process)
    crashes = {"left": 1}

    async def flaky() -> None:
        if crashes["left"]:
            crashes["left"] -= 1
            raise RuntimeError("boom")
        await asyncio.Event().wait()

    # a backoff this test owns: long enough that a loaded machine's slow GET still lands
    # inside it (the fixture's 10 ms did not, once), then the restart is polled for
    process.supervisor.restart_delay = 2.0
    process.supervisor.start("draco-flaky", flaky, controller="patches")
    await asyncio.sleep(0.001)
    code, body = await get("/readyz")
    assert code == 503 and "not running: draco-flaky (restarts 1; RuntimeError: boom)" in body
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    while (await get("/readyz"))[0] != 200:  # restarted after its backoff
        assert loop.time() < deadline, "the crashed loop was never restarted"
        await asyncio.sleep(0.05)


async def test_a_standby_is_ready_and_says_so_and_the_leader_reports_syncing(world: Any) -> None:
    process, get = world
    elector = SimpleNamespace(leading=False, leader=lambda: "draco-a_1234")
    process.elector = elector
    code, body = await get("/readyz?verbose")
    assert code == 200, body
    assert "[+]leader-election ok (standby; leader draco-a_1234)" in body
    assert "[+]informer-sync ok (standby)" in body
    elector.leading = True  # just took over: not ready until synced and running
    code, body = await get("/readyz?verbose")
    assert code == 503 and "[+]leader-election ok (leader)" in body and "[-]informer-sync" in body
    act(process)
    await asyncio.sleep(0)
    assert await get("/readyz") == (200, "ok")


async def test_healthz_fails_once_kopf_has_stopped(world: Any) -> None:
    process, get = world
    assert await get("/healthz") == (200, "ok")
    process.operator = asyncio.get_running_loop().create_task(asyncio.sleep(0))
    await process.operator
    code, body = await get("/healthz")
    assert code == 503 and "[-]operator failed: kopf stopped" in body


async def test_a_port_in_use_is_reported() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        process = Process([], SyncGate(), Supervisor())
        with pytest.raises(OSError):
            await serve(process.checks(), "127.0.0.1", port)
