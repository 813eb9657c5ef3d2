"""`draco allocate --serve`: the allocator as a line-oriented JSON service for programs.

A program that asks hundreds of small questions (upstream's allocator test suite, run
through `hack/upstream-allocator`) would spend most of its time starting Python if it
ran `draco allocate --from FILE` once per question; the service answers each question
in the time the allocation takes. The answer is the same pure `allocate` the allocator
controller calls for one pod on one node: upstream's `Allocate(node, claims)`.

One request per input line, a JSON object:

    {"objects":  [Node, DeviceClass, ResourceSlice, ResourceClaim, ... as in --from],
     "claims":   ["NS/NAME" or "NAME", ...],   # allocated together, in this order
     "node":     "NAME" or null,               # null: devices available on every node
     "inUse":    [{"driver", "pool", "device"}, ...],     # held by claims not shown
     "consumed": [{"driver", "pool", "device", "capacity": {NAME: QUANTITY}}, ...],
     "featureGates": "DRAConsumableCapacity=true,...",    # optional, per request
     "kubernetesVersion": "1.38"}   # optional: that release's default gates and
                                    # behaviour, featureGates over them

One answer per request line, a JSON object: `status` (`allocated`, `unsatisfiable`,
`error`, `too-complex`, `unreadable`; `bad-request` when the line itself is wrong),
`reason`, and with `allocated` `allocations`: one `status.allocation` per claim, in
the API's shape. Objects of one request never leak into the next.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import IO, Any

from operators.allocator import (
    DEFAULT_BUDGET_S,
    Shares,
    allocate,
    in_use_from_tracker,
    inventory_from_tracker,
    shares_from_tracker,
)
from operators.allocator.features import FeatureGates, parse_feature_gates
from operators.allocator.releases import parse_release
from operators.cli.allocation_records import nodes_from
from operators.cli.state import build_tracker, default_namespaces, object_key
from operators.model import DeviceID, NamespacedName, ObjectRef, ResourceClaim
from operators.model.quantity import parse_quantity


class BadRequest(ValueError):
    """The request line cannot be understood (not the claims in it)."""


def _device_id(item: Any, where: str) -> DeviceID:
    if not isinstance(item, Mapping) or not all(isinstance(item.get(k), str)
                                                for k in ("driver", "pool", "device")):
        raise BadRequest(f"{where}: expected an object with driver, pool and device")
    return DeviceID(item["driver"], item["pool"], item["device"])


def _claim_key(text: Any) -> NamespacedName:
    key = object_key(text) if isinstance(text, str) else None
    if key is None:
        raise BadRequest(f"claims: expected NS/NAME or NAME, not {text!r}")
    return key


def _unique_slices(objects: Sequence[Any]) -> list[dict[str, Any]]:
    """Objects as the tracker takes them. Slice names never matter to allocation but
    key the tracker, so two slices a program gave the same name both stay."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for obj in objects:
        if not isinstance(obj, dict):
            raise BadRequest("objects: every object must be a JSON object")
        if obj.get("kind") == "ResourceSlice":
            md = dict(obj.get("metadata") or {})
            name = str(md.get("name") or "slice")
            unique, n = name, 1
            while unique in seen:
                n += 1
                unique = f"{name}.{n}"
            seen.add(unique)
            md["name"] = unique
            obj = {**obj, "metadata": md}
        out.append(obj)
    return default_namespaces(out)


def answer(request: Mapping[str, Any], default_gates: FeatureGates) -> dict[str, Any]:
    """One request's answer (see the module's docstring)."""
    objects = request.get("objects") or []
    if not isinstance(objects, list):
        raise BadRequest("objects: expected a list")
    gates = default_gates
    if request.get("kubernetesVersion"):
        try:
            gates = parse_release(str(request["kubernetesVersion"])).gates
        except ValueError as exc:
            raise BadRequest(f"kubernetesVersion: {exc}") from exc
    if request.get("featureGates"):
        try:
            gates = parse_feature_gates(str(request["featureGates"]), gates)
        except ValueError as exc:
            raise BadRequest(f"featureGates: {exc}") from exc
    tracker = build_tracker(_unique_slices(objects))
    keys = [_claim_key(c) for c in request.get("claims") or []]
    claims: list[ResourceClaim] = []
    for key in keys:
        claim = tracker.claim(key)
        if claim is None:
            error = tracker.errors.get(ObjectRef("ResourceClaim", key.namespace, key.name))
            why = (f"{error.path}: {error.message}" if error and error.path else
                   error.message if error else "no such ResourceClaim in the request")
            return {"status": "unreadable", "reason": f"ResourceClaim {key}: {why}"}
        claims.append(claim)
    node = None
    if request.get("node") is not None:
        name = str(request["node"])
        node = next((n for n in nodes_from(objects, tracker) if n.name == name), None)
        if node is None:
            raise BadRequest(f"node: no Node {name!r} among the objects")
    in_use = set(in_use_from_tracker(tracker))
    in_use.update(_device_id(d, "inUse") for d in request.get("inUse") or [])
    shares: Shares = shares_from_tracker(tracker)
    for item in request.get("consumed") or []:
        device = _device_id(item, "consumed")
        capacity = item.get("capacity") or {}
        try:
            shares.add(device, ((str(n), parse_quantity(str(q))) for n, q in capacity.items()))
        except ValueError as exc:
            raise BadRequest(f"consumed: {exc}") from exc
    classes = {c.name: c for c in tracker.device_classes()}
    outcome = allocate(claims, node, inventory_from_tracker(tracker), classes, in_use,
                       DEFAULT_BUDGET_S, with_explain=False, shares=shares, features=gates)
    reply: dict[str, Any] = {"status": outcome.status, "reason": outcome.reason}
    if outcome.allocated:
        reply["allocations"] = [outcome.allocation_api(i) for i in range(len(claims))]
    return reply


def serve(default_gates: FeatureGates, stdin: IO[str] | None = None,
          stdout: IO[str] | None = None) -> int:
    """Answer request lines until end of input; one bad line gets a `bad-request`."""
    src = stdin if stdin is not None else sys.stdin
    dst = stdout if stdout is not None else sys.stdout
    for number, line in enumerate(src, 1):
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            if not isinstance(request, dict):
                raise BadRequest("expected a JSON object")
            reply = answer(request, default_gates)
        except (BadRequest, json.JSONDecodeError) as exc:
            reply = {"status": "bad-request", "reason": f"request line {number}: {exc}"}
        except Exception as exc:  # noqa: BLE001 - one question must not end the service
            reply = {"status": "error", "reason": f"request line {number}: draco failed "
                     f"({type(exc).__name__}: {exc}); this is a bug in draco, please report it"}
        dst.write(json.dumps(reply, separators=(",", ":")) + "\n")
        dst.flush()
    return 0
