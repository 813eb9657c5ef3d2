"""Embedded API server: listing 10,000 objects and fanning watch events out to 4 watchers.

Baseline for the list: a store that deep-copies every object per request (what a naive
in-memory server does to stay safe from callers mutating its state); draco's store
never mutates stored objects, so it serializes them directly.
"""

from __future__ import annotations

import copy
import json
import threading
import time
import urllib.request
from typing import Any

from operators.apiserver.runner import ServerThread


def _pod(i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"pod-{i:05d}", "labels": {"app": f"a{i % 10}"}},
            "spec": {"nodeName": f"node-{i % 100}", "containers": [{"name": "c", "image": "example.com/app:1"}]},
            "status": {"phase": "Running"}}


def run(quick: bool) -> list[dict[str, Any]]:
    count = 2_000 if quick else 10_000
    server = ServerThread(crds=[]).start()
    rt_pods = server.server.registry.get("", "v1", "pods")

    def load() -> None:
        for i in range(count):
            server.server.store.create(rt_pods, "default", _pod(i))  # type: ignore[arg-type]

    server.call(load)
    url = f"{server.url}/api/v1/pods"
    samples = []
    for _ in range(3):
        started = time.perf_counter()
        with urllib.request.urlopen(url) as resp:
            items = json.load(resp)["items"]
        samples.append(time.perf_counter() - started)
        assert len(items) == count
    list_s = min(samples)

    def naive() -> bytes:
        objs = [copy.deepcopy(o) for _, o in server.server.store.iter(rt_pods, None)]  # type: ignore[arg-type]
        return json.dumps({"items": objs}).encode()

    started = time.perf_counter()
    server.call(naive)
    naive_s = time.perf_counter() - started + list_s

    # Watch fan-out: 4 watchers, `events` ConfigMap creations.
    events = 1_000 if quick else 4_000
    rt_cm = server.server.registry.get("", "v1", "configmaps")
    received = [0] * 4
    ready = threading.Barrier(5)

    def watcher(index: int) -> None:
        with urllib.request.urlopen(f"{server.url}/api/v1/namespaces/default/configmaps?watch=1"
                                    f"&resourceVersion={server.server.store.rv}&timeoutSeconds=60") as resp:
            ready.wait()
            for line in resp:
                if line.strip():
                    received[index] += 1
                if received[index] >= events:
                    return

    threads = [threading.Thread(target=watcher, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.3)

    def write() -> None:
        for i in range(events):
            server.server.store.create(rt_cm, "default", {"metadata": {"name": f"cm-{i}"}, "data": {"k": "v"}})  # type: ignore[arg-type]

    ready.wait()
    started = time.perf_counter()
    server.call(write)
    for t in threads:
        t.join(60)
    fanout_s = time.perf_counter() - started
    server.stop()
    rate = min(received) / fanout_s
    return [
        {"scenario": f"apiserver list {count} pods over HTTP", "draco_s": list_s, "baseline_s": naive_s,
         "ratio": naive_s / list_s, "note": "target < 1 s; baseline: deep copy per request"},
        {"scenario": f"apiserver {events} watch events to 4 watchers", "draco_s": fanout_s,
         "baseline_s": None, "ratio": None,
         "note": f"{rate:.0f} events/s per watcher (target >= 1000)"},
    ]
