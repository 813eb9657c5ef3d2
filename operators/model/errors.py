"""The one exception the model raises, and the internal carrier that builds its field path.

Field paths are assembled while the error unwinds (each level prepends its own segment)
so the happy path never formats a path string: parsing 10,000 devices must stay cheap.
"""

from __future__ import annotations

from typing import NamedTuple


class ObjectRef(NamedTuple):
    """Names an API object the way people and logs do: `Kind namespace/name`."""

    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        kind = self.kind or "object"
        name = self.name or "<unnamed>"
        if self.namespace:
            return f"{kind} {self.namespace}/{name}"
        return f"{kind} {name}"


class ModelError(ValueError):
    """Bad input: names the object and the field path so an Event or log line is actionable."""

    def __init__(self, ref: ObjectRef, path: str, message: str) -> None:
        self.ref = ref
        self.path = path
        self.message = message
        where = f"{ref} {path}" if path else str(ref)
        super().__init__(f"{where}: {message}")


class FieldError(Exception):
    """Raised deep inside a parser; segments are prepended as it propagates outward."""

    def __init__(self, message: str, *segments: str) -> None:
        super().__init__(message)
        self.message = message
        self.segments: list[str] = list(segments)

    def at(self, segment: str) -> FieldError:
        self.segments.append(segment)
        return self

    @property
    def path(self) -> str:
        out = ""
        for seg in reversed(self.segments):
            if seg.startswith("["):
                out += seg
            elif out:
                out += "." + seg
            else:
                out = seg
        return out

    def to_model_error(self, ref: ObjectRef) -> ModelError:
        return ModelError(ref, self.path, self.message)
