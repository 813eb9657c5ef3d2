"""The hostile-object generator: reproducible from its seed, every row reachable, and the
values it calls valid are valid (so a refusal on the real server is the row's, not the
generator's)."""

from __future__ import annotations

import json
import random
import re

import pytest

from tests.hostile.cases import KINDS, Ctx, long_name
from tests.hostile.generate import DEFAULT_COUNT, generate, settings

CTX = Ctx("ab12cd34", "e2e-ab12cd34", "gpu.ab12cd34.e2e.example.com", "ab12cd34.e2e.example.com",
          ("dev-0", "dev-1"), "ab12cd34.e2e.example.com/bad")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def test_one_seed_gives_one_run() -> None:
    kinds = list(KINDS)
    first = [json.dumps(c.body, sort_keys=True) + c.op for c in generate(42, 80, CTX, kinds)]
    again = [json.dumps(c.body, sort_keys=True) + c.op for c in generate(42, 80, CTX, kinds)]
    other = [json.dumps(c.body, sort_keys=True) + c.op for c in generate(43, 80, CTX, kinds)]
    assert first == again
    assert first != other


def test_a_long_run_tries_every_row_of_every_kind_both_ways() -> None:
    kinds = list(KINDS)
    cases = generate(7, 500, CTX, kinds)
    for kind in kinds:
        assert {c.label for c in cases if c.kind == kind} == {m.label for m in KINDS[kind].mutations}, kind
    assert {c.op for c in cases} == {"create", "update"}
    assert all(c.op == "create" for c in cases if c.label.startswith("name "))


@pytest.mark.parametrize("length", [63, 200, 253, 254])
def test_long_names_are_dns_subdomains_of_the_length_asked(length: int) -> None:
    rng = random.Random(length)
    for _ in range(200):
        name = long_name(rng, CTX, length)
        assert len(name) == length and DNS_SUBDOMAIN.match(name), name
        assert all(len(label) <= 63 for label in name.split("."))


def test_some_253_character_names_put_a_dot_where_a_cut_at_242_would_end() -> None:
    rng = random.Random(1)
    assert any(long_name(rng, CTX)[:242].endswith(".") for _ in range(50))


def test_every_case_is_json_and_names_only_the_tests_driver() -> None:
    for case in generate(3, 500, CTX, list(KINDS)):
        json.dumps(case.body)
        spec = case.body.get("spec")
        if not isinstance(spec, dict) or case.expect.outcome == "refused":
            continue
        if case.kind in ("DeviceTaintRule", "DeviceHealthPolicy"):
            assert spec["deviceSelector"]["driver"] == CTX.driver, case.describe()
        if case.kind == "ResourceSlicePatch":
            assert spec["devices"]["filter"]["driver"] == CTX.driver, case.describe()


def test_seed_and_count_come_from_the_environment() -> None:
    assert settings({"DRACO_HOSTILE_SEED": "12345", "DRACO_HOSTILE_COUNT": "400"}) == (12345, 400)
    seed, count = settings({})
    assert count == DEFAULT_COUNT and seed >= 0


def test_a_wrong_enum_is_never_a_right_one() -> None:
    from tests.hostile.cases import wrong_enums
    for good in (("None", "NoSchedule", "NoExecute"), ("Unhealthy", "Unknown")):
        assert not set(v for v in wrong_enums(good) if isinstance(v, str)) & set(good)
