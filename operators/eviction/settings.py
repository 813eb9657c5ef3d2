"""The eviction controller's knobs (`draco run` flags map onto these)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class EvictionSettings:
    workers: int = 32
    grace_period: float = 5.0  # seconds before a condition may become False
    status_interval: float = 1.0  # at most one status write per rule per interval
    use_eviction_api: bool = False  # policy/v1 Eviction, honouring PodDisruptionBudgets
    evictions_per_second: float = 0.0  # 0: only the client's QPS limits evictions
    retry_after: float = 5.0  # when the Eviction API refuses (PDB) or a write fails
    slice_taints: str = "auto"  # auto | draco | upstream: who evicts for ResourceSlice taints
    upstream_grace: float = 30.0  # seconds draco waits for upstream to evict a pod it left to it
    full_replan: bool = False  # re-plan every claim on every pass (the benchmarks' baseline)
