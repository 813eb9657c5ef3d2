"""Every CEL test starts with empty caches and zeroed counters."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from operators.cel import clear_caches, stats


@pytest.fixture(autouse=True)

def fresh_caches() -> Iterator[None]:
    clear_caches()
    stats.reset()
    yield
    clear_caches()
