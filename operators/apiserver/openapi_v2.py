"""OpenAPI v2 in the protobuf form kubectl asks for (`/openapi/v2`).

kubectl validates a `kind: List` client-side against the v2 document (its v3-based
check of server-side validation does not cover Lists), and it accepts only the
protobuf encoding of gnostic's openapi_v2.Document there. The few message fields a
schema needs are encoded by hand here rather than pulling in a protobuf runtime.
"""

from __future__ import annotations

import json
import struct
from typing import Any

PROTOBUF = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"


def wants_protobuf(accept: str) -> bool:
    """True when the first media type asked for is the protobuf one (either spelling)."""
    first = accept.split(",")[0]
    return "proto-openapi.spec.v2" in first and "q=0" not in first.replace(" ", "")

# gnostic openapi_v2.Schema field numbers
_STRINGS = {"$ref": 1, "format": 2, "title": 3, "description": 4, "pattern": 13}
_DOUBLES = {"maximum": 7, "minimum": 9}
_INTS = {"maxLength": 11, "minLength": 12, "maxItems": 14, "minItems": 15,
         "maxProperties": 17, "minProperties": 18}


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _bytes(field: int, payload: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def _str(field: int, text: str) -> bytes:
    return _bytes(field, text.encode())


def _any(value: Any) -> bytes:
    """gnostic Any: the value as YAML text (JSON is YAML)."""
    return _str(2, json.dumps(value, separators=(",", ":")))


def _named(name: str, payload: bytes) -> bytes:
    return _str(1, name) + _bytes(2, payload)


def schema(s: dict[str, Any]) -> bytes:
    out = bytearray()
    for key, num in _STRINGS.items():
        if isinstance(s.get(key), str):
            out += _str(num, s[key])
    if "default" in s:
        out += _bytes(5, _any(s["default"]))
    for key, num in _DOUBLES.items():
        if isinstance(s.get(key), (int, float)) and not isinstance(s.get(key), bool):
            out += _varint(num << 3 | 1) + struct.pack("<d", float(s[key]))
    for key, num in _INTS.items():
        if isinstance(s.get(key), int) and not isinstance(s.get(key), bool):
            out += _varint(num << 3) + _varint(s[key])
    for req in s.get("required") or []:
        out += _str(19, req)
    for value in s.get("enum") or []:
        out += _bytes(20, _any(value))
    addl = s.get("additionalProperties")
    if isinstance(addl, dict):
        out += _bytes(21, _bytes(1, schema(addl)))
    elif isinstance(addl, bool):
        out += _bytes(21, _varint(2 << 3) + _varint(int(addl)))
    if isinstance(s.get("type"), str):
        out += _bytes(22, _str(1, s["type"]))
    if isinstance(s.get("items"), dict):
        out += _bytes(23, _bytes(1, schema(s["items"])))
    if isinstance(s.get("properties"), dict):
        props = b"".join(_bytes(1, _named(k, schema(v))) for k, v in s["properties"].items())
        out += _bytes(25, props)
    for key, value in s.items():
        if key.startswith("x-"):
            out += _bytes(31, _named(key, _any(value)))
    return bytes(out)


def document(doc: dict[str, Any]) -> bytes:
    info = doc.get("info") or {}
    out = _str(1, doc.get("swagger", "2.0"))
    out += _bytes(2, _str(1, info.get("title", "")) + _str(2, info.get("version", "")))
    out += _bytes(8, b"")
    defs = b"".join(_bytes(1, _named(k, schema(v))) for k, v in (doc.get("definitions") or {}).items())
    out += _bytes(9, defs)
    return out
