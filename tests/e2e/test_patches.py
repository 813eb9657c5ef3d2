"""The ResourceSlicePatch reporter end to end, on the embedded server and a real one.

Objects are applied and read back with the real kubectl; the reporter's condition,
`matchedDevices` and Events must come out the same on both servers.
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import yaml

from operators.apiserver.testing import wait_for
from tests.e2e.backends import Backend

SETTINGS = SimpleNamespace(qps=200.0, burst=400, patches_debounce=0.05)


def slice_obj(driver: str, name: str, pool: str, devices: list[dict[str, Any]],
              generation: int = 1) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
            "spec": {"driver": driver, "nodeName": pool,
                     "pool": {"name": pool, "generation": generation, "resourceSliceCount": 1},
                     "devices": devices}}


def class_obj(name: str, selectors: list[str]) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": e}} for e in selectors]}}


def patch_obj(name: str, filter: dict[str, Any] | None = None,
              attributes: dict[str, Any] | None = None) -> dict[str, Any]:
    devices: dict[str, Any] = {}
    if filter is not None:
        devices["filter"] = {**filter, **({"selectors": [{"cel": {"expression": s}}
                                                         for s in filter["selectors"]]}
                                          if "selectors" in filter else {})}
    if attributes:
        devices["attributes"] = attributes
    return {"apiVersion": "resource.draco.dev/v1alpha1", "kind": "ResourceSlicePatch",
            "metadata": {"name": name}, "spec": {"devices": devices}}


def gpus(n: int, model: str = "H100") -> list[dict[str, Any]]:
    return [{"name": f"gpu-{i}", "attributes": {"model": {"string": model}}} for i in range(n)]


def apply(b: Backend, *objs: dict[str, Any]) -> None:
    for obj in objs:
        b.kubectl("apply", "-f", "-", input=yaml.safe_dump(obj))


def patch_json(b: Backend, name: str) -> dict[str, Any]:
    return dict(json.loads(b.kubectl("get", "rsp", name, "-o", "json").stdout))


def faulty_condition(b: Backend, name: str) -> dict[str, Any] | None:
    status = patch_json(b, name).get("status") or {}
    return next((c for c in status.get("conditions", ()) if c["type"] == "Faulty"), None)


def events_of(b: Backend, name: str) -> list[dict[str, Any]]:
    uid = patch_json(b, name)["metadata"]["uid"]
    return [e for e in b.events("default") if e["involvedObject"].get("uid") == uid]


def test_a_faulty_patch_gets_its_event_and_condition_and_fixing_it_clears_them(
        backend: Backend, operator: Any) -> None:
    gpu = backend.driver
    operator(("patches",), SETTINGS)
    apply(backend, slice_obj(gpu, "node-a-gpu", "node-a", gpus(6)))
    bad = f'device.attributes["{gpu}"].memory > 40'
    apply(backend, patch_obj("big", filter={"driver": gpu, "selectors": [bad]},
                             attributes={"example.com/big": {"bool": True}}))
    cond = wait_for(lambda: faulty_condition(backend, "big"), 20, what="the Faulty condition")
    assert (cond["status"], cond["reason"], cond["observedGeneration"]) == (
        "True", "SelectorFailed", 1)
    assert bad in cond["message"] and "no such key: memory" in cond["message"]
    (event,) = wait_for(lambda: events_of(backend, "big"), 20, what="the Event")
    assert event["reason"] == "SelectorFailed" and event["type"] == "Warning"
    assert "failed on 6 devices" in event["message"] and f"{gpu}/node-a/gpu-0" in event["message"]
    assert patch_json(backend, "big")["status"]["matchedDevices"] == 0

    good = f'device.attributes["{gpu}"].model == "H100"'
    apply(backend, patch_obj("big", filter={"driver": gpu, "selectors": [good]},
                             attributes={"example.com/big": {"bool": True}}))
    cond = wait_for(lambda: (c := faulty_condition(backend, "big")) and c["status"] == "False"
                    and c, 20, what="the condition to clear")
    assert (cond["reason"], cond["observedGeneration"]) == ("NoFaults", 2)
    assert patch_json(backend, "big")["status"]["matchedDevices"] == 6
    backend.kubectl("wait", "rsp/big", "--for=condition=Faulty=False", "--timeout=20s")
    assert len(events_of(backend, "big")) == 1


def test_matched_devices_follow_slice_changes(backend: Backend, operator: Any) -> None:
    gpu = backend.driver
    operator(("patches",), SETTINGS)
    apply(backend, patch_obj("h100", filter={"driver": gpu, "selectors": [
        f'device.attributes["{gpu}"].model == "H100"']}))
    apply(backend, slice_obj(gpu, "node-a-gpu", "node-a", gpus(4)))

    def matched() -> Any:
        return (patch_json(backend, "h100").get("status") or {}).get("matchedDevices")

    wait_for(lambda: matched() == 4, 20, what="4 matched devices")
    apply(backend, slice_obj(gpu, "node-b-gpu", "node-b", gpus(3)))
    wait_for(lambda: matched() == 7, 20, what="7 matched devices")
    apply(backend, slice_obj(gpu, "node-a-gpu", "node-a", gpus(4, model="A100"), generation=2))
    wait_for(lambda: matched() == 3, 20, what="3 matched devices")
    backend.kubectl("delete", "resourceslice", "node-b-gpu")
    wait_for(lambda: matched() == 0, 20, what="no matched devices")
    out = backend.kubectl("get", "rsp", "h100").stdout
    assert out.split("\n")[0].split() == ["NAME", "PRIORITY", "FILTER", "MATCHED", "AGE"]


def test_bad_input_is_reported_and_a_class_that_appears_is_found(
        backend: Backend, operator: Any) -> None:
    gpu = backend.driver
    operator(("patches",), SETTINGS)
    apply(backend, slice_obj(gpu, "node-a-gpu", "node-a", gpus(2)),
          class_obj("broken", [f'device.attributes["{gpu}"].nope == 1']))
    apply(backend,
          patch_obj("syntax", filter={"driver": gpu, "selectors": ["device.driver =="]}),
          patch_obj("ghost", filter={"driver": gpu, "deviceClassName": "no-such-class"}),
          patch_obj("via-broken-class", filter={"driver": gpu, "deviceClassName": "broken"}))
    # The CRD's CEL rule refuses unqualified names before any controller sees them.
    refused = backend.kubectl("apply", "-f", "-", check=False, input=yaml.safe_dump(
        patch_obj("short-name", filter={"driver": gpu}, attributes={"model": {"string": "x"}})))
    assert refused.returncode != 0
    assert "attribute names must be fully qualified (domain/name)" in refused.stderr

    def reason(name: str) -> str | None:
        c = faulty_condition(backend, name)
        return c["reason"] if c else None

    wait_for(lambda: reason("syntax") == "InvalidSelector", 20, what="InvalidSelector")
    wait_for(lambda: reason("ghost") == "DeviceClassNotFound", 20, what="DeviceClassNotFound")
    wait_for(lambda: reason("via-broken-class") == "NoFaults", 20, what="NoFaults for the class")
    cond = faulty_condition(backend, "syntax")
    assert cond is not None and "does not compile" in cond["message"]
    assert "no-such-class" in (faulty_condition(backend, "ghost") or {})["message"]
    (event,) = wait_for(lambda: events_of(backend, "syntax"), 20, what="the syntax Event")
    assert event["reason"] == "InvalidSelector"
    assert events_of(backend, "via-broken-class") == []
    apply(backend, class_obj("no-such-class", [f'device.driver == "{gpu}"']))
    wait_for(lambda: reason("ghost") == "NoFaults", 20, what="the class to be found")
    assert patch_json(backend, "ghost")["status"]["matchedDevices"] == 2
