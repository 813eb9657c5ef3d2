"""Running the embedded API server: in a thread for tests, or in the foreground."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
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


class StartError(Exception):
    """Why `draco apiserver` cannot start, in one line naming the file, port or folder."""


def crd_documents(dirs: Iterable[Path]) -> list[tuple[Path, dict[str, Any]]]:
    """(file, CustomResourceDefinition) for the YAML files in the given directories.

    Raises StartError naming the file when one cannot be read or parsed.
    """
    found = []
    for d in dirs:
        for f in sorted(Path(d).glob("*.y*ml")):
            try:
                docs = list(yaml.safe_load_all(f.read_text(encoding="utf-8")))
            except yaml.YAMLError as exc:
                mark = getattr(exc, "problem_mark", None)
                where = f" (line {mark.line + 1})" if mark is not None else ""
                problem = getattr(exc, "problem", None) or "not valid YAML"
                raise StartError(f"{f}{where}: not valid YAML: {problem}") from exc
            except (OSError, UnicodeDecodeError) as exc:
                raise StartError(f"{f}: cannot read: {exc}") from exc
            for doc in docs:
                if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                    found.append((f, doc))
    return found


def crd_problem(crd: dict[str, Any]) -> str | None:
    """What makes a CRD unservable (the fields the real server requires), or None."""
    spec = crd.get("spec")
    if not isinstance(spec, dict):
        return "spec: required"
    names = spec.get("names")
    if not isinstance(names, dict):
        return "spec.names: required"
    for field in ("plural", "kind"):
        if not isinstance(names.get(field), str) or not names[field]:
            return f"spec.names.{field}: required"
    group = spec.get("group")
    if not isinstance(group, str) or "." not in group:
        return "spec.group: required, a DNS name with at least one dot"
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        return f"spec.scope: must be Namespaced or Cluster, not {spec.get('scope')!r}"
    meta = crd.get("metadata")
    expected = f"{names['plural']}.{group}"
    if not isinstance(meta, dict) or meta.get("name") != expected:
        return f"metadata.name: must be spec.names.plural.spec.group ({expected})"
    versions = spec.get("versions")
    if not isinstance(versions, list) or not versions:
        return "spec.versions: at least one version is required"
    for i, ver in enumerate(versions):
        if not isinstance(ver, dict) or not isinstance(ver.get("name"), str) or not ver["name"]:
            return f"spec.versions[{i}].name: required"
        schema = ver.get("schema")
        if schema is not None and not (isinstance(schema, dict)
                                       and isinstance(schema.get("openAPIV3Schema"), dict)):
            return f"spec.versions[{i}].schema.openAPIV3Schema: must be an object"
    if sum(1 for v in versions if v.get("storage")) != 1:
        return "spec.versions: exactly one version must have storage: true"
    return None


def read_crds(dirs: Iterable[Path]) -> list[dict[str, Any]]:
    """CustomResourceDefinitions in the given directories (YAML files, multi-document)."""
    return [crd for _, crd in crd_documents(dirs)]


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


def port_number(text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be between 0 and 65535, not {text}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=port_number, default=6443,
                        help="port on 127.0.0.1 (default 6443; 0 picks a free one)")
    parser.add_argument("--crds", action="append", default=[], metavar="DIR",
                        help="also serve the CRDs in DIR (repeatable); draco's own are always served")
    parser.add_argument("--kubeconfig-out", default="draco.kubeconfig", metavar="FILE",
                        help="where to write a kubeconfig for kubectl (default ./draco.kubeconfig)")


def prepare(args: argparse.Namespace) -> tuple[web.Application, int]:
    """Everything that can fail before the port is bound: CRD files, the kubeconfig folder."""
    for d in args.crds:
        if not Path(d).is_dir():
            raise StartError(f"--crds {d}: not a directory")
    out = Path(args.kubeconfig_out)
    if not out.parent.is_dir():
        raise StartError(f"--kubeconfig-out {out}: folder {out.parent} does not exist")
    if out.is_dir():
        raise StartError(f"--kubeconfig-out {out}: is a folder, not a file")
    packaged = read_crds([PACKAGED_CRDS])
    server, app = make_app(packaged)
    extra = crd_documents(map(Path, args.crds))
    for path, crd in extra:
        problem = crd_problem(crd)
        if problem is not None:
            meta = crd.get("metadata")
            name = meta.get("name") if isinstance(meta, dict) else None
            raise StartError(f"{path}: CustomResourceDefinition {name or '<unnamed>'}: {problem}")
        try:
            server.apply_crd(crd)
        except Exception as exc:  # noqa: BLE001 - any defect of a user's CRD, named by file
            name = (crd.get("metadata") or {}).get("name") if isinstance(crd.get("metadata"), dict) else None
            detail = " ".join(str(exc).split()) or type(exc).__name__
            raise StartError(f"{path}: CustomResourceDefinition {name or '<unnamed>'} is not valid: "
                             f"{detail}") from exc
    return app, len(packaged) + len(extra)


async def _serve(app: web.Application, args: argparse.Namespace, crd_count: int) -> None:
    import signal

    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", args.port)
        try:
            await site.start()
        except OSError as exc:
            reason = os.strerror(exc.errno) if exc.errno else str(exc)
            raise StartError(f"--port {args.port}: cannot listen on 127.0.0.1:{args.port}: "
                             f"{reason}") from exc
        server = getattr(site, "_server", None)
        sockets = getattr(server, "sockets", None) or []
        port = int(sockets[0].getsockname()[1]) if sockets else args.port
        url = f"http://127.0.0.1:{port}"
        out = Path(args.kubeconfig_out)
        try:  # whole or not at all: a reader that polls for the file never sees half of it
            partial = out.with_name(f".{out.name}.{os.getpid()}.tmp")
            partial.write_text(kubeconfig(url))
            partial.replace(out)
        except OSError as exc:
            raise StartError(f"--kubeconfig-out {out}: cannot write: {exc.strerror or exc}") from exc
        print(f"draco apiserver listening on {url} ({crd_count} CRDs)\n"
              f"  export KUBECONFIG={out.resolve()}\n"
              f"  kubectl get devicetaintrules\n"
              f"Ctrl-C stops it.", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        await stop.wait()
    finally:
        await runner.cleanup()


def run(args: argparse.Namespace) -> int:
    try:
        app, crd_count = prepare(args)
        asyncio.run(_serve(app, args, crd_count))
    except StartError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    return 0
