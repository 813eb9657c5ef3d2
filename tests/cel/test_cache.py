"""Caching: compile once per text, evaluate once per distinct value read."""

from __future__ import annotations

from operators.cel import compile_selector, stats
from operators.model.values import Attribute
from tests.cel.devices import FakeDevice

DRIVER = "gpu.example.com"


def fleet(count: int, models: int) -> list[FakeDevice]:
    return [
        FakeDevice(
            driver=DRIVER,
            attributes={
                f"{DRIVER}/model": Attribute("string", f"model-{i % models}"),
                f"{DRIVER}/uuid": Attribute("string", f"uuid-{i}"),
                f"{DRIVER}/index": Attribute("int", i % 8),
            },
            capacity={f"{DRIVER}/memory": "80Gi"},
        )
        for i in range(count)
    ]


def test_compiles_once_per_expression() -> None:
    text = f'device.driver == "{DRIVER}"'
    assert compile_selector(text) is compile_selector(text)
    assert stats.compilations == 1 and stats.compile_cache_hits == 1


def test_cache_keys_on_the_attributes_read() -> None:
    devices = fleet(400, models=5)
    selector = compile_selector(f'device.attributes["{DRIVER}"].model == "model-3"')
    assert selector.reads == frozenset({("attribute", f"{DRIVER}/model")})
    matched = [d for d in devices if selector.evaluate(d).matched]
    assert len(matched) == 80
    assert selector.evaluations == 5  # one per model, not one per device
    assert stats.evaluations == 5 and stats.cache_hits == 395


def test_uncached_path_evaluates_every_device() -> None:
    devices = fleet(50, models=5)
    selector = compile_selector(f'device.attributes["{DRIVER}"].model == "model-3"')
    results = [selector.evaluate(d, use_cache=False) for d in devices]
    assert selector.evaluations == 50
    assert results == [selector.evaluate(d) for d in devices]


def test_missing_attribute_is_part_of_the_key() -> None:
    selector = compile_selector(f'has(device.attributes["{DRIVER}"].extra)')
    with_extra = FakeDevice(DRIVER, {f"{DRIVER}/extra": Attribute("bool", True)})
    without = FakeDevice(DRIVER, {})
    assert selector.evaluate(with_extra).matched is True
    assert selector.evaluate(without).matched is False
    assert selector.evaluations == 2


def test_dynamic_reads_fall_back_to_whole_device() -> None:
    devices = fleet(20, models=2)
    selector = compile_selector(f'device.attributes["{DRIVER}"].exists(k, k == "model")')
    assert selector.reads == frozenset({("attribute-domain", DRIVER)})
    anything = compile_selector('device.attributes.exists(d, d == "x")')
    assert anything.reads is None
    for d in devices:
        assert selector.evaluate(d).matched is True
        assert anything.evaluate(d).matched is False
    # Every device has a unique uuid, so whole-domain and whole-device keys never repeat.
    assert selector.evaluations == 20 and anything.evaluations == 20


def test_compile_errors_are_cached_results_not_exceptions() -> None:
    selector = compile_selector("device.attributes[")
    assert selector.compile_error is not None
    assert selector.evaluate(fleet(1, 1)[0]).error == selector.compile_error
    assert stats.evaluations == 0


def test_ten_thousand_devices_of_twenty_models() -> None:
    devices = fleet(10_000, models=20)
    selector = compile_selector(f'device.attributes["{DRIVER}"].model == "model-7"')
    matched = sum(1 for d in devices if selector.evaluate(d).matched)
    assert matched == 500
    assert selector.evaluations == 20  # one per distinct model: the cache did the rest
