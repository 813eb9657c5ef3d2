"""operators.model.semver against semver_cases.yaml."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from operators.model.semver import Semver, is_semver

DATA: dict[str, Any] = yaml.safe_load((Path(__file__).parent / "semver_cases.yaml").read_text())


@pytest.mark.parametrize("text", DATA["valid"])
def test_valid(text: str) -> None:
    assert is_semver(text)
    assert str(Semver.parse(text)) == text


@pytest.mark.parametrize("text", DATA["invalid"])
def test_invalid(text: str) -> None:
    assert not is_semver(text)
    with pytest.raises(ValueError):
        Semver.parse(text)


@pytest.mark.parametrize(("text", "expected"), sorted(DATA["normalized"].items()))
def test_normalized(text: str, expected: str | None) -> None:
    if expected is None:
        assert not is_semver(text, normalize=True)
    else:
        assert str(Semver.parse(text, normalize=True)) == expected


def test_ordering() -> None:
    versions = [Semver.parse(v) for v in DATA["ordering"]]
    for low, high in zip(versions, versions[1:], strict=False):
        assert low.compare(high) == -1 and high.compare(low) == 1
    assert sorted(reversed(versions)) == versions
