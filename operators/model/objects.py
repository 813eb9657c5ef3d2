"""Entry points: one dict -> one typed object, or a batch where bad objects are set aside.

Kinds owned by later layers (DeviceTaintRule, ResourceSlicePatch) plug their parsers in
through `register_parser`, so `--from FILE` readers and the tracker share one dispatcher.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from operators.model import fields as f
from operators.model.claims import ResourceClaim, parse_claim
from operators.model.deviceclass import DeviceClass, parse_device_class_spec
from operators.model.devices import ResourceSlice, parse_slice_spec
from operators.model.errors import FieldError, ModelError, ObjectRef
from operators.model.meta import parse_meta, peek_identity
from operators.model.pods import Pod, parse_pod

APIObject = ResourceSlice | DeviceClass | ResourceClaim | Pod
Parser = Callable[[Mapping[str, Any]], Any]

NAMESPACED_KINDS = {"ResourceClaim", "Pod"}


def ref_of(d: Mapping[str, Any]) -> ObjectRef:
    """Best-effort identity of a raw object, even a malformed one."""
    kind = d.get("kind") if isinstance(d, Mapping) else None
    ns, name = peek_identity(d) if isinstance(d, Mapping) else ("", "")
    return ObjectRef(kind if isinstance(kind, str) else "", ns, name)


def _spec_status(d: Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    return f.obj(d, "spec"), f.obj(d, "status")


def parse_resource_slice(d: Mapping[str, Any]) -> ResourceSlice:
    meta = parse_meta(d, namespaced=False)
    spec = f.obj(d, "spec", required=True)
    try:
        return parse_slice_spec(meta, spec)
    except FieldError as e:
        raise e.at("spec") from None


def parse_device_class(d: Mapping[str, Any]) -> DeviceClass:
    meta = parse_meta(d, namespaced=False)
    spec = f.obj(d, "spec")
    try:
        return parse_device_class_spec(meta, spec)
    except FieldError as e:
        raise e.at("spec") from None


def parse_resource_claim(d: Mapping[str, Any]) -> ResourceClaim:
    meta = parse_meta(d, namespaced=True)
    spec, status = _spec_status(d)
    return parse_claim(meta, spec, status)


def parse_pod_object(d: Mapping[str, Any]) -> Pod:
    meta = parse_meta(d, namespaced=True)
    spec, status = _spec_status(d)
    return parse_pod(meta, spec, status)


_PARSERS: dict[str, Parser] = {
    "ResourceSlice": parse_resource_slice,
    "DeviceClass": parse_device_class,
    "ResourceClaim": parse_resource_claim,
    "Pod": parse_pod_object,
}


def register_parser(kind: str, parser: Parser) -> None:
    """Let a higher layer teach `parse_object` a kind (its parser may raise FieldError
    or ModelError)."""
    _PARSERS[kind] = parser


def known_kinds() -> frozenset[str]:
    return frozenset(_PARSERS)


def parse_object(d: Mapping[str, Any], kind: str | None = None) -> Any:
    """Typed view of one API object, dispatched on `kind` (argument wins over the dict's).

    Raises ModelError naming the object and field path; never any other exception for
    bad data.
    """
    ref = ref_of(d)
    if not isinstance(d, Mapping):
        raise ModelError(ref, "", f"expected an object, got {f.type_name(d)}")
    k = kind or ref.kind
    if kind and not ref.kind:
        ref = ref._replace(kind=kind)
    if not k:
        raise ModelError(ref, "kind", "required field is missing")
    parser = _PARSERS.get(k)
    if parser is None:
        raise ModelError(ref, "kind", f"unsupported kind {k!r}")
    try:
        return parser(d)
    except FieldError as e:
        raise e.to_model_error(ref) from None
    except ModelError:
        raise
    except (
        TypeError,
        ValueError,
        AttributeError,
        KeyError,
    ) as e:  # defensive: never crash a controller
        raise ModelError(ref, "", f"malformed object: {e!r}") from None


def parse_objects(items: Iterable[Mapping[str, Any]]) -> tuple[list[Any], list[ModelError]]:
    """Parse many objects; each bad one becomes an error, the rest still parse."""
    objects: list[Any] = []
    errors: list[ModelError] = []
    for d in items:
        try:
            objects.append(parse_object(d))
        except ModelError as e:
            errors.append(e)
    return objects, errors
