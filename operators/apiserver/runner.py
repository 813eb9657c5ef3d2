"""Running the embedded API server: in a thread for tests, or in the foreground."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import sys
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from operators.apiserver.server import APIServer, make_app

PACKAGED_CRDS = Path(__file__).with_name("crds")


def read_crds(dirs: Iterable[Path]) -> list[dict[str, Any]]:
    """CustomResourceDefinitions in the given directories (YAML files, multi-document)."""
    crds = []
    for d in dirs:
        for f in sorted(Path(d).glob("*.y*ml")):
            for doc in yaml.safe_load_all(f.read_text()):
                if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                    crds.append(doc)
    return crds


def kubeconfig(url: str, context: str = "draco") -> str:
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": context,
        "clusters": [{"name": context, "cluster": {"server": url}}],
        "users": [{"name": context, "user": {"token": "draco-embedded"}}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": context,
                                                    "namespace": "default"}}],
    })


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerThread:
    """The server on its own event loop in a daemon thread (tests, `draco demo`)."""

    def __init__(self, crds: list[dict[str, Any]] | None = None, port: int = 0) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server: APIServer
        self.loop = asyncio.new_event_loop()
        self._crds = read_crds([PACKAGED_CRDS]) if crds is None else crds
        self._ready = threading.Event()
        self._runner: web.AppRunner | None = None
        self._thread = threading.Thread(target=self._run, name="draco-apiserver", daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.server, app = make_app(self._crds)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=0.5)
        self.loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        self.loop.run_until_complete(site.start())
        self._ready.set()
        self.loop.run_forever()

    def start(self) -> ServerThread:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the embedded API server did not start within 10 s")
        return self

    def call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Run `fn` on the server's loop (the store is not thread-safe) and return its result."""
        async def wrapper() -> Any:
            return fn(*args, **kwargs)
        return asyncio.run_coroutine_threadsafe(wrapper(), self.loop).result(10)

    def stop(self) -> None:
        if self._runner is not None:
            fut = asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self.loop)
            with contextlib.suppress(Exception):
                fut.result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)


def serve_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="draco apiserver", description=(
        "draco's embedded Kubernetes API server (in memory, plain HTTP on 127.0.0.1)."))
    add_arguments(parser)
    return run(parser.parse_args(argv))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, default=6443, help="port on 127.0.0.1 (default 6443; 0 picks a free one)")
    parser.add_argument("--crds", action="append", default=[], metavar="DIR",
                        help="also serve the CRDs in DIR (repeatable); draco's own are always served")
    parser.add_argument("--kubeconfig-out", default="draco.kubeconfig", metavar="FILE",
                        help="where to write a kubeconfig for kubectl (default ./draco.kubeconfig)")


def run(args: argparse.Namespace) -> int:
    for d in args.crds:
        if not Path(d).is_dir():
            sys.stderr.write(f"error: --crds {d}: not a directory\n")
            return 1
    crds = read_crds([PACKAGED_CRDS, *map(Path, args.crds)])
    port = args.port or free_port()
    url = f"http://127.0.0.1:{port}"
    Path(args.kubeconfig_out).write_text(kubeconfig(url))
    _, app = make_app(crds)
    print(f"draco apiserver listening on {url} ({len(crds)} CRDs)\n"
          f"  export KUBECONFIG={Path(args.kubeconfig_out).resolve()}\n"
          f"  kubectl get devicetaintrules\n"
          f"Ctrl-C stops it.", flush=True)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None,
                shutdown_timeout=1.0)
    return 0
