"""A small async Kubernetes API client for the controllers' writes.

Built on aiohttp with the credentials of the current kubeconfig (or the in-cluster
service account), a token-bucket rate limit (QPS/burst, like client-go's) and bounded
retries for connection errors, 429 and 5xx, so one slow API server never makes a
controller spin, and writes never block kopf's event loop.
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp

from operators.kube.metrics import count_answer

# The kubernetes client writes a kubeconfig's certificate data to temporary files and
# names each file in a process-wide table before writing it: a second thread loading a
# kubeconfig at that moment gets the name of a file still empty ("[SSL] PEM lib", seen in
# CI when the tests' thread and kopf's login loaded the same kubeconfig at once). Every
# load in draco holds this lock.
KUBECONFIG_LOCK = threading.Lock()

DEFAULT_QPS = 200.0
DEFAULT_BURST = 400


@dataclass(frozen=True)
class Response:
    status: int
    body: Any

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


class RateLimiter:
    """Token bucket: `qps` tokens a second, at most `burst` saved up."""

    def __init__(self, qps: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.qps = qps
        self.burst = burst
        self.clock = clock
        self.tokens = float(burst)
        self.stamp = clock()
        self.lock = asyncio.Lock()

    def _refill(self) -> None:
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.qps)
        self.stamp = now

    async def take(self) -> None:
        if self.qps <= 0:
            return
        async with self.lock:
            self._refill()
            if self.tokens < 1:
                await asyncio.sleep((1 - self.tokens) / self.qps)
                self.stamp = self.clock()
                self.tokens = 0
            else:
                self.tokens -= 1

    def try_take(self) -> bool:
        """A token now, or False without waiting (what is over budget is left out)."""
        if self.qps <= 0:
            return True
        self._refill()
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True


@dataclass
class Credentials:
    host: str
    headers: dict[str, str]
    ssl: ssl.SSLContext | bool
    token: str | None = None
    ca_path: str | None = None
    cert_path: str | None = None
    key_path: str | None = None
    insecure: bool = False

    @classmethod
    def load(cls) -> Credentials:
        """The current kubeconfig's cluster and user (KUBECONFIG read now, not at import),
        else the in-cluster service account."""
        from kubernetes import client, config

        cfg = client.Configuration()
        path = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or None
        with KUBECONFIG_LOCK:
            try:
                config.load_kube_config(config_file=path, client_configuration=cfg)
            except Exception:  # noqa: BLE001 - no kubeconfig: try the service account
                config.load_incluster_config(client_configuration=cfg)
        headers = {}
        raw = (cfg.api_key or {}).get("authorization") or (cfg.api_key or {}).get("BearerToken")
        token = raw.split(" ", 1)[1] if raw and raw.lower().startswith("bearer ") else raw
        if token:
            headers["Authorization"] = f"Bearer {token}"
        ctx: ssl.SSLContext | bool = False
        if cfg.host.startswith("https"):
            ctx = ssl.create_default_context(cafile=cfg.ssl_ca_cert) if cfg.ssl_ca_cert else ssl.create_default_context()
            if cfg.cert_file and cfg.key_file:
                ctx.load_cert_chain(cfg.cert_file, cfg.key_file)
            if not cfg.verify_ssl:
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
        return cls(cfg.host.rstrip("/"), headers, ctx, token=token, ca_path=cfg.ssl_ca_cert,
                   cert_path=cfg.cert_file, key_path=cfg.key_file, insecure=not cfg.verify_ssl)


class KubeClient:
    def __init__(self, credentials: Credentials | None = None, *, qps: float = DEFAULT_QPS,
                 burst: int = DEFAULT_BURST, retries: int = 4, timeout: float = 30.0) -> None:
        self.credentials = credentials
        self.limiter = RateLimiter(qps, burst)
        self.retries = retries
        self.timeout = timeout
        self._session: aiohttp.ClientSession | None = None
        self._parent: KubeClient | None = None
        self.requests = 0

    def sibling(self, limiter: RateLimiter) -> KubeClient:
        """A client on this one's connections whose requests draw from LIMITER instead
        (Events: kube-scheduler too posts them through a client of their own, so that
        reports never slow the writes that matter). Closing it closes nothing."""
        twin = KubeClient(self.credentials, retries=self.retries, timeout=self.timeout)
        twin.limiter = limiter
        twin._parent = self
        return twin

    async def _ensure(self) -> aiohttp.ClientSession:
        if self._parent is not None:
            session = await self._parent._ensure()
            self.credentials = self._parent.credentials
            return session
        if self.credentials is None:
            self.credentials = await asyncio.to_thread(Credentials.load)
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                headers=self.credentials.headers,
                connector=aiohttp.TCPConnector(limit=32, ssl=self.credentials.ssl),
                timeout=aiohttp.ClientTimeout(total=self.timeout),
            )
        return self._session

    async def close(self) -> None:
        if self._parent is None and self._session is not None:
            await self._session.close()
            self._session = None

    async def request(self, method: str, path: str, body: Any = None,
                      content_type: str = "application/json") -> Response:
        session = await self._ensure()
        assert self.credentials is not None
        data = None if body is None else json.dumps(body).encode()
        delay = 0.1
        last: Response | None = None
        for attempt in range(self.retries + 1):
            await self.limiter.take()
            self.requests += 1
            try:
                async with session.request(method, self.credentials.host + path, data=data,
                                           headers={"Content-Type": content_type,
                                                    "Accept": "application/json"}) as resp:
                    raw = await resp.read()
                    try:
                        parsed = json.loads(raw) if raw else None
                    except ValueError:
                        parsed = raw.decode(errors="replace")
                    last = Response(resp.status, parsed)
            except (TimeoutError, aiohttp.ClientError) as exc:
                last = Response(0, {"message": f"{type(exc).__name__}: {exc}"})
            count_answer(method, last.status, path)
            retriable = last.status == 0 or last.status == 429 or last.status >= 500
            if retriable and attempt < self.retries:
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            return last
        assert last is not None
        return last

    async def get(self, path: str) -> Response:
        return await self.request("GET", path)

    async def post(self, path: str, body: Any) -> Response:
        return await self.request("POST", path, body)

    async def merge_patch(self, path: str, body: Any) -> Response:
        return await self.request("PATCH", path, body, "application/merge-patch+json")

    async def strategic_patch(self, path: str, body: Any) -> Response:
        return await self.request("PATCH", path, body, "application/strategic-merge-patch+json")

    async def delete(self, path: str, body: Any = None) -> Response:
        return await self.request("DELETE", path, body)
