"""The reporter on the embedded API server, driven and observed with the real kubectl."""

from __future__ import annotations

import json
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from patch_builders import class_obj, patch_obj, slice_obj

from operators.apiserver.testing import EmbeddedCluster, Kubectl, wait_for
from operators.cli.operator_thread import OperatorThread
from operators.patches.reporter import PatchReporter

GPU = "gpu.example.com"
SETTINGS = SimpleNamespace(qps=200.0, burst=400, patches_debounce=0.05)


@pytest.fixture
def operator(cluster: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch) -> Iterator[PatchReporter]:
    """`draco run --controllers patches` against the embedded server."""
    monkeypatch.setenv("KUBECONFIG", str(cluster.kubeconfig))
    op = OperatorThread(["patches"], SETTINGS).start()
    try:
        yield op.controllers["patches"]
    finally:
        op.stop()


def apply(kubectl: Kubectl, *objs: dict[str, Any]) -> None:
    for obj in objs:
        obj = {**obj, "metadata": {k: v for k, v in obj["metadata"].items()
                                   if k in ("name", "labels")}}
        kubectl("apply", "-f", "-", input=yaml.safe_dump(obj))


def gpus(n: int, model: str = "H100") -> list[dict[str, Any]]:
    return [{"name": f"gpu-{i}", "attributes": {"model": {"string": model}}} for i in range(n)]


def patch_json(kubectl: Kubectl, name: str) -> dict[str, Any]:
    return json.loads(kubectl("get", "rsp", name, "-o", "json").stdout)


def faulty_condition(kubectl: Kubectl, name: str) -> dict[str, Any] | None:
    status = patch_json(kubectl, name).get("status") or {}
    return next((c for c in status.get("conditions", ()) if c["type"] == "Faulty"), None)


def events_of(kubectl: Kubectl, name: str) -> list[dict[str, Any]]:
    items = json.loads(kubectl("get", "events", "-n", "default", "-o", "json").stdout)["items"]
    return [e for e in items if e["involvedObject"].get("name") == name
            and e["involvedObject"].get("kind") == "ResourceSlicePatch"]


def test_a_faulty_patch_gets_its_event_and_condition_and_fixing_it_clears_them(
    kubectl: Kubectl, operator: PatchReporter
) -> None:
    apply(kubectl, slice_obj("node-a-gpu", GPU, "node-a", gpus(6)))
    bad = f'device.attributes["{GPU}"].memory > 40'
    apply(kubectl, patch_obj("big", filter={"selectors": [bad]},
                             attributes={"example.com/big": {"bool": True}}))
    cond = wait_for(lambda: faulty_condition(kubectl, "big"), what="the Faulty condition")
    assert (cond["status"], cond["reason"], cond["observedGeneration"]) == (
        "True", "SelectorFailed", 1)
    assert bad in cond["message"] and "no such key: memory" in cond["message"]
    (event,) = wait_for(lambda: events_of(kubectl, "big"), what="the Event")
    assert event["reason"] == "SelectorFailed" and event["type"] == "Warning"
    assert "failed on 6 devices" in event["message"] and f"{GPU}/node-a/gpu-0" in event["message"]
    assert patch_json(kubectl, "big")["status"]["matchedDevices"] == 0

    good = f'device.attributes["{GPU}"].model == "H100"'
    apply(kubectl, patch_obj("big", filter={"selectors": [good]},
                             attributes={"example.com/big": {"bool": True}}))
    cond = wait_for(lambda: (c := faulty_condition(kubectl, "big")) and c["status"] == "False"
                    and c, what="the condition to clear")
    assert (cond["reason"], cond["observedGeneration"]) == ("NoFaults", 2)
    assert patch_json(kubectl, "big")["status"]["matchedDevices"] == 6
    kubectl("wait", "rsp/big", "--for=condition=Faulty=False", "--timeout=10s")
    assert len(events_of(kubectl, "big")) == 1


def test_matched_devices_follow_slice_changes(kubectl: Kubectl, operator: PatchReporter) -> None:
    apply(kubectl, patch_obj("h100", filter={"driver": GPU, "selectors": [
        f'device.attributes["{GPU}"].model == "H100"']}))
    apply(kubectl, slice_obj("node-a-gpu", GPU, "node-a", gpus(4)))

    def matched() -> Any:
        return (patch_json(kubectl, "h100").get("status") or {}).get("matchedDevices")

    wait_for(lambda: matched() == 4, what="4 matched devices")
    apply(kubectl, slice_obj("node-b-gpu", GPU, "node-b", gpus(3)))
    wait_for(lambda: matched() == 7, what="7 matched devices")
    apply(kubectl, slice_obj("node-a-gpu", GPU, "node-a", gpus(4, model="A100"), generation=2))
    wait_for(lambda: matched() == 3, what="3 matched devices")
    kubectl("delete", "resourceslice", "node-b-gpu")
    wait_for(lambda: matched() == 0, what="no matched devices")
    out = kubectl("get", "rsp", "h100").stdout
    assert out.split("\n")[0].split() == ["NAME", "PRIORITY", "FILTER", "MATCHED", "AGE"]


def test_bad_input_is_reported_once_per_generation(
    kubectl: Kubectl, operator: PatchReporter
) -> None:
    apply(kubectl, slice_obj("node-a-gpu", GPU, "node-a", gpus(2)),
          class_obj("broken", [f'device.attributes["{GPU}"].nope == 1']))
    apply(kubectl,
          patch_obj("syntax", filter={"selectors": ["device.driver =="]}),
          patch_obj("ghost", filter={"deviceClassName": "no-such-class"}),
          patch_obj("via-broken-class", filter={"deviceClassName": "broken"}),
          patch_obj("short-name", attributes={"model": {"string": "x"}}))

    def reason(name: str) -> str | None:
        c = faulty_condition(kubectl, name)
        return c["reason"] if c else None

    wait_for(lambda: reason("syntax") == "InvalidSelector", what="InvalidSelector")
    wait_for(lambda: reason("ghost") == "DeviceClassNotFound", what="DeviceClassNotFound")
    wait_for(lambda: reason("via-broken-class") == "NoFaults", what="NoFaults for the class")
    wait_for(lambda: reason("short-name") == "InvalidPatch", what="InvalidPatch")
    cond = faulty_condition(kubectl, "syntax")
    assert cond is not None and "device.driver ==" in cond["message"]
    assert "does not compile" in cond["message"]
    assert "no-such-class" in (faulty_condition(kubectl, "ghost") or {})["message"]
    assert "must be fully qualified" in (faulty_condition(kubectl, "short-name") or {})["message"]

    # More slice churn in the same generation: no more Events about the syntax error.
    apply(kubectl, slice_obj("node-b-gpu", GPU, "node-b", gpus(5)))
    wait_for(lambda: operator.passes >= 3, what="reporter passes")
    (event,) = wait_for(lambda: events_of(kubectl, "syntax"), what="the syntax Event")
    assert event["reason"] == "InvalidSelector"
    assert events_of(kubectl, "via-broken-class") == []
    # A new generation gets its own single Event.
    apply(kubectl, patch_obj("syntax", filter={"selectors": ["device.driver =="]},
                             attributes={"example.com/x": {"int": 1}}))
    wait_for(lambda: len(events_of(kubectl, "syntax")) == 2, what="a second Event")
    wait_for(lambda: (faulty_condition(kubectl, "syntax") or {}).get("observedGeneration") == 2,
             what="generation 2 observed")
    assert len(events_of(kubectl, "syntax")) == 2

    # The missing class appears: the patch matches and its condition clears.
    apply(kubectl, class_obj("no-such-class", [f'device.driver == "{GPU}"']))
    wait_for(lambda: reason("ghost") == "NoFaults", what="the class to be found")
    assert patch_json(kubectl, "ghost")["status"]["matchedDevices"] == 7
