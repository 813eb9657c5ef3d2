"""The life of a `draco run` process: health server, leader election, kopf, shutdown.

Order of events:

1. The health server starts (when `--health-port` is set), before anything else, so a
   standby answers its probes while it waits.
2. With `--leader-elect`, the process waits for the Lease. A standby runs nothing else:
   no watches, no controllers, no webhook. Taking over therefore costs one initial
   listing (seconds), and a standby can never act by mistake.
3. kopf runs standalone (no peering) with the registry `build()` made.
4. SIGTERM/SIGINT: kopf stops (its cleanup handlers stop every controller loop), then
   the Lease is released, then the process exits 0. The Lease is renewed until the
   controllers have stopped, so no other replica acts while this one still does.
5. A lost Lease (a renewal round failed for the renew deadline, or another holder
   appeared) ends the process at once with exit code 1, as client-go's users do: the
   controllers must not act one moment longer, and the kubelet restarts the container
   as a fresh candidate.

Probes: /healthz is 200 while the event loop answers and kopf has not died. /readyz on
the acting replica is 200 once kopf's startup handlers ran, the tracker's initial sync
completed and every selected controller's loop is running; a standby answers 200
("standby") because it is ready to take over, and a Deployment's rolling update and a
PodDisruptionBudget count on standby pods being Ready (controller-runtime does the same:
its readiness checks do not depend on leadership).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

import structlog

from operators.cli.inputs import InputError
from operators.kube.leader import ElectionConfig, KubeLease, LeaderElector

log = structlog.get_logger("draco")


def exit_now() -> None:
    """What `draco run` does when it loses the Lease: stop acting this instant."""
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    os._exit(1)


def election_config(args: argparse.Namespace) -> ElectionConfig:
    from operators.kube.leader import default_identity, default_namespace

    return ElectionConfig(
        namespace=args.leader_elect_namespace or default_namespace(),
        name=args.leader_elect_name,
        identity=getattr(args, "leader_elect_identity", None) or default_identity(),
        lease_duration=float(args.leader_elect_lease_duration),
        renew_deadline=float(args.leader_elect_renew_deadline),
        retry_period=float(args.leader_elect_retry_period))


class Process:
    """State the probes read."""

    def __init__(self, controllers: Sequence[str], gate: Any, supervisor: Any,
                 webhook: tuple[str, int] | None = None) -> None:
        self.controllers = list(controllers)
        self.gate = gate
        self.supervisor = supervisor
        self.webhook = webhook  # (address, port) of the gate webhook, when served
        self.elector: LeaderElector | None = None
        self.kopf_ready = asyncio.Event()
        self.operator: asyncio.Task[Any] | None = None

    def acting(self) -> bool:
        return self.elector is None or self.elector.leading

    # --- liveness ----------------------------------------------------------------------
    def operator_alive(self) -> tuple[bool, str]:
        if self.operator is not None and self.operator.done():
            return False, "kopf stopped"
        return True, ""

    # --- readiness ---------------------------------------------------------------------
    def leadership(self) -> tuple[bool, str]:
        if self.elector is None:
            return True, "no leader election"
        if self.elector.leading:
            return True, "leader"
        leader = self.elector.leader()
        return True, f"standby; leader {leader}" if leader else "standby"

    def started(self) -> tuple[bool, str]:
        if not self.acting():
            return True, "standby"
        return (True, "") if self.kopf_ready.is_set() else (False, "kopf startup handlers not done")

    def synced(self) -> tuple[bool, str]:
        if not self.acting():
            return True, "standby"
        if self.gate.done.is_set():
            return True, ""
        return False, f"initial sync: {self.gate.missing()}"

    def loops(self) -> tuple[bool, str]:
        if not self.acting():
            return True, "standby"
        ok, why = self.supervisor.readiness(self.controllers)
        return ok, why

    def webhook_listening(self) -> tuple[bool, str]:
        """kopf binds the webhook's port after its startup handlers, so "started" alone
        would let a Service send admission calls to a replica not yet listening."""
        if self.webhook is None or not self.acting():
            return True, "standby" if self.webhook is not None else "not served"
        address, port = self.webhook
        host = "127.0.0.1" if address in ("", "0.0.0.0") else "::1" if address == "::" else address
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return True, ""
        except OSError:
            return False, f"gate webhook not listening on {address}:{port} yet"

    def checks(self) -> Any:
        from operators.kube.health import HealthChecks

        return HealthChecks(
            live=[("operator", self.operator_alive)],
            ready=[("leader-election", self.leadership), ("operator", self.started),
                   ("informer-sync", self.synced), ("controllers", self.loops),
                   ("gate-webhook", self.webhook_listening)])


async def operate(registry: Any, process: Process, args: argparse.Namespace, *,
                  stop: asyncio.Event | None = None,
                  on_lost: Callable[[], None] = exit_now,
                  lease_client: Any = None) -> int:
    """Run until stopped; returns the exit code."""
    import kopf

    loop = asyncio.get_running_loop()
    stop = stop or asyncio.Event()
    main_thread = threading.current_thread() is threading.main_thread()
    if main_thread:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
    reclaim: asyncio.Task[None] | None = None
    runner = None
    client = None
    renewing: asyncio.Task[bool] | None = None
    keep = asyncio.Event()
    try:
        if getattr(args, "health_port", 0):
            from operators.kube.health import serve

            try:
                runner = await serve(process.checks(), args.health_address, args.health_port)
            except OSError as exc:
                raise InputError(f"--health-port {args.health_port} on {args.health_address}: "
                                 f"{exc.strerror or exc}") from exc
        if getattr(args, "leader_elect", False):
            config = election_config(args)
            if lease_client is None:
                from operators.kube.client import KubeClient

                # Its own client: no rate limit shared with the controllers, no retries
                # (the elector retries), requests bounded by the renew deadline.
                client = KubeClient(qps=0, burst=1, retries=0, timeout=config.renew_deadline)
            process.elector = LeaderElector(config, KubeLease(lease_client or client, config.namespace,
                                                              config.name))
            if not await process.elector.acquire(stop):
                log.info("stopped before becoming the leader")
                return 0
            # Created before kopf starts: kopf cancels, at its end, every task born after it.
            renewing = loop.create_task(process.elector.renew(keep), name="draco-lease-renewal")
        if main_thread:
            reclaim = loop.create_task(_reclaim_signals(process.kopf_ready, stop),
                                       name="draco-signals")
        process.operator = loop.create_task(kopf.operator(
            registry=registry, standalone=True, clusterwide=True, stop_flag=stop,
            ready_flag=process.kopf_ready), name="draco-kopf")
        waiting: set[asyncio.Task[Any]] = {process.operator}
        if renewing is not None:
            waiting.add(renewing)
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if renewing is not None and renewing.done() and renewing.result() is False:
            on_lost()  # exits in `draco run`; tests get here with the process still alive
            stop.set()
            with contextlib.suppress(Exception):
                await process.operator
            return 1
        await process.operator
        log.info("controllers stopped")
        return 0
    finally:
        if reclaim is not None:
            reclaim.cancel()
        keep.set()
        if renewing is not None:
            with contextlib.suppress(Exception):
                await renewing
        if process.elector is not None and process.elector.leading:
            await process.elector.release()
        if client is not None:
            await client.close()
        if runner is not None:
            await runner.cleanup()


async def _reclaim_signals(kopf_ready: asyncio.Event, stop: asyncio.Event) -> None:
    """SIGTERM and SIGINT back to our stop flag once kopf has started.

    kopf, run in the main thread, installs its own handlers over ours. Then a SIGTERM
    stops kopf but never sets the stop flag it was given, and kopf waits 5 s for its own
    task that waits on that flag before cancelling it: every shutdown took 5 s longer
    (seen as the Lease released 5 s after a pod's deletion, on a real node). With the
    flag set, kopf stops the same way and at once."""
    await kopf_ready.wait()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)


__all__ = ["Process", "election_config", "exit_now", "operate"]
