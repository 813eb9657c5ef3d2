"""The per-DeviceTaintRule metrics follow the rule: made when the controller sees it, they
count its evictions and mirror its EvictionInProgress condition, and go with it."""

from __future__ import annotations

from typing import Any

from prometheus_client import REGISTRY

from operators.apiserver.testing import EmbeddedCluster, Kubectl, wait_for
from operators.eviction import metrics
from tests.eviction.test_controller import (  # noqa: F401  (operator: a fixture)
    condition,
    make_devices,
    make_pod_with_claim,
    operator,
    pod_exists,
    rule,
)

DRIVER = "gpu.example.com"  # make_devices' driver


def sample(name: str, rule_name: str, driver: str = DRIVER) -> float | None:
    return REGISTRY.get_sample_value(name, {"rule": rule_name, "driver": driver})


def test_a_rules_series_count_its_evictions_and_go_with_it(cluster: EmbeddedCluster, kubectl: Kubectl,
                                                          operator: Any) -> None:  # noqa: F811
    make_devices(cluster, ["d0", "d1"])
    make_pod_with_claim(cluster, "a", "d0")
    make_pod_with_claim(cluster, "b", "d1")
    operator()
    kubectl("apply", "-f", "-", input=rule("metrics-maint", "NoExecute", {"driver": DRIVER, "device": "d0"}))
    kubectl("apply", "-f", "-", input=rule("metrics-preview", "None", {"driver": DRIVER}))
    kubectl("wait", "--for=condition=EvictionInProgress=false", "devicetaintrule/metrics-maint", "--timeout=30s")
    assert not pod_exists(cluster, "a") and pod_exists(cluster, "b")
    assert sample("draco_device_taint_rule_pods_evicted_total", "metrics-maint") == 1
    assert sample("draco_device_taint_rule_pods_pending", "metrics-maint") == 0
    assert sample("draco_device_taint_rule_eviction_in_progress", "metrics-maint") == 0
    # effect None: the what-if count is the condition's, not a pending eviction
    wait_for(lambda: condition(cluster, "metrics-preview"), 15, what="the preview's condition")
    assert sample("draco_device_taint_rule_pods_pending", "metrics-preview") == 0
    assert sample("draco_device_taint_rule_pods_evicted_total", "metrics-preview") == 0
    kubectl("delete", "devicetaintrule", "metrics-maint")
    wait_for(lambda: sample("draco_device_taint_rule_pods_evicted_total", "metrics-maint") is None, 15,
             what="the deleted rule's series to go")
    assert sample("draco_device_taint_rule_eviction_in_progress", "metrics-maint") is None
    assert sample("draco_device_taint_rule_eviction_in_progress", "metrics-preview") == 0


def test_a_rule_moves_to_its_driver_and_is_removed_whole() -> None:
    metrics.rule_evicted("metrics-early")  # evicted for before its first status pass
    assert sample("draco_device_taint_rule_pods_evicted_total", "metrics-early", "") == 1
    metrics.rule_seen("metrics-early", "gpu.example.org")
    assert sample("draco_device_taint_rule_pods_evicted_total", "metrics-early", "") is None
    metrics.rule_condition("metrics-early", 3, True)
    assert sample("draco_device_taint_rule_pods_pending", "metrics-early", "gpu.example.org") == 3
    assert sample("draco_device_taint_rule_eviction_in_progress", "metrics-early", "gpu.example.org") == 1
    metrics.rule_seen("metrics-early", "gpu.example.org")  # unchanged: nothing reset
    assert sample("draco_device_taint_rule_pods_pending", "metrics-early", "gpu.example.org") == 3
    metrics.rule_gone("metrics-early")
    for name in ("draco_device_taint_rule_pods_pending", "draco_device_taint_rule_pods_evicted_total",
                 "draco_device_taint_rule_eviction_in_progress"):
        assert sample(name, "metrics-early", "gpu.example.org") is None
    metrics.rule_gone("metrics-never-seen")  # nothing to remove: no error
