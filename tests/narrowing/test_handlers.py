"""The kopf wiring of the narrowing controller: a Node watch feeding its node cache, and
kopf's per-event diff base off while no handler needs it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import kopf

from operators.cli.state import build_tracker
from operators.narrowing.handlers import NoDiffBase, register, skip_diffbase


def test_the_controller_watches_nodes_and_lists_them_before_its_first_decision() -> None:
    registry = kopf.OperatorRegistry()
    controller = register(registry, build_tracker([]), SimpleNamespace(), client=object())  # type: ignore[arg-type]
    watched = {(h.selector.group, h.selector.version, h.selector.plural)  # type: ignore[union-attr]
               for h in registry._watching.get_all_handlers()}
    assert ("", "v1", "nodes") in watched
    assert controller.nodes == {}


def test_the_diff_base_goes_only_when_no_handler_reads_it() -> None:
    plain = kopf.OperatorRegistry()
    kopf.on.event("", "v1", "pods", registry=plain)(lambda **_: None)
    settings = kopf.OperatorSettings()
    assert skip_diffbase(plain, settings)
    assert isinstance(settings.persistence.diffbase_storage, NoDiffBase)
    assert settings.persistence.diffbase_storage.build(body={"spec": {"a": 1}}) is None  # type: ignore[arg-type]

    changing = kopf.OperatorRegistry()

    def on_update(**_: Any) -> None:
        return None

    kopf.on.update("", "v1", "pods", registry=changing)(on_update)
    kept = kopf.OperatorSettings()
    assert not skip_diffbase(changing, kept)
    assert not isinstance(kept.persistence.diffbase_storage, NoDiffBase)
