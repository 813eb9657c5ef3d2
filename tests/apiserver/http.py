"""A tiny HTTP client for talking to the embedded server without kubectl."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any


def call(url: str, method: str = "GET", body: Any = None,
         content_type: str = "application/json", raw: bytes | None = None) -> tuple[int, Any]:
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": content_type, "Accept": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"null")


def watch_lines(url: str, limit: int, timeout: float = 10) -> list[dict[str, Any]]:
    """Read `limit` watch events (or until the server closes the stream)."""
    out: list[dict[str, Any]] = []
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        for line in resp:
            if line.strip():
                out.append(json.loads(line))
            if len(out) >= limit:
                break
    return out
