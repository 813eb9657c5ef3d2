"""Health scenarios (`--only health`): the health controller against draco's embedded
server, 10,000 devices (79 nodes x 128 GPUs).

- latency: a driver's health taint on one device -> the policy's DeviceTaintRule in the
  API, P50 and P99 over many devices, one at a time (`for: 0s`; target < 1 s).
- flapping: 1 % of the devices (100) lose and regain their taint every second for a
  minute (`clearAfter: 10m`): rule writes per real transition (target 1: each device's
  rule is written once and kept) and the controller thread's CPU (target < 10 % of a
  core), read from /proc for that thread alone (the server runs in the same process).
"""

from __future__ import annotations

import copy
import os
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from benchmarks import generate

EXPLICIT_ONLY = True  # a minute of flapping: run with --only health
XID = "gpu.nvidia.com/xid"
POLICY = {"apiVersion": "resource.draco.dev/v1alpha1", "kind": "DeviceHealthPolicy",
          "metadata": {"name": "bench"},
          "spec": {"deviceSelector": {"driver": generate.DRIVER}, "signals": [{"sliceTaint": {"key": XID}}],
                   "taint": {"key": "health.draco.dev/unhealthy", "effect": "NoSchedule"},
                   "clearAfter": "10m"}}


def _thread_cpu(native_id: int) -> float:
    """CPU seconds (user + system) of one thread of this process."""
    fields = Path(f"/proc/self/task/{native_id}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Bench:
    def __init__(self, nodes: int) -> None:
        from operators.apiserver.runner import ServerThread, kubeconfig
        from operators.cli.operator_thread import OperatorThread

        self.server = ServerThread().start()
        workdir = Path(tempfile.mkdtemp(prefix="draco-bench-"))
        (workdir / "kubeconfig").write_text(kubeconfig(self.server.url))
        os.environ["KUBECONFIG"] = str(workdir / "kubeconfig")
        self.slices = generate.cluster(nodes, 128)
        reg = self.server.server.registry
        self.slice_rt = reg.get("resource.k8s.io", "v1", "resourceslices")
        self.rule_rt = reg.get("resource.draco.dev", "v1alpha1", "devicetaintrules")

        def load() -> None:
            for s in self.slices:
                self.server.server.store.create(self.slice_rt, "", s)  # type: ignore[arg-type]
            policies = reg.get("resource.draco.dev", "v1alpha1", "devicehealthpolicies")
            self.server.server.store.create(policies, "", copy.deepcopy(POLICY))  # type: ignore[arg-type]

        self.server.call(load)
        settings = SimpleNamespace(qps=200.0, burst=400, health_debounce=0.05)
        self.op = OperatorThread(["health"], settings).start()
        self.controller = self.op.controllers["health"]
        deadline = time.monotonic() + 60
        while self.controller.passes == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)  # the initial listing and first pass are over

    def set_taints(self, node: int, failing: set[int]) -> None:
        """Node NODE's slice with the XID taint on the devices FAILING (by index)."""
        def write() -> None:
            store = self.server.server.store
            cur = store.find(self.slice_rt, "", self.slices[node]["metadata"]["name"])  # type: ignore[arg-type]
            assert cur is not None
            new = copy.deepcopy(cur)
            for i, dev in enumerate(new["spec"]["devices"]):
                if i in failing:
                    dev["taints"] = [{"key": XID, "value": "79", "effect": "NoSchedule"}]
                else:
                    dev.pop("taints", None)
            store.update(self.slice_rt, "", new["metadata"]["name"], new)  # type: ignore[arg-type]
        self.server.call(write)

    def rules(self) -> int:
        return int(self.server.call(lambda: sum(1 for _ in self.server.server.store.iter(
            self.rule_rt, None))))  # type: ignore[arg-type]

    def stop(self) -> None:
        self.op.stop()
        self.server.stop()


def latency(bench: Bench, samples: int) -> list[float]:
    """Node 0 is the flapping scenario's; the samples spread over the other nodes."""
    out = []
    failing: dict[int, set[int]] = {}
    others = len(bench.slices) - 1
    for k in range(samples):
        node = 1 + k % others
        failing.setdefault(node, set()).add(k // others)
        before = bench.rules()
        started = time.perf_counter()
        bench.set_taints(node, failing[node])
        while bench.rules() == before and time.perf_counter() - started < 10:
            time.sleep(0.002)
        out.append(time.perf_counter() - started)
    return sorted(out)


def flapping(bench: Bench, seconds: int) -> dict[str, float]:
    """Devices 0..99 of node 0 flap every second; returns writes and CPU."""
    thread = next(t for t in threading.enumerate() if t.name == "draco-operator")
    assert thread.native_id is not None
    writes_before = bench.controller.rule_writes
    cpu_before = _thread_cpu(thread.native_id)
    started = time.perf_counter()
    flapping_devices = set(range(100))
    transitions = 0
    for second in range(seconds):
        bench.set_taints(0, flapping_devices if second % 2 == 0 else set())
        transitions += len(flapping_devices)
        next_tick = started + second + 1
        time.sleep(max(0.0, next_tick - time.perf_counter()))
    elapsed = time.perf_counter() - started
    cpu = _thread_cpu(thread.native_id) - cpu_before
    return {"writes": bench.controller.rule_writes - writes_before, "unhealthy_devices": len(flapping_devices),
            "signal_changes": transitions, "cpu_fraction": cpu / elapsed}


def run(quick: bool) -> list[dict[str, Any]]:
    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    logging.getLogger("kopf").setLevel(logging.ERROR)
    bench = Bench(10 if quick else 79)
    try:
        lat = latency(bench, 8 if quick else 40)
        time.sleep(1.0)  # the last sample's write is counted before the flapping starts
        flap = flapping(bench, 10 if quick else 60)
    finally:
        bench.stop()
    p50, p99 = lat[len(lat) // 2], lat[min(len(lat) - 1, int(len(lat) * 0.99))]
    devices = len(bench.slices) * 128
    return [
        {"scenario": f"health: slice taint -> rule, {devices} devices", "draco_s": p50, "baseline_s": p99,
         "ratio": p99 / p50, "note": f"P50 {p50 * 1000:.0f} ms, P99 {p99 * 1000:.0f} ms over {len(lat)} devices "
                                     "(draco_s = P50, baseline_s = P99); target < 1 s"},
        {"scenario": f"health: 1 % of {devices} devices flapping every second",
         "draco_s": flap["cpu_fraction"], "baseline_s": 0.10, "ratio": 0.10 / max(flap["cpu_fraction"], 1e-9),
         "note": f"{flap['writes']} rule writes for {flap['unhealthy_devices']} devices turning unhealthy "
                 f"({flap['writes'] / flap['unhealthy_devices']:.2f} per transition, target 1) over "
                 f"{flap['signal_changes']} signal changes; controller thread CPU "
                 f"{flap['cpu_fraction'] * 100:.1f} % of a core (draco_s; baseline_s = the 10 % target)"},
    ]
