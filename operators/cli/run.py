"""`draco run`: the operator, with the chosen controllers, against the current kubeconfig.

Every controller shares one tracker, fed once per watched kind. kopf runs standalone
(no peering: kopf's peering pauses equal replicas instead of electing one). For more
than one replica use --leader-elect: a coordination.k8s.io Lease decides which replica
acts, the others wait as standbys and take over when the leader's Lease expires (or at
once when it released it on SIGTERM). Every flag can also come from the environment as
DRACO_<FLAG> (e.g. DRACO_METRICS_PORT=8080, DRACO_LEADER_ELECT=true); a flag given on
the command line wins. With no flags, draco run binds no port and takes no Lease.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from operators.cli.inputs import ClusterError, InputError, UsageError, connection_problem, kube_api
from operators.cli.options import float_range, gate_list, int_range, port, seconds

CONTROLLERS = ("eviction", "patches", "allocator", "narrowing", "health")
DEFAULT_CONTROLLERS = CONTROLLERS  # every controller that exists runs without --controllers
FEEDS = {
    "eviction": ("ResourceSlice", "ResourceClaim", "Pod", "DeviceTaintRule", "DeviceTaintRule.resource.k8s.io"),
    "patches": ("ResourceSlice", "DeviceClass"),
    "allocator": ("ResourceSlice", "DeviceClass", "ResourceClaim", "Pod", "DeviceTaintRule",
                  "DeviceTaintRule.resource.k8s.io", "ResourceSlicePatch", "Gang", "PodGroup"),
    # the gangs: a member is ungated only once its whole gang has its devices
    "narrowing": ("ResourceClaim", "Pod", "Gang", "PodGroup"),
    # devices with their slice taints and patched attributes, pods' device health, the rules
    "health": ("ResourceSlice", "DeviceClass", "Pod", "DeviceTaintRule", "ResourceSlicePatch"),
    # Kueue's devices check (--admission-check): the allocator's device view and Gangs
    "admission": ("ResourceSlice", "DeviceClass", "ResourceClaim", "Pod", "DeviceTaintRule",
                  "DeviceTaintRule.resource.k8s.io", "ResourceSlicePatch", "Gang"),
}


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("run", help="the operator against the current kubeconfig",
                                   description=__doc__)
    parser.add_argument("--controllers", default=",".join(DEFAULT_CONTROLLERS), metavar="LIST",
                        help=f"comma-separated, from: {', '.join(CONTROLLERS)}; or 'none' to serve only "
                             f"the gate webhook, which then needs --gate-webhook-port "
                             f"(default: {','.join(DEFAULT_CONTROLLERS)})")
    parser.add_argument("--qps", type=float_range(0, 1e6, low_open=True), default=200.0, metavar="N",
                        help="API requests per second, more than 0 (default 200); Events have a "
                             "limit of their own of the same size")
    parser.add_argument("--burst", type=int_range(1, 1_000_000), default=400, metavar="N",
                        help="API request burst, at least 1 (default 400)")
    parser.add_argument("--eviction-workers", type=int_range(1, 10_000), default=32, metavar="N",
                        help="concurrent pod evictions, at least 1 (default 32; --qps bounds "
                             "the load they put on the API server)")
    parser.add_argument("--grace-period", type=seconds, default=5.0, metavar="SECONDS",
                        help="seconds after a rule's creation or effect change before "
                             "EvictionInProgress may become False (default 5)")
    parser.add_argument("--slice-taints", choices=("auto", "draco", "upstream"), default="auto",
                        help="who evicts for ResourceSlice taints and upstream's own DeviceTaintRules: "
                             "auto (default) leaves them to kube-controller-manager where the API server "
                             "keeps device taints (1.36+), draco handles them elsewhere; draco: always "
                             "draco (upstream's controller turned off); upstream: never draco. draco's "
                             "own DeviceTaintRules are always draco's")
    parser.add_argument("--use-eviction-api", action="store_true",
                        help="evict through policy/v1 Eviction so PodDisruptionBudgets are honoured")
    parser.add_argument("--narrowing-timeout", type=seconds, default=300.0, metavar="SECONDS",
                        help="seconds after a gated pod's creation before claims that are still not "
                             "allocated and reserved for it are reported on the pod (default 300)")
    parser.add_argument("--preemption", action="store_true",
                        help="let the allocator evict lower-priority pods whose devices a gated pod "
                             "needs (off by default; the nomination is kept on the preemptor pod)")
    parser.add_argument("--nomination-timeout", type=seconds, default=300.0, metavar="SECONDS",
                        help="how long a preemption's nomination keeps its devices for the preemptor "
                             "before the victims are chosen again (default 300)")
    parser.add_argument("--act-beside-gates", type=gate_list, default="", metavar="GATE,...",
                        help="other controllers' scheduling gates draco may allocate, preempt, place "
                             "gangs and narrow beside, comma-separated, or * for every gate (default: "
                             "none; a pod that carries any gate but draco's waits, as kube-scheduler "
                             "waits, e.g. for Kueue's kueue.x-k8s.io/admission)")
    parser.add_argument("--allocation-timeout", type=seconds, default=10.0, metavar="SECONDS",
                        help="the allocator's time budget for one pod's claims; past it the pod is "
                             "reported as TooComplex and nothing is written (default 10)")
    parser.add_argument("--admission-check", action="store_true",
                        help="answer Kueue's AdmissionChecks whose controllerName is "
                             "resource.draco.dev/devices: a Workload is Ready only when all its pods' "
                             "devices fit jointly, and they are kept for it until its pods come "
                             "(off by default; needs Kueue's kueue.x-k8s.io/v1beta2 API, idle without it)")
    parser.add_argument("--admission-pod-timeout", type=seconds, default=600.0, metavar="SECONDS",
                        help="how long devices stay reserved for a Ready Workload none of whose pods "
                             "came; then its check turns Retry (default 600)")
    parser.add_argument("--admission-requeue-after", type=int_range(1, 86_400), default=30,
                        metavar="SECONDS",
                        help="the requeueAfterSeconds of a Retry answer: how long Kueue keeps the "
                             "Workload out of its queue before trying it again (default 30)")
    parser.add_argument("--gate-webhook-port", type=port, default=0, metavar="PORT",
                        help="serve the mutating admission webhook that adds draco's scheduling gate "
                             "to new pods with ResourceClaims, at https://ADDRESS:PORT/gate "
                             "(default 0: off)")
    parser.add_argument("--gate-webhook-address", default="127.0.0.1", metavar="ADDRESS",
                        help="address the gate webhook binds (default 127.0.0.1; in a pod use 0.0.0.0 "
                             "and a Service, with a certificate valid for its DNS name)")
    parser.add_argument("--gate-namespace-selector", default="", metavar="SELECTOR",
                        help="gate only pods in namespaces whose labels match, kubectl syntax "
                             "(e.g. draco.dev/gate=enabled; default: every namespace)")
    parser.add_argument("--gate-pod-selector", default="", metavar="SELECTOR",
                        help="gate only pods whose labels match, kubectl syntax (default: every pod)")
    parser.add_argument("--gate-webhook-certfile", default=None, metavar="FILE",
                        help="the webhook's TLS certificate (PEM; default: a self-signed one made "
                             "at start with openssl, for ADDRESS, 127.0.0.1 and localhost)")
    parser.add_argument("--gate-webhook-keyfile", default=None, metavar="FILE",
                        help="the private key of --gate-webhook-certfile (PEM)")
    parser.add_argument("--gate-webhook-cadump", default=None, metavar="FILE",
                        help="write the CA certificate the API server must trust to this file "
                             "(PEM; base64 of it is the MutatingWebhookConfiguration's caBundle)")
    parser.add_argument("--metrics-port", type=port, default=0, metavar="PORT",
                        help="serve Prometheus metrics on this port, e.g. 8080 (default 0: no metrics server)")
    parser.add_argument("--metrics-address", default="0.0.0.0", metavar="ADDRESS",
                        help="address the metrics server binds (default 0.0.0.0, every interface, as "
                             "a pod needs for Prometheus to scrape it; 127.0.0.1 keeps it local)")
    parser.add_argument("--log-format", choices=("auto", "json", "console"), default="auto",
                        help="json: one JSON object a line (for log collectors); console: key=value "
                             "for people; auto (default): console on a terminal, json otherwise")
    parser.add_argument("--health-port", type=port, default=0, metavar="PORT",
                        help="serve GET /healthz (liveness) and GET /readyz (readiness) on this port, "
                             "e.g. 8081 (default 0: off)")
    parser.add_argument("--health-address", default="0.0.0.0", metavar="ADDRESS",
                        help="address the health server binds (default 0.0.0.0, for the kubelet's probes)")
    parser.add_argument("--leader-elect", action="store_true",
                        help="act only while holding a coordination.k8s.io Lease, so that one of "
                             "several replicas acts at a time (default: off, act at once)")
    parser.add_argument("--leader-elect-namespace", default=None, metavar="NAMESPACE",
                        help="namespace of the Lease (default: $POD_NAMESPACE, else the service "
                             "account's namespace, else default)")
    parser.add_argument("--leader-elect-name", default="draco", metavar="NAME",
                        help="name of the Lease (default draco)")
    parser.add_argument("--leader-elect-lease-duration", type=int_range(1, 86_400), default=15,
                        metavar="SECONDS",
                        help="how long a standby waits after the leader's last renewal before it "
                             "takes over, whole seconds (default 15)")
    parser.add_argument("--leader-elect-renew-deadline", type=seconds, default=10.0, metavar="SECONDS",
                        help="how long the leader keeps trying to renew before it gives up and exits; "
                             "shorter than the lease duration (default 10)")
    parser.add_argument("--leader-elect-retry-period", type=seconds, default=2.0, metavar="SECONDS",
                        help="pause between attempts to acquire or renew the Lease (default 2)")
    from operators.cli import run_env

    run_env.apply(parser)  # DRACO_<FLAG> variables: after every flag was added
    parser.set_defaults(func=run)


def configure_logging(fmt: str) -> None:
    """JSON lines for log collectors, key=value on a terminal (`auto`), on stderr."""
    from operators.kube.logs import configure

    configure(fmt == "json" or (fmt == "auto" and not sys.stderr.isatty()), sys.stderr)


def reservations_known(synced: Callable[[], Awaitable[Any]],
                       reservers: list[Any]) -> Callable[[], Awaitable[None]]:
    """The allocator's start: the initial sync, then every Workload reservation the
    admission check keeps (its first listing of Kueue's Workloads, or Kueue found not
    served). Without the second wait, a restarted draco could allocate, in the moment
    before that listing, devices a Ready Workload's pods are to get."""
    async def wait() -> None:
        await synced()
        while not all(r.reservations_known for r in reservers):
            await asyncio.sleep(0.05)
    return wait


def build(controllers: list[str], settings: Any, *, gate: Any = None) -> tuple[Any, Any, dict[str, Any]]:
    import kopf

    from operators.cli.state import standard_overlays
    from operators.kube.feed import SyncGate, register_feed
    from operators.tracker import Tracker

    registry = kopf.OperatorRegistry()
    tracker = Tracker()
    for overlay in standard_overlays():
        tracker.register_overlay(overlay)
    from operators.tracker.taint_rules import ensure_upstream_overlay

    ensure_upstream_overlay(tracker)  # upstream's own DeviceTaintRules: a taint source too
    feeds: list[str] = []
    admission = bool(getattr(settings, "admission_check", False))
    for name in [*controllers, *(["admission"] if admission else [])]:
        feeds += [k for k in FEEDS[name] if k not in feeds]
    if "patches" in controllers:  # the reporter feeds its patches into the tracker itself
        feeds = [k for k in feeds if k != "ResourceSlicePatch"]
    gate = gate if gate is not None else SyncGate()  # the caller's, when it reports readiness
    seen = register_feed(registry, tracker, feeds, gate)

    priming: list[asyncio.Task[None]] = []

    @kopf.on.startup(registry=registry)
    async def initial_sync(**_: Any) -> None:
        from operators.kube.client import KubeClient

        gate.primed.clear()
        gate.done.clear()
        loop = asyncio.get_running_loop()
        # pods, claims and slices come through watches of draco's own (kube/list_watch.py)
        for feed in own_feeds(tracker, gate, feeds):
            priming.append(loop.create_task(feed.run()))
        client = KubeClient()
        try:
            # Not awaited here: kopf starts its watches only after startup handlers.
            priming.append(loop.create_task(_prime(gate, feeds, client, seen)))
        except Exception:
            await client.close()
            raise

    @kopf.on.cleanup(registry=registry)
    async def stop_initial_sync(**_: Any) -> None:
        # A list still being retried must not hold shutdown back (kopf would wait for it);
        # the pod feed runs until now.
        for task in priming:
            task.cancel()
        await asyncio.gather(*priming, return_exceptions=True)
        priming.clear()

    started: dict[str, Any] = {}
    if "eviction" in controllers:
        from operators.eviction.handlers import register as register_eviction

        started["eviction"] = register_eviction(registry, tracker, settings, ready=gate.wait)
    if "patches" in controllers:
        from operators.patches.handlers import register as register_patches

        started["patches"] = register_patches(registry, tracker, settings)
    reservers: list[Any] = []  # the admission check, once wired: see reservations_known
    if "allocator" in controllers:
        from operators.allocator_controller.handlers import register as register_allocator

        started["allocator"] = register_allocator(registry, tracker, settings,
                                                  ready=reservations_known(gate.wait, reservers))
    if "narrowing" in controllers:
        from operators.narrowing.handlers import register as register_narrowing

        started["narrowing"] = register_narrowing(registry, tracker, settings, ready=gate.wait)

    if "health" in controllers:
        from operators.health.handlers import register as register_health

        started["health"] = register_health(registry, tracker, settings)

    if admission:
        from operators.admission_controller.handlers import register as register_admission

        started["admission"] = register_admission(registry, tracker, settings, ready=gate.wait)
        if "allocator" in started:  # one view of what is taken: reservations kept in its holds
            started["admission"].attach(started["allocator"].holds)
            reservers.append(started["admission"])

    if int(getattr(settings, "gate_webhook_port", 0) or 0):
        from operators.narrowing.webhook import register as register_webhook
        from operators.narrowing.webhook import settings_from as webhook_settings

        register_webhook(registry, webhook_settings(settings))

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
        # Webhook only: pods are built in, so no CRD watch (nor the RBAC it would need).
        settings.scanning.disabled = not controllers

    return registry, tracker, started


def own_feeds(tracker: Any, gate: Any, feeds: list[str]) -> list[Any]:
    """draco's own list+watch feeds for the many-object kinds among `feeds`."""
    from operators.kube.list_watch import CLAIMS, SLICES, ListWatch
    from operators.kube.pod_watch import PodFeed

    out: list[Any] = []
    if "Pod" in feeds:
        out.append(PodFeed(tracker, gate))
    out += [ListWatch(kind, tracker, gate) for kind in (CLAIMS, SLICES) if kind.name in feeds]
    return out


async def _prime(gate: Any, feeds: list[str], client: Any, seen: Any) -> None:
    try:
        await gate.prime(feeds, client, seen)
    finally:
        await client.close()


# How long `draco run` keeps asking an API server that refuses its credentials (401/403)
# before it gives up, and how often.
DENIED_GRACE_S = 15.0
DENIED_RETRY_S = 1.0


def preflight() -> str:
    """Fail at once, naming the kubeconfig, when the cluster cannot be used: kopf itself
    would retry the login every minute and log only "Task exception was never retrieved".
    Returns the API server's URL."""
    from operators.cli.inputs import kubeconfig_location, one_line
    from operators.kube.client import Credentials

    # The client's connection pool warns on every retry; the outcome is reported below.
    logging.getLogger("urllib3").setLevel(logging.ERROR)

    api = kube_api(hint="set KUBECONFIG, or run in a pod with a service account")
    try:
        Credentials.load()
    except Exception as exc:  # noqa: BLE001 - e.g. a client certificate kopf cannot read
        raise ClusterError(f"cannot use the kubeconfig {kubeconfig_location()}: {one_line(exc)}") from exc
    host = str(api.configuration.host)
    deadline = time.monotonic() + DENIED_GRACE_S
    while True:
        try:
            verb, url, headers, _, _ = api.param_serialize(
                "GET", "/version", header_params={"Accept": "application/json"}, auth_settings=["BearerToken"])
            resp = api.call_api(verb, url, header_params=headers, _request_timeout=10)
            resp.read()
        except Exception as exc:  # noqa: BLE001 - connection problems, named in one line
            raise ClusterError(f"cannot reach the API server at {host} (kubeconfig {kubeconfig_location()}): "
                               f"{connection_problem(exc)}") from exc
        if resp.status not in (401, 403):
            return host
        # A kube-apiserver that just (re)started refuses everyone for a moment, until its
        # authenticators and RBAC caches are filled: asked again, so that a restarted API
        # server does not put draco's pod into CrashLoopBackOff's growing delays.
        if time.monotonic() >= deadline:
            raise ClusterError(f"the API server at {host} refused the credentials of kubeconfig "
                               f"{kubeconfig_location()} (HTTP {resp.status})")
        time.sleep(DENIED_RETRY_S)


def _device_taints() -> dict[str, Any] | None:
    """What the cluster does about device taints itself, for the startup line: read only
    (a standby writes nothing, not even a dry run), so the version decides whether the
    fields are kept; the eviction controller probes when it starts, and every minute."""
    from operators.cli.upstream_taints import discover_cluster

    try:
        return dict(discover_cluster(probe=False).to_record())
    except ClusterError:
        return None


def start_metrics(address: str, metrics_port: int) -> None:
    from prometheus_client import start_http_server

    try:
        start_http_server(metrics_port, addr=address)
    except OSError as exc:
        raise InputError(f"--metrics-port {metrics_port} on {address}: "
                         f"{exc.strerror or connection_problem(exc)}") from exc


def run(args: argparse.Namespace) -> int:
    from operators.cli import run_env
    from operators.cli.version import version

    run_env.check(args)  # a DRACO_* variable that could not be read: usage error naming it
    controllers = [c.strip() for c in args.controllers.split(",") if c.strip()]
    if controllers == ["none"]:  # a webhook-only process: no watches, no tracker feeds
        if not args.gate_webhook_port:
            raise UsageError("--controllers none runs nothing without --gate-webhook-port")
        controllers = []
    elif (unknown := sorted(set(controllers) - set(CONTROLLERS))) or not controllers:
        raise UsageError(f"--controllers: unknown controller(s) {', '.join(unknown) or '(none given)'}; "
                         f"choose from {', '.join(CONTROLLERS)}")
    if args.gate_webhook_port:
        from operators.narrowing.webhook import settings_from as webhook_settings

        if bool(args.gate_webhook_certfile) != bool(args.gate_webhook_keyfile):
            raise UsageError("--gate-webhook-certfile and --gate-webhook-keyfile go together")
        try:
            webhook_settings(args)
        except ValueError as exc:
            raise UsageError(str(exc)) from exc
    if args.leader_elect:
        from operators.cli.lifecycle import election_config

        problems = election_config(args).problems()
        if problems:
            raise UsageError(f"--leader-elect-*: {'; '.join(problems)}")
    server = preflight()
    if args.metrics_port:
        start_metrics(args.metrics_address, args.metrics_port)
    configure_logging(args.log_format)
    from operators.cli.lifecycle import Process
    from operators.kube.feed import SyncGate
    from operators.kube.supervision import default_supervisor

    port = int(getattr(args, "gate_webhook_port", 0) or 0)
    webhook = (str(getattr(args, "gate_webhook_address", "127.0.0.1")), port) if port else None
    process = Process(controllers, SyncGate(), default_supervisor(), webhook)
    registry, tracker, started = build(controllers, args, gate=process.gate)
    structlog.get_logger("draco").info(
        "draco starting", version=version(), controllers=controllers, server=server,
        qps=args.qps, burst=args.burst, eviction_workers=args.eviction_workers,
        grace_period=args.grace_period, use_eviction_api=args.use_eviction_api,
        preemption=args.preemption, slice_taints=args.slice_taints, device_taints=_device_taints(),
        metrics=f"http://{args.metrics_address}:{args.metrics_port}/metrics" if args.metrics_port else None,
        health=f"http://{args.health_address}:{args.health_port}/readyz" if args.health_port else None,
        leader_elect=args.leader_elect, event_loop="uvloop" if loop_factory() else "asyncio")
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(_operate(registry, process, args, tracker, started))


async def _operate(registry: Any, process: Any, args: argparse.Namespace, tracker: Any = None,
                   started: dict[str, Any] | None = None) -> int:
    from operators.cli.lifecycle import operate

    if args.metrics_port:  # gauges read on this loop when Prometheus scrapes
        from operators.cli import run_metrics

        run_metrics.install(process, tracker, started or {}, leader_elect=bool(args.leader_elect))
    freezing = asyncio.create_task(freeze_after_sync(process.gate))
    try:
        return await operate(registry, process, args)
    finally:
        freezing.cancel()


async def freeze_after_sync(gate: Any) -> None:
    """Once the initial state is in, move it out of the garbage collector's reach.

    At 16,000 devices and 10,000 claims and pods the tracker holds about half a million
    objects, and every full collection walked them all: 0.4 s during which no event was
    handled and no claim allocated, again and again as the heap grew. Collected once and
    frozen (gc.freeze), they are never walked again; objects made later are collected as
    usual, and frozen ones are still freed when their last reference goes. Only in
    `draco run`'s own process: a test process running operators in threads keeps its
    collector untouched."""
    await gate.done.wait()
    gc.collect()
    gc.freeze()
    structlog.get_logger("draco").info("initial state frozen for the garbage collector",
                                        objects=gc.get_freeze_count())


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop where it is installed, asyncio's own otherwise (None).

    Most of what `draco run` spends at a big cluster's steady state is per watch event
    and per request: a TLS read, the HTTP parser, a loop iteration. Measured on a real
    1.34 cluster with 20,000 pods, a plain pod's watch event cost 0.20-0.22 ms of CPU
    with uvloop against 0.27-0.28 ms with asyncio's loop (same load, one sitting)."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop
