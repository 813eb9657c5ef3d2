"""Shared fixtures: the embedded API server and the real kubectl against it."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from operators.apiserver.testing import EmbeddedCluster, Kubectl

# An operator thread a test could not stop within its join timeout keeps logging; with
# structlog's default (stdout) its lines would land in a later test's captured JSON
# output. draco's logs belong on stderr anyway, as `draco run` configures them.
structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))


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
