"""How draco reads a device that spells a name both short and with its driver's domain.

Kubernetes 1.38 reads such a device with the qualified entry winning (whichever order
the map lists them in), and remembers which capacities the device spelled with its
driver's domain so that consumedCapacity can be written the same way. Releases
before 1.38 are refused by the allocator from `spelled_twice` (tests/allocator's
table pins both); the model itself reads every release the same.
"""

from __future__ import annotations

from typing import Any

import pytest

from operators.model import parse_resource_slice
from operators.model.devices import Device

DRIVER = "gpu.example.com"


def _device(**fields: Any) -> Device:
    obj = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
           "metadata": {"name": "s"},
           "spec": {"driver": DRIVER, "allNodes": True,
                    "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                    "devices": [{"name": "gpu", **fields}]}}
    return parse_resource_slice(obj).devices[0]


def _cap(value: str, policy: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"value": value} if policy is None else {"value": value, "requestPolicy": policy}


# capacity as published -> (values read, spelled twice, spelled with the driver's domain)
CAPACITY_CASES = [
    ("short only", {"memory": _cap("8Gi")},
     {f"{DRIVER}/memory": "8Gi"}, (), set()),
    ("qualified only", {f"{DRIVER}/memory": _cap("8Gi")},
     {f"{DRIVER}/memory": "8Gi"}, (), {f"{DRIVER}/memory"}),
    ("short, then qualified: qualified wins", {"memory": _cap("1Gi"), f"{DRIVER}/memory": _cap("4Gi")},
     {f"{DRIVER}/memory": "4Gi"}, ("capacity gpu.example.com/memory",), {f"{DRIVER}/memory"}),
    ("qualified, then short: qualified wins", {f"{DRIVER}/memory": _cap("4Gi"), "memory": _cap("1Gi")},
     {f"{DRIVER}/memory": "4Gi"}, ("capacity gpu.example.com/memory",), {f"{DRIVER}/memory"}),
    ("another domain is no second spelling", {"memory": _cap("1Gi"), "other.example.com/memory": _cap("4Gi")},
     {f"{DRIVER}/memory": "1Gi", "other.example.com/memory": "4Gi"}, (), set()),
    ("an unrelated qualified capacity leaves the short one short",
     {"memory": _cap("1Gi"), f"{DRIVER}/cores": _cap("4")},
     {f"{DRIVER}/memory": "1Gi", f"{DRIVER}/cores": "4"}, (), {f"{DRIVER}/cores"}),
]


@pytest.mark.parametrize(("published", "values", "twice", "domain_spelled"),
                         [pytest.param(*c[1:], id=c[0]) for c in CAPACITY_CASES])
def test_capacity_spellings(published: dict[str, Any], values: dict[str, str],
                            twice: tuple[str, ...], domain_spelled: set[str]) -> None:
    d = _device(capacity=published)
    assert dict(d.capacity) == values
    assert d.spelled_twice == twice
    assert d.domain_spelled == domain_spelled


@pytest.mark.parametrize("order", ["short first", "qualified first"])
def test_the_qualified_entrys_request_policy_wins_and_may_be_none(order: str) -> None:
    short = _cap("40Gi", {"default": "1Gi", "validValues": ["1Gi", "8Gi"]})
    qualified = _cap("40Gi")
    published = ({"memory": short, f"{DRIVER}/memory": qualified} if order == "short first"
                 else {f"{DRIVER}/memory": qualified, "memory": short})
    assert dict(_device(capacity=published).capacity_policies) == {}
    published[f"{DRIVER}/memory"] = _cap("40Gi", {"default": "2Gi"})
    policy = _device(capacity=published).capacity_policies[f"{DRIVER}/memory"]
    assert str(policy.default) == "2Gi" and policy.valid_values == ()


def test_attributes_spelled_twice_read_the_qualified_value() -> None:
    d = _device(attributes={"model": {"string": "A100"}, f"{DRIVER}/model": {"string": "H100"}})
    assert d.attributes[f"{DRIVER}/model"].value == "H100"
    assert d.spelled_twice == ("attribute gpu.example.com/model",)
    assert d.domain_spelled == frozenset()  # only capacities are written back


def test_attributes_and_capacity_twice_are_both_named() -> None:
    d = _device(attributes={f"{DRIVER}/model": {"string": "H100"}, "model": {"string": "A100"}},
                capacity={"memory": _cap("1Gi"), f"{DRIVER}/memory": _cap("4Gi")})
    assert d.spelled_twice == ("attribute gpu.example.com/model", "capacity gpu.example.com/memory")
