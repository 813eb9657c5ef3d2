"""Attribute values and name qualification shared by every layer.

Kept tiny and dependency-free because the CEL layer, the tracker and the views all
need the same notion of "an attribute" and must agree on how unqualified names get
their domain.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

AttributeKind = Literal["string", "int", "bool", "version"]
ATTRIBUTE_KINDS: tuple[AttributeKind, ...] = ("string", "int", "bool", "version")


@dataclass(frozen=True, slots=True)
class Attribute:
    """One typed device attribute as published (`{"int": 3}` -> kind="int", value=3).

    `version` values stay strings here; the CEL layer turns them into semver objects.
    """

    kind: AttributeKind
    value: str | int | bool

    def to_api(self) -> dict[str, str | int | bool]:
        return {self.kind: self.value}


def qualify(name: str, driver: str) -> str:
    """Fully qualified attribute/capacity name: unqualified names belong to the driver.

    Upstream treats `model` published by driver `gpu.example.com` as
    `gpu.example.com/model`; draco keys every map by the qualified form so that a
    short name and its qualified spelling are the same attribute.
    """
    return name if "/" in name else f"{driver}/{name}"


def split_qualified(qualified: str) -> tuple[str, str]:
    """`"gpu.example.com/model"` -> `("gpu.example.com", "model")`."""
    domain, _, name = qualified.rpartition("/")
    return domain, name
