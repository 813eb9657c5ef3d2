"""Which kinds `draco run` feeds into the tracker depends on the controllers chosen: the
allocator alone must still see ResourceSlicePatches (admin-set attributes count in its
device view), and with the patch reporter running they are fed exactly once."""

from __future__ import annotations

from collections import Counter

import pytest

from operators.cli.main import build_parser
from operators.cli.run import build


def watched_plurals(controllers: list[str]) -> Counter[str]:
    settings = build_parser().parse_args(["run"])
    registry, _, _ = build(controllers, settings)
    selectors = (h.selector for h in registry._watching.get_all_handlers())
    return Counter(str(s.plural or s.any_name) for s in selectors if s is not None)


@pytest.mark.parametrize(("controllers", "patches_watches"), [
    (["allocator"], 1),
    (["allocator", "patches"], 1),
    (["patches"], 1),
    (["eviction", "narrowing"], 0),
])
def test_resourceslicepatches_reach_the_tracker_once_when_the_view_needs_them(
        controllers: list[str], patches_watches: int) -> None:
    assert watched_plurals(controllers)["resourceslicepatches"] == patches_watches
