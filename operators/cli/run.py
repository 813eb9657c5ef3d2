"""`draco run`: the operator, with the chosen controllers, against the current kubeconfig.

Every controller shares one tracker, fed once per watched kind. kopf runs standalone
(no peering): for high availability run one replica, or several behind a Lease-based
leader election in front of `draco run`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from typing import Any

import structlog

CONTROLLERS = ("eviction", "patches")
FEEDS = {
    "eviction": ("ResourceSlice", "ResourceClaim", "Pod", "DeviceTaintRule"),
    "patches": ("ResourceSlice", "DeviceClass"),
}


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("run", help="the operator against the current kubeconfig",
                                   description=__doc__)
    parser.add_argument("--controllers", default=",".join(CONTROLLERS),
                        help=f"comma-separated, from: {', '.join(CONTROLLERS)} (default: all)")
    parser.add_argument("--qps", type=float, default=200.0, help="API requests per second (default 200)")
    parser.add_argument("--burst", type=int, default=400, help="API request burst (default 400)")
    parser.add_argument("--eviction-workers", type=int, default=10,
                        help="concurrent pod evictions (default 10, as upstream's integration test)")
    parser.add_argument("--grace-period", type=float, default=5.0,
                        help="seconds after a rule's creation or effect change before "
                             "EvictionInProgress may become False (default 5)")
    parser.add_argument("--use-eviction-api", action="store_true",
                        help="evict through policy/v1 Eviction so PodDisruptionBudgets are honoured")
    parser.add_argument("--metrics-port", type=int, default=0,
                        help="serve Prometheus metrics on this port (0: off)")
    parser.add_argument("--log-format", choices=("auto", "json", "console"), default="auto")
    parser.set_defaults(func=run)


def configure_logging(fmt: str) -> None:
    import sys

    json_logs = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    renderer: Any = (structlog.processors.JSONRenderer() if json_logs
                     else structlog.dev.ConsoleRenderer(colors=False))
    structlog.configure(processors=[structlog.processors.add_log_level,
                                    structlog.processors.TimeStamper(fmt="iso"), renderer],
                        logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    # kopf reports every low-level event handler at INFO; draco logs what it does itself.
    logging.getLogger("kopf").setLevel(logging.WARNING)


def build(controllers: list[str], settings: Any) -> tuple[Any, Any, dict[str, Any]]:
    import kopf

    from operators.cli.state import standard_overlays
    from operators.kube.feed import SyncGate, register_feed
    from operators.tracker import Tracker

    registry = kopf.OperatorRegistry()
    tracker = Tracker()
    for overlay in standard_overlays():
        tracker.register_overlay(overlay)
    feeds: list[str] = []
    for name in controllers:
        feeds += [k for k in FEEDS[name] if k not in feeds]
    gate = SyncGate()
    seen = register_feed(registry, tracker, feeds, gate)

    @kopf.on.startup(registry=registry)
    async def initial_sync(**_: Any) -> None:
        from operators.kube.client import KubeClient

        gate.primed.clear()
        gate.done.clear()
        client = KubeClient()
        try:
            # Not awaited here: kopf starts its watches only after startup handlers.
            asyncio.get_running_loop().create_task(_prime(gate, feeds, client, seen))
        except Exception:
            await client.close()
            raise

    started: dict[str, Any] = {}
    if "eviction" in controllers:
        from operators.eviction.handlers import register as register_eviction

        started["eviction"] = register_eviction(registry, tracker, settings, ready=gate.wait)
    if "patches" in controllers:
        from operators.patches.handlers import register as register_patches

        started["patches"] = register_patches(registry, tracker, settings)

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        from operators.kube.client import Credentials

        creds = Credentials.load()
        return kopf.ConnectionInfo(server=creds.host, token=creds.token, ca_path=creds.ca_path,
                                   certificate_path=creds.cert_path, private_key_path=creds.key_path,
                                   insecure=creds.insecure, scheme="Bearer" if creds.token else None)

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.posting.enabled = False  # draco posts its own, deduplicated Events
        settings.watching.server_timeout = 300
        settings.persistence.finalizer = "resource.draco.dev/kopf-finalizer"

    return registry, tracker, started


async def _prime(gate: Any, feeds: list[str], client: Any, seen: Any) -> None:
    try:
        await gate.prime(feeds, client, seen)
    finally:
        await client.close()


def run(args: argparse.Namespace) -> int:
    import kopf

    controllers = [c.strip() for c in args.controllers.split(",") if c.strip()]
    unknown = sorted(set(controllers) - set(CONTROLLERS))
    if unknown:
        raise SystemExit(f"error: unknown controller(s): {', '.join(unknown)}; "
                         f"choose from {', '.join(CONTROLLERS)}")
    configure_logging(args.log_format)
    if args.metrics_port:
        from prometheus_client import start_http_server

        start_http_server(args.metrics_port)
    registry, _, _ = build(controllers, args)
    asyncio.run(kopf.operator(registry=registry, standalone=True, clusterwide=True))
    return 0
