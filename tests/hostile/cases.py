"""What hostile objects look like, and how each must end, as data.

Per kind: a well-formed base object (what a careful user writes) and a table of
mutations, each a path into the object, the odd values it may take there, and the
expected end:

- `refused`: the API server's schema (or its own API validation) refuses it, and the
  message names `field`;
- `reported`: the server accepts it and draco says what is wrong on the object itself,
  with one of `reasons` (a condition's reason, an Event's reason, or a line of the
  status' `problems` naming the field);
- `handled`: the value is odd but valid, and draco serves the object as any other
  (the condition or status it writes for every object of the kind, for this generation).

The real API server is the oracle: when it disagrees with a row, the row is wrong.
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

DRACO = "resource.draco.dev/v1alpha1"
PODGROUP_API = "scheduling.k8s.io/v1beta1"
DELETE = object()  # a mutation's value: remove the field


@dataclass(frozen=True, slots=True)
class Ctx:
    """The test's own world: every hostile object names only its driver, so it touches
    nothing another test owns (see tests/e2e/backends.py OWNERSHIP)."""

    test_id: str
    namespace: str
    driver: str  # the hostile objects' driver; its slice has `devices`
    domain: str  # a DNS domain of the test's own, for attribute and taint keys
    devices: tuple[str, ...]
    signal_key: str  # the slice taint one device carries: a health signal that holds


Value = Any  # a value, or Callable[[random.Random, Ctx], Any]


@dataclass(frozen=True, slots=True)
class Expect:
    outcome: str  # "refused" | "reported" | "handled"
    field: str = ""  # refused: a field path the server's message names
    reasons: tuple[str, ...] = ()  # reported: the reasons that count


def refused(field: str) -> Expect:
    return Expect("refused", field=field)


def reported(*reasons: str) -> Expect:
    return Expect("reported", reasons=reasons)


HANDLED = Expect("handled")


@dataclass(frozen=True, slots=True)
class Mutation:
    label: str
    path: tuple[str | int, ...]
    values: tuple[Value, ...]
    expect: Expect
    create_only: bool = False  # names cannot change on update
    strict: bool = False  # sent with ?fieldValidation=Strict


# -- odd values ----------------------------------------------------------------------

UNICODE = ("gpü", "デバイス", "\u200bzero-width", "e\u0301", "😀", "Ω≈ç√", "\u202eright-to-left")
HUGE_INTS = (2**31, 2**31 - 1, 2**53 + 1, 2**62, 2**63 - 1)
OVER_INT64 = (2**63, 2**64, 10**30)


def dns_labels(rng: random.Random, length: int, first_max: int = 63) -> str:
    """A DNS subdomain of exactly LENGTH characters: random labels of 1-63 (the first
    of at most FIRST_MAX), each starting with a letter and ending with a digit or letter."""
    labels: list[str] = []
    used = 0
    while used < length:
        room = length - used - (1 if labels else 0)
        size = min(room, rng.randint(1, first_max if not labels else 63))
        if 0 < room - size < 2:  # never leave a tail too short for ".x"
            size = room
        if size > 63:  # only when the tail was folded in: split it again
            size = 63 - 2
        middle = "".join(rng.choice(string.ascii_lowercase + string.digits + "-") for _ in range(max(size - 2, 0)))
        label = (rng.choice(string.ascii_lowercase) + middle + rng.choice(string.digits))[:size] if size > 1 \
            else rng.choice(string.ascii_lowercase)
        labels.append(label)
        used += size + (1 if len(labels) > 1 else 0)
    return ".".join(labels)


def long_name(rng: random.Random, ctx: Ctx, length: int = 253) -> str:
    """A valid name of LENGTH characters starting with the test's id; sometimes with a
    dot where a controller truncating the name at 242 characters would cut."""
    head = f"hx-{ctx.test_id}-"
    tail = dns_labels(rng, length - len(head), first_max=63 - len(head))
    name = head + tail
    if length > 243 and rng.random() < 0.5:  # a dot at index 241: name[:242] ends in "."
        name = name[:240] + "a." + "b" + name[243:]
    return name


def wrong_enums(good: tuple[str, ...]) -> tuple[Value, ...]:
    """Every way an enum can be wrong: case, whitespace, empty, look-alike, type."""
    first = good[-1]
    wrong = (first.lower(), first.upper(), f"{first} ", f" {first}", "", first.replace("e", "\u0435"),
             "Unknown", "Bogus", "*", 1, True, [first], {"value": first})
    return tuple(v for v in wrong if v not in good)


def repeat(text: str, n: int) -> Callable[[random.Random, Ctx], str]:
    return lambda rng, ctx: (text * (n // len(text) + 1))[:n]


def deep(levels: int) -> Callable[[random.Random, Ctx], Any]:
    def make(rng: random.Random, ctx: Ctx) -> Any:
        value: Any = "bottom"
        for _ in range(levels):
            value = {"x": value}
        return value
    return make


# -- names: the same rows for every kind ---------------------------------------------

def name_mutations(max_len: int = 253, accepted: Expect | None = None) -> list[Mutation]:
    """The rows every kind shares; ACCEPTED: how an object with an odd but valid name or
    pruned fields ends (served as any other, by default)."""
    ok = accepted or HANDLED
    return [
        Mutation("name empty", ("metadata", "name"), ("",), refused("metadata.name"), create_only=True),
        Mutation(f"name of {max_len} characters", ("metadata", "name"),
                 (lambda rng, ctx: long_name(rng, ctx, max_len),), ok, create_only=True),
        Mutation("name of 254 characters", ("metadata", "name"),
                 (lambda rng, ctx: long_name(rng, ctx, 254),), refused("metadata.name"), create_only=True),
        Mutation("name unicode", ("metadata", "name"),
                 tuple(lambda rng, ctx, u=u: f"hx-{ctx.test_id}-{u}" for u in UNICODE),
                 refused("metadata.name"), create_only=True),
        Mutation("name upper case", ("metadata", "name"), (lambda rng, ctx: f"HX-{ctx.test_id}",),
                 refused("metadata.name"), create_only=True),
        Mutation("unknown fields (pruned)", ("spec", "zzUnknown"),
                 ({"a": [1, 2, {"b": None}]}, "x", 2**62), ok),
        Mutation("unknown field, strict", ("spec", "zzUnknown"), ("x",), refused("spec.zzUnknown"),
                 strict=True),
        Mutation("deep nesting in an unknown field (pruned)", ("spec", "zzDeep"), (deep(60), deep(300)),
                 ok),
        Mutation("unicode annotation", ("metadata", "annotations"),
                 (lambda rng, ctx: {f"{ctx.domain}/note": "".join(rng.choice(UNICODE) for _ in range(50))},),
                 ok),
        Mutation("spec missing", ("spec",), (DELETE,), refused("spec")),
        Mutation("spec of the wrong type", ("spec",), ("spec", 7, ["x"]), refused("spec")),
    ]


# -- DeviceTaintRule -----------------------------------------------------------------

def taint_rule(ctx: Ctx, name: str, rng: random.Random) -> dict[str, Any]:
    return {"apiVersion": DRACO, "kind": "DeviceTaintRule", "metadata": {"name": name},
            "spec": {"deviceSelector": {"driver": ctx.driver, "device": rng.choice(ctx.devices)},
                     "taint": {"key": f"{ctx.domain}/hostile", "value": "v",
                               "effect": rng.choice(("None", "NoSchedule", "NoExecute"))}}}


TAINT_RULE = [
    *name_mutations(),
    Mutation("effect wrong", ("spec", "taint", "effect"), wrong_enums(("None", "NoSchedule", "NoExecute")),
             refused("spec.taint.effect")),
    Mutation("effect missing", ("spec", "taint", "effect"), (DELETE,), refused("spec.taint.effect")),
    Mutation("taint key invalid", ("spec", "taint", "key"),
             ("", "has space", "a/b/c", "/x", "-x", *UNICODE[:3], repeat("k", 317)), refused("spec.taint.key")),
    Mutation("taint value invalid", ("spec", "taint", "value"),
             (repeat("v", 64), "a/b", "-v", *UNICODE[:3]), refused("spec.taint.value")),
    Mutation("taint value of 63 characters", ("spec", "taint", "value"), (repeat("v", 63),), HANDLED),
    Mutation("timeAdded not a time", ("spec", "taint", "timeAdded"), ("yesterday", "2026-13-40T99:99:99Z", 12),
             refused("spec.taint.timeAdded")),
    Mutation("timeAdded at the ends of time", ("spec", "taint", "timeAdded"),
             ("0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "1970-01-01T00:00:00Z"), HANDLED),
    Mutation("selector empty", ("spec", "deviceSelector"), ({},), refused("spec.deviceSelector")),
    Mutation("selector all with a driver", ("spec", "deviceSelector", "all"), (True,),
             refused("spec.deviceSelector")),
    Mutation("selector driver invalid", ("spec", "deviceSelector", "driver"),
             ("UPPER.example.com", "gpü.example.com", repeat("d", 64), "a..b", 5), refused("spec.deviceSelector.driver")),
    Mutation("selector device invalid", ("spec", "deviceSelector", "device"),
             ("Dev_0", "a.b", repeat("d", 64), "😀"), refused("spec.deviceSelector.device")),
    Mutation("selector pool empty", ("spec", "deviceSelector", "pool"), ("",), refused("spec.deviceSelector.pool")),
    Mutation("selector pool odd", ("spec", "deviceSelector", "pool"),
             (repeat("p", 253), "pööl/ü", "a//b"), HANDLED),
    Mutation("selector pool too long", ("spec", "deviceSelector", "pool"), (repeat("p", 254),),
             refused("spec.deviceSelector.pool")),
    Mutation("selector of the wrong type", ("spec", "deviceSelector"), ("all", [1]), refused("spec.deviceSelector")),
    Mutation("taint missing", ("spec", "taint"), (DELETE,), refused("spec.taint")),
]


# -- ResourceSlicePatch ----------------------------------------------------------------

def slice_patch(ctx: Ctx, name: str, rng: random.Random) -> dict[str, Any]:
    return {"apiVersion": DRACO, "kind": "ResourceSlicePatch", "metadata": {"name": name},
            "spec": {"devices": {"filter": {"driver": ctx.driver},
                                 "attributes": {f"{ctx.domain}/hostile": {"string": "yes"}}}}}


BAD_CEL = ("device.attributes[", "device.driver ==", "1 +", "device.nope(", "}{", "x" * 3 + " &&& y",
           "device.attributes['a'].b ?? 1")
FAILING_CEL = ('int("not a number") == 1', "1 / 0 == 1", 'device.attributes["zz.example.com"].nope == 1 || 1/0 == 0')


def many(prefix: str, n: int, value: Any) -> Callable[[random.Random, Ctx], Any]:
    return lambda rng, ctx: {f"{ctx.domain}/{prefix}{i}": value for i in range(n)}


SLICE_PATCH = [
    *name_mutations(),
    Mutation("selector CEL invalid", ("spec", "devices", "filter", "selectors"),
             tuple([{"cel": {"expression": e}}] for e in BAD_CEL), reported("InvalidSelector")),
    Mutation("selector CEL failing on devices", ("spec", "devices", "filter", "selectors"),
             tuple([{"cel": {"expression": e}}] for e in FAILING_CEL),
             reported("SelectorFailed", "InvalidSelector")),
    Mutation("selector CEL not a bool", ("spec", "devices", "filter", "selectors"),
             ([{"cel": {"expression": '"yes"'}}], [{"cel": {"expression": "42"}}]),
             reported("InvalidSelector", "SelectorFailed")),
    Mutation("selector CEL too long", ("spec", "devices", "filter", "selectors"),
             (lambda rng, ctx: [{"cel": {"expression": "true && " * 1280 + "true"}}],),
             refused("spec.devices.filter.selectors[0].cel.expression")),
    Mutation("33 selectors", ("spec", "devices", "filter", "selectors"),
             ([{"cel": {"expression": "true"}}] * 33,), refused("spec.devices.filter.selectors")),
    Mutation("device class missing", ("spec", "devices", "filter", "deviceClassName"),
             (lambda rng, ctx: f"hx-{ctx.test_id}-no-such-class",), reported("DeviceClassNotFound")),
    Mutation("attribute name unqualified", ("spec", "devices", "attributes"),
             ({"plain": {"string": "x"}}, {"/x": {"int": 1}}, {"ü.example.com/x": {"bool": True}}),
             refused("spec.devices.attributes")),
    Mutation("attribute with two values", ("spec", "devices", "attributes"),
             (lambda rng, ctx: {f"{ctx.domain}/two": {"string": "x", "int": 1}},), refused("spec.devices.attributes")),
    Mutation("attribute with no value", ("spec", "devices", "attributes"),
             (lambda rng, ctx: {f"{ctx.domain}/none": {}},), refused("spec.devices.attributes")),
    Mutation("attribute string too long", ("spec", "devices", "attributes"),
             (lambda rng, ctx: {f"{ctx.domain}/long": {"string": "s" * 65}},), refused("spec.devices.attributes")),
    Mutation("attribute nested deep", ("spec", "devices", "attributes"),
             (lambda rng, ctx: {f"{ctx.domain}/deep": {"string": deep(40)(rng, ctx)}},),
             refused("spec.devices.attributes")),
    Mutation("attribute huge integer", ("spec", "devices", "attributes"),
             tuple(lambda rng, ctx, n=n: {f"{ctx.domain}/big": {"int": n}} for n in HUGE_INTS), HANDLED),
    Mutation("attribute integer beyond int64", ("spec", "devices", "attributes"),
             tuple(lambda rng, ctx, n=n: {f"{ctx.domain}/big": {"int": n}} for n in OVER_INT64),
             refused("spec.devices.attributes")),
    Mutation("attribute unicode string", ("spec", "devices", "attributes"),
             tuple(lambda rng, ctx, u=u: {f"{ctx.domain}/u": {"string": u}} for u in UNICODE), HANDLED),
    Mutation("attribute version not semver", ("spec", "devices", "attributes"),
             (lambda rng, ctx: {f"{ctx.domain}/v": {"version": "not.a.version"}},
              lambda rng, ctx: {f"{ctx.domain}/v": {"version": "1.2.3-ü"}},
              lambda rng, ctx: {f"{ctx.domain}/v": {"version": "v1.2.3"}}), refused("spec.devices.attributes")),
    Mutation("attribute version odd but valid", ("spec", "devices", "attributes"),
             (lambda rng, ctx: {f"{ctx.domain}/v": {"version": "1.2.3--+b"}},
              lambda rng, ctx: {f"{ctx.domain}/v": {"version": f"{2**63 - 1}.0.0-0a.x-y"}}), HANDLED),
    Mutation("attribute removed (null)", ("spec", "devices", "attributes"),
             (lambda rng, ctx: {f"{ctx.domain}/gone": {"null": {}}},), HANDLED),
    # `null` declares no fields: what it holds is pruned, and it stays a removal
    Mutation("attribute null with content (pruned)", ("spec", "devices", "attributes"),
             (lambda rng, ctx: {f"{ctx.domain}/gone": {"null": {"x": 1}}},), HANDLED),
    Mutation("33 attributes", ("spec", "devices", "attributes"), (many("a", 33, {"bool": True}),),
             refused("spec.devices.attributes")),
    Mutation("32 attributes and capacity", ("spec", "devices"),
             (lambda rng, ctx: {"filter": {"driver": ctx.driver}, **{"attributes": many("a", 20, {"int": 1})(rng, ctx),
                                                                     "capacity": many("c", 13, {"value": "1"})(rng, ctx)}},),
             refused("spec.devices")),
    Mutation("capacity not a quantity", ("spec", "devices", "capacity"),
             tuple(lambda rng, ctx, v=v: {f"{ctx.domain}/mem": {"value": v}} for v in ("lots", "1.5.5Gi", "-", "ü", "")),
             reported("InvalidPatch")),
    # quantities as upstream's resource.Quantity reads them: negative and huge are numbers
    Mutation("capacity negative or huge", ("spec", "devices", "capacity"),
             tuple(lambda rng, ctx, v=v: {f"{ctx.domain}/mem": {"value": v}}
                   for v in ("-5", -1, "9223372036854775807", "1E18", 2**62, "999999999999999999999Ki", "1e999")),
             HANDLED),
    Mutation("capacity of the wrong type", ("spec", "devices", "capacity"),
             (lambda rng, ctx: {f"{ctx.domain}/mem": {"value": [1]}},
              lambda rng, ctx: {f"{ctx.domain}/mem": {"value": True}},
              lambda rng, ctx: {f"{ctx.domain}/mem": 5}), refused("spec.devices.capacity")),
    Mutation("priority huge", ("spec", "devices", "priority"), (2**31 - 1, -(2**31), 0), HANDLED),
    Mutation("priority beyond int32", ("spec", "devices", "priority"), (2**31, 2**40, -(2**31) - 1),
             refused("spec.devices.priority")),
    Mutation("priority of the wrong type", ("spec", "devices", "priority"), ("high", 1.5, [1]),
             refused("spec.devices.priority")),
    Mutation("filter driver too long", ("spec", "devices", "filter", "driver"), (repeat("d", 64),),
             refused("spec.devices.filter.driver")),
    Mutation("devices missing", ("spec", "devices"), (DELETE,), refused("spec.devices")),
]


# -- DeviceHealthPolicy ----------------------------------------------------------------

def health_policy(ctx: Ctx, name: str, rng: random.Random) -> dict[str, Any]:
    return {"apiVersion": DRACO, "kind": "DeviceHealthPolicy", "metadata": {"name": name},
            "spec": {"deviceSelector": {"driver": ctx.driver},
                     "signals": [{"sliceTaint": {"key": ctx.signal_key}}],
                     "taint": {"key": f"{ctx.domain}/unhealthy", "effect": "None"},
                     "for": "0s", "clearAfter": "30s"}}


HEALTH_POLICY = [
    *name_mutations(),
    Mutation("taint effect wrong", ("spec", "taint", "effect"), wrong_enums(("None", "NoSchedule", "NoExecute")),
             refused("spec.taint.effect")),
    Mutation("slice taint effects wrong", ("spec", "signals", 0, "sliceTaint", "effects"),
             tuple([v] for v in wrong_enums(("None", "NoSchedule", "NoExecute"))[:8]),
             refused("spec.signals[0].sliceTaint.effects[0]")),
    Mutation("pod health wrong", ("spec", "signals"),
             tuple([{"podHealth": {"health": [v]}}] for v in (*wrong_enums(("Unhealthy", "Unknown"))[:8], "Healthy")),
             refused("spec.signals[0].podHealth.health[0]")),
    Mutation("signals empty", ("spec", "signals"), ([],), refused("spec.signals")),
    Mutation("17 signals", ("spec", "signals"), (lambda rng, ctx: [{"podHealth": {}}] * 17,), refused("spec.signals")),
    Mutation("signal of two kinds", ("spec", "signals", 0, "podHealth"), ({},), refused("spec.signals[0]")),
    Mutation("signal of no kind", ("spec", "signals"), ([{}], [{"zzOther": {"x": 1}}]), refused("spec.signals[0]")),
    Mutation("device CEL invalid", ("spec", "signals"), tuple([{"device": {"cel": e}}] for e in BAD_CEL),
             reported("signals[0].device.cel")),
    Mutation("device CEL failing", ("spec", "signals"), tuple([{"device": {"cel": e}}] for e in FAILING_CEL[:2]),
             reported("signals[0].device.cel")),
    Mutation("device CEL empty", ("spec", "signals"), ([{"device": {"cel": ""}}],),
             refused("spec.signals[0].device.cel")),
    Mutation("device CEL too long", ("spec", "signals"), (lambda rng, ctx: [{"device": {"cel": "x" * 10241}}],),
             refused("spec.signals[0].device.cel")),
    Mutation("driver missing", ("spec", "deviceSelector", "driver"), (DELETE,),
             refused("spec.deviceSelector.driver")),
    Mutation("for not a duration", ("spec", "for"), ("5 minutes", "-1s", "1d", "ü", 30), refused("spec.for")),
    Mutation("for and clearAfter huge", ("spec", "for"), ("2562047h", "1000000h", "0.000001ms"), HANDLED),
    Mutation("for beyond any clock", ("spec", "for"),
             ("99999999999999999999h", "100000000h", "9223372036855s"), reported("InvalidPolicy")),
    Mutation("clearAfter beyond any clock", ("spec", "clearAfter"), ("99999999999999999999h", "10000000000m"),
             reported("InvalidPolicy")),
    Mutation("maxUnavailable wrong", ("spec", "maxUnavailable"), (-1, "101%", "abc", "1.5%", "-5%", ""),
             refused("spec.maxUnavailable")),
    Mutation("maxUnavailable huge", ("spec", "maxUnavailable"), (*HUGE_INTS, 0, "0%", "100%"), HANDLED),
    Mutation("taint key invalid", ("spec", "taint", "key"), ("", "a b", repeat("k", 317)), refused("spec.taint.key")),
    Mutation("slice taint values many", ("spec", "signals", 0, "sliceTaint", "values"),
             (lambda rng, ctx: ["v"] * 33,), refused("spec.signals[0].sliceTaint.values")),
]


WAITING = reported("GangUnschedulable")


# -- Gang ------------------------------------------------------------------------------

def gang(ctx: Ctx, name: str, rng: random.Random) -> dict[str, Any]:
    return {"apiVersion": DRACO, "kind": "Gang", "metadata": {"name": name, "namespace": ctx.namespace},
            "spec": {"minCount": rng.randint(2, 5)}}


GANG = [
    # a member joins with the label resource.draco.dev/gang=NAME: at most 63 characters;
    # every accepted gang has one member, fewer than its minCount: it waits, and says so
    *name_mutations(max_len=63, accepted=WAITING),
    Mutation("minCount zero or negative", ("spec", "minCount"), (0, -1, -(2**63)), refused("spec.minCount")),
    Mutation("minCount beyond the limit", ("spec", "minCount"), (10001, 2**31, 2**63 - 1), refused("spec.minCount")),
    Mutation("minCount beyond int64", ("spec", "minCount"), OVER_INT64, refused("spec.minCount")),
    Mutation("minCount of the wrong type", ("spec", "minCount"), ("2", 2.5, [2], True),
             refused("spec.minCount")),
    Mutation("minCount missing", ("spec", "minCount"), (DELETE,), refused("spec.minCount")),
    Mutation("minCount larger than the members", ("spec", "minCount"), (2, 7, 10000), WAITING),
    Mutation("topology attribute unqualified", ("spec", "topology", "deviceAttribute"),
             ("clique", "/clique", "a/b/c", "ü.example.com/x", repeat("a", 129)),
             refused("spec.topology.deviceAttribute")),
    Mutation("topology node label empty", ("spec", "topology", "nodeLabel"), ("",), refused("spec.topology.nodeLabel")),
    Mutation("topology node label too long", ("spec", "topology", "nodeLabel"), (repeat("l", 318),),
             refused("spec.topology.nodeLabel")),
    Mutation("topology no node has", ("spec", "topology"),
             ({"nodeLabel": "ü/ß"}, {"nodeLabel": "zz.example.com/none"},
              {"deviceAttribute": "zz.example.com/none", "nodeLabel": "kubernetes.io/hostname"}), WAITING),
    Mutation("topology unknown field, strict", ("spec", "topology", "zzRack"), ("r1",),
             refused("spec.topology.zzRack"), strict=True),
    Mutation("waitSeconds wrong", ("spec", "waitSeconds"), (0, -5, "60"), refused("spec.waitSeconds")),
    Mutation("waitSeconds huge", ("spec", "waitSeconds"), HUGE_INTS, WAITING),
]


# -- PodGroup (upstream, scheduling.k8s.io/v1beta1, where served) --------------------

def pod_group(ctx: Ctx, name: str, rng: random.Random) -> dict[str, Any]:
    return {"apiVersion": PODGROUP_API, "kind": "PodGroup", "metadata": {"name": name, "namespace": ctx.namespace},
            "spec": {"schedulingPolicy": {"gang": {"minCount": rng.randint(2, 5)}}}}


def _created(rows: list[Mutation]) -> list[Mutation]:
    """A PodGroup's spec cannot change after creation: every row is tried on create."""
    return [Mutation(m.label, m.path, m.values, m.expect, True, m.strict) for m in rows]


POD_GROUP = _created([
    *[m for m in name_mutations(max_len=63, accepted=WAITING) if not m.strict],
    Mutation("minCount zero or negative", ("spec", "schedulingPolicy", "gang", "minCount"), (0, -1),
             refused("spec.schedulingPolicy.gang.minCount")),
    Mutation("minCount beyond int32", ("spec", "schedulingPolicy", "gang", "minCount"), (2**31, 2**40),
             refused("spec.schedulingPolicy.gang.minCount")),
    Mutation("minCount larger than the members", ("spec", "schedulingPolicy", "gang", "minCount"), (3, 10000),
             WAITING),
    Mutation("policy of two kinds", ("spec", "schedulingPolicy", "basic"), ({},), refused("spec.schedulingPolicy")),
])


@dataclass(frozen=True, slots=True)
class KindSpec:
    kind: str
    plural: str
    api: str
    namespaced: bool
    base: Callable[[Ctx, str, random.Random], dict[str, Any]]
    mutations: tuple[Mutation, ...]

    def collection(self, namespace: str) -> str:
        prefix = "/api" if self.api == "v1" else f"/apis/{self.api}"
        return f"{prefix}/namespaces/{namespace}/{self.plural}" if self.namespaced else f"{prefix}/{self.plural}"


KINDS: Mapping[str, KindSpec] = {
    "DeviceTaintRule": KindSpec("DeviceTaintRule", "devicetaintrules", DRACO, False, taint_rule, tuple(TAINT_RULE)),
    "ResourceSlicePatch": KindSpec("ResourceSlicePatch", "resourceslicepatches", DRACO, False, slice_patch,
                                   tuple(SLICE_PATCH)),
    "DeviceHealthPolicy": KindSpec("DeviceHealthPolicy", "devicehealthpolicies", DRACO, False, health_policy,
                                   tuple(HEALTH_POLICY)),
    "Gang": KindSpec("Gang", "gangs", DRACO, True, gang, tuple(GANG)),
    "PodGroup": KindSpec("PodGroup", "podgroups", PODGROUP_API, True, pod_group, tuple(POD_GROUP)),
}
