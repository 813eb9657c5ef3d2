"""Shared fixtures: the embedded API server and the real kubectl against it."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from operators.apiserver.testing import EmbeddedCluster, Kubectl
from tests import ordering, timing

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


def pytest_configure(config: pytest.Config) -> None:
    timing.configure(config)
    ordering.schedule(config)
    # kubectl caches each server's discovery for hours under ~/.kube/cache, keyed by
    # host:port; the test clusters' ports are free-chosen, so a 1.34 cluster on a port
    # an earlier 1.37 had used read 1.37's resource list from that cache and asked for
    # resource.k8s.io/v1 devicetaintrules (404; the demo test failed in a cold trial).
    # Every kubectl of this process and its children caches in a folder of its own.
    cache = tempfile.mkdtemp(prefix="draco-kube-cache-")
    os.environ["KUBECACHEDIR"] = cache
    atexit.register(shutil.rmtree, cache, True)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> Iterator[None]:
    """Order (and group) the items before any other plugin's hook: xdist's worker reads
    the xdist_group marks in its own, and a plain tryfirst hook here runs after it. The
    on-request releases' marks go on first, before `-m` deselects by them."""
    ordering.mark_on_request(items)
    ordering.order(items)
    return (yield)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """Wait for the builds a test needs outside (before) pytest-timeout's clock."""
    reporter = item.config.pluginmanager.get_plugin("terminalreporter")
    ordering.wait_for_builds(item, lambda text: reporter.write_line(text) if reporter else None)
    yield


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    timing.record(report)


def pytest_terminal_summary(terminalreporter: object, config: pytest.Config) -> None:
    timing.summary(terminalreporter, config)
