"""Optimistic concurrency: read, change, write with the resourceVersion read; on 409
Conflict read again and retry.

For writes whose result depends on what the object holds now (a claim's allocation,
a pod's affinity and gates), where a blind patch could undo someone else's change.
Writes that own their fields outright (a condition merged by type, a status the
controller alone writes) need no precondition and do not come here.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from operators.kube.client import KubeClient, Response

DEFAULT_ATTEMPTS = 5
Mutate = Callable[[dict[str, Any]], Mapping[str, Any] | None]


async def read_modify_write(
    client: KubeClient,
    path: str,
    mutate: Mutate,
    *,
    write_path: str | None = None,
    attempts: int = DEFAULT_ATTEMPTS,
) -> Response:
    """GET `path`, PUT what `mutate` returns to `write_path` (default `path`, e.g. the
    `/status` subresource) with the resourceVersion that was read.

    `mutate` gets a private copy of the object and returns the object to write, or None
    when the object already is as wanted (nothing is written; the read is returned).
    A 409 means someone wrote in between: read again and ask `mutate` again, at most
    `attempts` times. Any other failure (a 404 included) is returned as it came.
    """
    last: Response | None = None
    for _ in range(max(attempts, 1)):
        read = await client.get(path)
        if not read.ok or not isinstance(read.body, Mapping):
            return read
        desired = mutate(copy.deepcopy(dict(read.body)))
        if desired is None:
            return read
        body = dict(desired)
        metadata = dict(body.get("metadata") or {})
        metadata["resourceVersion"] = (read.body.get("metadata") or {}).get("resourceVersion")
        body["metadata"] = metadata
        last = await client.request("PUT", write_path or path, body)
        if last.status != 409:
            return last
    assert last is not None
    return last


__all__ = ["DEFAULT_ATTEMPTS", "Mutate", "read_modify_write"]
