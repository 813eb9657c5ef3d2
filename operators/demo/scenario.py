"""The demo's example cluster, as plain API objects.

Everything the demo creates carries the label `app.kubernetes.io/part-of=draco-demo`,
so on a real cluster one label selector finds (and removes) all of it. Node names and
the namespace are parameters: the embedded server gets fixed names, a real cluster a
namespace of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PART_OF = ("app.kubernetes.io/part-of", "draco-demo")
LABEL_SELECTOR = "=".join(PART_OF)
GATE = "resource.draco.dev/allocation"  # draco's scheduling gate (operators.narrowing.DRACO_GATE)
GPU_DRIVER = "gpu.demo.example.com"
FABRIC_DRIVER = "fpga.demo.example.com"
GPU_CLASS = "demo-gpu"
FPGA_CLASS = "demo-fpga"
PATCH = "demo-premium-h100"
RULE = "demo-h100-maintenance"
# kwok plays the kubelet of nodes carrying this annotation on `hack/cluster` clusters.
KWOK_ANNOTATION = ("kwok.x-k8s.io/node", "fake")

H100 = f'device.attributes["{GPU_DRIVER}"].model == "H100"'
A100 = f'device.attributes["{GPU_DRIVER}"].model == "A100"'
# Only the ResourceSlicePatch gives a device this attribute.
PREMIUM = '"tier" in device.attributes["example.com"] && device.attributes["example.com"].tier == "premium"'


@dataclass(frozen=True)
class Names:
    namespace: str = "draco-demo"
    node_a: str = "demo-node-a"
    node_b: str = "demo-node-b"

    @property
    def fabric_pool(self) -> str:
        return "demo-fabric"


def _meta(name: str, namespace: str | None = None, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {PART_OF[0]: PART_OF[1]}}
    if namespace:
        meta["namespace"] = namespace
    meta.update(extra)
    return meta


def namespace(n: Names) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(n.namespace)}


def node(name: str, gpu: str) -> dict[str, Any]:
    meta = _meta(name, annotations={KWOK_ANNOTATION[0]: KWOK_ANNOTATION[1]})
    meta["labels"].update({"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                           "type": "kwok", "example.com/gpu": gpu})
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta,
            "status": {"allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
                       "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110"}}}


def _gpu(index: int, model: str, memory: str) -> dict[str, Any]:
    return {"name": f"gpu-{index}",
            "attributes": {"model": {"string": model}, "index": {"int": index}},
            "capacity": {"memory": {"value": memory}}}


def gpu_slice(node_name: str, model: str, memory: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": _meta(f"{node_name}-{GPU_DRIVER}"),
            "spec": {"driver": GPU_DRIVER, "nodeName": node_name,
                     "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
                     "devices": [_gpu(0, model, memory), _gpu(1, model, memory)]}}


def fabric_slice(n: Names) -> dict[str, Any]:
    """A network-attached FPGA: one device, reachable from both nodes."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": _meta(f"{n.fabric_pool}-{FABRIC_DRIVER}"),
            "spec": {"driver": FABRIC_DRIVER,
                     "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                         {"key": "kubernetes.io/hostname", "operator": "In",
                          "values": [n.node_a, n.node_b]}]}]},
                     "pool": {"name": n.fabric_pool, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": "fpga-0", "attributes": {"type": {"string": "fpga"}}}]}}


def device_class(name: str, driver: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": _meta(name),
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}}


def slice_patch() -> dict[str, Any]:
    return {"apiVersion": "resource.draco.dev/v1alpha1", "kind": "ResourceSlicePatch",
            "metadata": _meta(PATCH),
            "spec": {"devices": {"filter": {"driver": GPU_DRIVER, "selectors": [{"cel": {"expression": H100}}]},
                                 "attributes": {"example.com/tier": {"string": "premium"}}}}}


def _claim(name: str, n: Names, request: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": _meta(name, n.namespace), "spec": {"devices": {"requests": [request]}}}


def _exactly(name: str, device_class_name: str, count: int = 1, *selectors: str) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": device_class_name, "allocationMode": "ExactCount",
                               "count": count}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return {"name": name, "exactly": exactly}


def inference_claim(n: Names) -> dict[str, Any]:
    return _claim("inference", n, _exactly("gpu", GPU_CLASS, 1, PREMIUM))


def training_claim(n: Names) -> dict[str, Any]:
    """A prioritized list: two H100s if there are, else two A100s."""
    def choice(name: str, selector: str) -> dict[str, Any]:
        return {"name": name, "deviceClassName": GPU_CLASS, "allocationMode": "ExactCount", "count": 2,
                "selectors": [{"cel": {"expression": selector}}]}
    return _claim("training", n, {"name": "gpus", "firstAvailable": [choice("h100-pair", H100),
                                                                      choice("a100-pair", A100)]})


def etl_claim(n: Names) -> dict[str, Any]:
    return _claim("etl", n, _exactly("fpga", FPGA_CLASS))


def too_big_claim(n: Names) -> dict[str, Any]:
    return _claim("too-big", n, _exactly("gpus", GPU_CLASS, 3, H100))


def gated_pod(name: str, claim: str, n: Names) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": _meta(name, n.namespace),
            "spec": {"schedulingGates": [{"name": GATE}],
                     "resourceClaims": [{"name": "devices", "resourceClaimName": claim}],
                     "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"claims": [{"name": "devices"}]}}]}}


def taint_rule(effect: str, n: Names) -> dict[str, Any]:
    return {"apiVersion": "resource.draco.dev/v1alpha1", "kind": "DeviceTaintRule", "metadata": _meta(RULE),
            "spec": {"deviceSelector": {"driver": GPU_DRIVER, "pool": n.node_a},
                     "taint": {"key": "example.com/maintenance", "value": "planned", "effect": effect}}}


def devices(n: Names) -> list[dict[str, Any]]:
    """The cluster before any workload: nodes, their devices and the DeviceClasses."""
    return [node(n.node_a, "h100"), node(n.node_b, "a100"),
            gpu_slice(n.node_a, "H100", "80Gi"), gpu_slice(n.node_b, "A100", "40Gi"), fabric_slice(n),
            device_class(GPU_CLASS, GPU_DRIVER), device_class(FPGA_CLASS, FABRIC_DRIVER)]
