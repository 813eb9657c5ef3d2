"""Semantic versions as DRA `version` attributes and CEL's `semver()` understand them.

Upstream parses with blang/semver (strict semver 2.0.0: no `v` prefix, no leading
zeros, all three numbers present) and offers an opt-in normalization that drops a `v`,
fills in missing minor/patch numbers and strips leading zeros. Build metadata never
takes part in comparison or equality.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NUMBER = re.compile(r"0|[1-9][0-9]*")
_IDENT = re.compile(r"[0-9A-Za-z-]+")


@dataclass(frozen=True, eq=False)
class Semver:
    major: int
    minor: int
    patch: int
    pre: tuple[str | int, ...] = ()
    build: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str, normalize: bool = False) -> Semver:
        """Strict parse, or the normalizing parse when `normalize` is set; ValueError if bad."""
        if not isinstance(text, str):
            raise ValueError(f"version must be a string, not {type(text).__name__}")
        if normalize:
            text = _normalize(text)
        return _parse_strict(text)

    def compare(self, other: Semver) -> int:
        for a, b in ((self.major, other.major), (self.minor, other.minor),
                     (self.patch, other.patch)):
            if a != b:
                return 1 if a > b else -1
        if not self.pre and not other.pre:
            return 0
        if not self.pre:
            return 1
        if not other.pre:
            return -1
        for x, y in zip(self.pre, other.pre, strict=False):
            if x == y:
                continue
            if isinstance(x, int) and isinstance(y, int):
                return 1 if x > y else -1
            if isinstance(x, int):
                return -1
            if isinstance(y, int):
                return 1
            return 1 if str(x) > str(y) else -1
        if len(self.pre) == len(other.pre):
            return 0
        return 1 if len(self.pre) > len(other.pre) else -1

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Semver) and self.compare(other) == 0

    def __hash__(self) -> int:
        return hash((self.major, self.minor, self.patch, self.pre))

    def __lt__(self, other: Semver) -> bool:
        return self.compare(other) < 0

    def __gt__(self, other: Semver) -> bool:
        return self.compare(other) > 0

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.pre:
            text += "-" + ".".join(str(p) for p in self.pre)
        if self.build:
            text += "+" + ".".join(self.build)
        return text

    def __repr__(self) -> str:
        return f"Semver({str(self)!r})"


def is_semver(text: str, normalize: bool = False) -> bool:
    try:
        Semver.parse(text, normalize)
    except ValueError:
        return False
    return True


def _parse_strict(text: str) -> Semver:
    if not text:
        raise ValueError("version string empty")
    core, plus, build_text = text.partition("+")
    core, dash, pre_text = core.partition("-")
    parts = core.split(".")
    if len(parts) != 3:
        raise ValueError(f"version {text!r}: no major, minor and patch numbers")
    numbers: list[int] = []
    for label, part in zip(("major", "minor", "patch"), parts, strict=True):
        if not _NUMBER.fullmatch(part):
            if part.isdigit():
                raise ValueError(f"version {text!r}: {label} number must not contain leading zeroes")
            raise ValueError(f"version {text!r}: invalid character(s) in {label} number {part!r}")
        numbers.append(int(part))
    pre: list[str | int] = []
    if dash:
        for ident in pre_text.split("."):
            if not ident or not _IDENT.fullmatch(ident):
                raise ValueError(f"version {text!r}: invalid prerelease identifier {ident!r}")
            if ident.isdigit():
                if len(ident) > 1 and ident[0] == "0":
                    raise ValueError(f"version {text!r}: prerelease number {ident!r} has a leading zero")
                pre.append(int(ident))
            else:
                pre.append(ident)
    build: list[str] = []
    if plus:
        for ident in build_text.split("."):
            if not ident or not _IDENT.fullmatch(ident):
                raise ValueError(f"version {text!r}: invalid build identifier {ident!r}")
            build.append(ident)
    return Semver(numbers[0], numbers[1], numbers[2], tuple(pre), tuple(build))


def _normalize(text: str) -> str:
    """Upstream's normalization: drop one `v`, strip leading zeros, pad to three numbers."""
    if text.startswith("v"):
        text = text[1:]
    parts = text.split(".", 2)
    for i, part in enumerate(parts):
        if len(part) > 1:
            stripped = part.lstrip("0")
            if not stripped or not stripped[0].isdigit():
                stripped = "0" + stripped
            parts[i] = stripped
    if len(parts) < 3:
        if any(c in parts[-1] for c in "+-"):
            raise ValueError("short version cannot contain PreRelease/Build meta data")
        parts.extend("0" * (3 - len(parts)))
    return ".".join(parts)
