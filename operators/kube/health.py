"""`draco run --health-port`: GET /healthz (liveness) and GET /readyz (readiness).

The server runs on the operator's own event loop, so a loop that is blocked stops
answering /healthz and the kubelet restarts the container, which is the point of a
liveness probe. Both endpoints answer like kube-apiserver's: `ok` with 200, or one
`[+]name ok` / `[-]name failed: why` line per check with 503 when a check fails
(`?verbose` lists the checks on success too).

What the checks are is the caller's choice (`draco run` wires the leader election, the
initial sync and the controller loops); this module only serves them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from aiohttp import web

# A check answers (ok, detail): detail says why it failed, or what state it is in.
Check = tuple[str, Callable[[], tuple[bool, str]]]


@dataclass
class HealthChecks:
    live: Sequence[Check]
    ready: Sequence[Check]


def _answer(checks: Sequence[Check], what: str, verbose: bool) -> web.Response:
    lines = []
    healthy = True
    for name, check in checks:
        try:
            ok, detail = check()
        except Exception as exc:  # noqa: BLE001 - a broken check is a failed check, not a 500
            ok, detail = False, f"{type(exc).__name__}: {exc}"
        healthy = healthy and ok
        lines.append(f"[+]{name} ok" + (f" ({detail})" if detail else "") if ok
                     else f"[-]{name} failed: {detail or 'reason withheld'}")
    if healthy and not verbose:
        return web.Response(text="ok", content_type="text/plain")
    lines.append(f"{what} check {'passed' if healthy else 'failed'}")
    return web.Response(text="\n".join(lines) + "\n", status=200 if healthy else 503,
                        content_type="text/plain")


def application(checks: HealthChecks) -> web.Application:
    async def healthz(request: web.Request) -> web.Response:
        return _answer(checks.live, "healthz", "verbose" in request.query)

    async def readyz(request: web.Request) -> web.Response:
        return _answer(checks.ready, "readyz", "verbose" in request.query)

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/livez", healthz)
    return app


async def serve(checks: HealthChecks, address: str, port: int) -> web.AppRunner:
    """Start serving on the running loop; `await runner.cleanup()` stops it. Raises
    OSError when the address cannot be bound."""
    runner = web.AppRunner(application(checks), access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, address, port)
    try:
        await site.start()
    except OSError:
        await runner.cleanup()
        raise
    return runner


__all__ = ["Check", "HealthChecks", "application", "serve"]
