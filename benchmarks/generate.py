"""Realistic synthetic clusters for the benchmarks.

Shaped like a GPU fleet: N nodes, each with one ResourceSlice per driver holding its
devices; devices come in a handful of models (so model-keyed caches have something to
hit) but also carry per-device unique attributes such as UUIDs (so caches keyed by
device identity do not).
"""

from __future__ import annotations

import random
from typing import Any

MODELS: tuple[tuple[str, str, int], ...] = tuple(
    (f"{family}-{variant}", f"{550 + i % 5}.{i % 3}.{i}", mem)
    for i, (family, variant, mem) in enumerate(
        [
            ("H100", "SXM", 80), ("H100", "PCIe", 80), ("H200", "SXM", 141), ("A100", "SXM", 80),
            ("A100", "PCIe", 40), ("L40S", "PCIe", 48), ("L4", "PCIe", 24), ("A10", "PCIe", 24),
            ("B200", "SXM", 192), ("MI300X", "OAM", 192), ("MI250", "OAM", 128), ("T4", "PCIe", 16),
            ("V100", "SXM", 32), ("A30", "PCIe", 24), ("A40", "PCIe", 48), ("GH200", "SXM", 96),
            ("RTX6000", "PCIe", 48), ("A2", "PCIe", 16), ("MI210", "PCIe", 64), ("GB200", "SXM", 192),
        ]
    )
)

DRIVER = "gpu.example.com"


def device(index: int, model_index: int, rng: random.Random) -> dict[str, Any]:
    model, driver_version, memory = MODELS[model_index % len(MODELS)]
    return {
        "name": f"gpu-{index}",
        "attributes": {
            "model": {"string": model},
            "index": {"int": index},
            "driverVersion": {"version": driver_version},
            "uuid": {"string": f"GPU-{rng.getrandbits(64):016x}"},
            "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{index % 4 * 0x40:02x}"},
        },
        "capacity": {"memory": {"value": f"{memory}Gi"}},
    }


def resource_slice(
    node: str, devices_per_node: int, model_index: int, rng: random.Random, generation: int = 1
) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}", "uid": f"uid-slice-{node}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
            "devices": [device(i, model_index, rng) for i in range(devices_per_node)],
        },
    }


def cluster(
    nodes: int, devices_per_node: int, models: int = 20, seed: int = 1
) -> list[dict[str, Any]]:
    """ResourceSlices for `nodes` nodes; each node's devices share one of `models` models."""
    rng = random.Random(seed)
    return [
        resource_slice(f"node-{n:05d}", devices_per_node, n % models, rng) for n in range(nodes)
    ]


def claims_and_pods(
    slices: list[dict[str, Any]], per_device: bool = True, namespace: str = "bench"
) -> list[dict[str, Any]]:
    """One allocated claim and one running pod using it for every device in `slices`."""
    objects: list[dict[str, Any]] = []
    n = 0
    for s in slices:
        spec = s["spec"]
        for dev in spec["devices"]:
            n += 1
            claim_name, pod_name = f"claim-{n}", f"pod-{n}"
            pod_uid = f"uid-pod-{n}"
            objects.append({
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": claim_name, "namespace": namespace, "uid": f"uid-claim-{n}"},
                "spec": {"devices": {"requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}
                ]}},
                "status": {
                    "allocation": {"devices": {"results": [{
                        "request": "gpu", "driver": spec["driver"],
                        "pool": spec["pool"]["name"], "device": dev["name"],
                    }]}},
                    "reservedFor": [{"resource": "pods", "name": pod_name, "uid": pod_uid}],
                },
            })
            objects.append({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": pod_name, "namespace": namespace, "uid": pod_uid},
                "spec": {
                    "nodeName": spec.get("nodeName"),
                    "resourceClaims": [{"name": "gpu", "resourceClaimName": claim_name}],
                    "containers": [{"name": "main", "image": "example.com/app:1"}],
                },
                "status": {"phase": "Running"},
            })
    return objects
