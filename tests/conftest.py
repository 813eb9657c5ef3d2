"""Shared fixtures: the embedded API server and the real kubectl against it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from operators.apiserver.testing import EmbeddedCluster, Kubectl


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[EmbeddedCluster]:
    """A fresh embedded API server serving draco's CRDs, stopped after the test."""
    c = EmbeddedCluster(tmp_path)
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def kubectl(cluster: EmbeddedCluster) -> Kubectl:
    return cluster.kubectl
