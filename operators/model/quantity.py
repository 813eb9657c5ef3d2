"""Kubernetes resource quantities (`resource.Quantity`) with exact arithmetic.

Capacities in ResourceSlices are quantities, and both CEL selectors and the tracker's
capacity checks compare them. Floats would make `quantity("0.1").add(quantity("0.2"))`
differ from `quantity("300m")`, so values are kept as exact fractions.

Parsing follows upstream: an optional sign, digits with an optional fraction, then a
binary-SI suffix (Ki..Ei), a decimal-SI suffix (n u m "" k M G T P E) or a decimal
exponent (`e3`, `E-2`). Values finer than one nano-unit round up, away from zero, to
the next nano-unit, as upstream does. `str()` gives upstream's canonical form
(`1.5` -> `1500m`, `1.5Gi` -> `1536Mi`, `1000` -> `1k`).

Upstream keeps small values in an int64 (value, scale) pair and larger or finer ones in
an arbitrary-precision decimal; a few user-visible results depend on that choice
(`asInteger()` only succeeds for the int64 form with a non-negative scale). The pair is
tracked here as `int64_form` so those results match.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Literal

QuantityFormat = Literal["DecimalSI", "BinarySI", "DecimalExponent"]

_INT64_MAX = 2**63 - 1
_INT64_MIN = -(2**63)
_NANO = Fraction(1, 10**9)
# Digits an int64 can always hold; upstream's precision budget for the fast path.
_MAX_INT64_FACTORS = 18

_BINARY: dict[str, int] = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL: dict[str, int] = {
    "n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18,
}
_DECIMAL_SUFFIX_FOR = {exp: suffix for suffix, exp in _DECIMAL.items()}
_BINARY_SUFFIX_FOR = {exp // 10: suffix for suffix, exp in _BINARY.items()}
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")


def _int64_ok(value: int) -> bool:
    return _INT64_MIN <= value <= _INT64_MAX


def _round_away_to_nano(value: Fraction) -> Fraction:
    scaled = value / _NANO
    if scaled.denominator == 1:
        return value
    magnitude = math.ceil(abs(scaled))
    return Fraction(magnitude if scaled > 0 else -magnitude) * _NANO


@dataclass(frozen=True, eq=False)
class Quantity:
    """An exact quantity plus the format its canonical string uses.

    Equality and ordering compare values only (`1Gi == 1073741824`), as upstream's Cmp.
    """

    value: Fraction
    format: QuantityFormat = "DecimalSI"
    # (unscaled int64, base-10 scale) when upstream would hold this value in int64 form.
    int64_form: tuple[int, int] | None = field(default=None, compare=False)

    # -- construction ---------------------------------------------------------
    @classmethod
    def parse(cls, text: str) -> Quantity:
        """Parse a quantity string; ValueError names the problem and the input."""
        if not isinstance(text, str):
            raise ValueError(f"quantity must be a string, not {type(text).__name__}")
        if text == "":
            raise ValueError("quantity is empty")
        if text == "0":
            return cls(Fraction(0), "DecimalSI", (0, 0))
        positive, num, denom, suffix = _scan(text)
        base, exponent, fmt = _interpret(suffix, text)
        digits = num + denom
        if not digits:
            raise ValueError(f"quantity {text!r}: unable to parse numeric part")
        magnitude = Fraction(int(digits), 10 ** len(denom))
        if base == 10:
            magnitude *= Fraction(10) ** exponent
        else:
            magnitude *= 2**exponent
        value = magnitude if positive else -magnitude
        int64_form = _fast_path_form(num, denom, base, exponent, fmt, positive)
        if int64_form is None:
            value = _round_away_to_nano(value)
            if fmt == "BinarySI" and value > _INT64_MAX:
                value = Fraction(_INT64_MAX)
            if fmt == "BinarySI" and 0 < abs(value) < 1:
                fmt = "DecimalSI"
        return cls(value, fmt, int64_form)

    @classmethod
    def from_int(cls, number: int, fmt: QuantityFormat = "DecimalExponent") -> Quantity:
        return cls(Fraction(number), fmt, (number, 0) if _int64_ok(number) else None)

    # -- comparison -----------------------------------------------------------
    def compare(self, other: Quantity) -> int:
        return (self.value > other.value) - (self.value < other.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __lt__(self, other: Quantity) -> bool:
        return self.value < other.value

    def __le__(self, other: Quantity) -> bool:
        return self.value <= other.value

    def __gt__(self, other: Quantity) -> bool:
        return self.value > other.value

    def __ge__(self, other: Quantity) -> bool:
        return self.value >= other.value

    def sign(self) -> int:
        return (self.value > 0) - (self.value < 0)

    # -- arithmetic (upstream: a zero receiver takes the operand's format) ------
    def add(self, other: Quantity) -> Quantity:
        fmt = other.format if self.value == 0 else self.format
        return Quantity(self.value + other.value, fmt,
                        _int64_add(self.int64_form, other.int64_form))

    def sub(self, other: Quantity) -> Quantity:
        fmt = other.format if self.value == 0 else self.format
        negated = None if other.int64_form is None else (-other.int64_form[0], other.int64_form[1])
        if negated is not None and not _int64_ok(negated[0]):
            negated = None
        return Quantity(self.value - other.value, fmt, _int64_add(self.int64_form, negated))

    def neg(self) -> Quantity:
        form = self.int64_form
        if form is not None:
            form = (-form[0], form[1]) if _int64_ok(-form[0]) else None
        return Quantity(-self.value, self.format, form)

    def mul(self, factor: int) -> Quantity:
        form = self.int64_form
        if form is not None:
            product = form[0] * factor
            form = (product, form[1]) if _int64_ok(product) else None
        return Quantity(self.value * factor, self.format, form)

    # -- conversions ----------------------------------------------------------
    def as_int64(self) -> int | None:
        """The value as int64 where upstream's `AsInt64` succeeds, else None."""
        if self.int64_form is None:
            return None
        unscaled, scale = self.int64_form
        if scale == 0:
            return unscaled
        if scale < 0:
            return None
        result = unscaled * 10**scale
        return result if _int64_ok(result) else None

    def as_approximate_float(self) -> float:
        try:
            return float(self.value)
        except OverflowError:
            return math.inf if self.value > 0 else -math.inf

    def is_integer(self) -> bool:
        return self.value.denominator == 1

    # -- canonical string -----------------------------------------------------
    def __str__(self) -> str:
        if self.value == 0:
            return "0"
        fmt = self.format
        if fmt == "BinarySI":
            if -1024 < self.value < 1024 or self.value.denominator != 1:
                fmt = "DecimalSI"
            else:
                return _binary_string(int(self.value))
        mantissa, exponent = _decimal_canonical(self.value)
        if fmt == "DecimalExponent":
            return f"{mantissa}e{exponent}" if exponent else str(mantissa)
        suffix = _DECIMAL_SUFFIX_FOR.get(exponent)
        if suffix is None:  # beyond E: upstream has no suffix; the exponent form is exact
            return f"{mantissa}e{exponent}"
        return f"{mantissa}{suffix}"

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r})"


def parse_quantity(text: str) -> Quantity:
    return Quantity.parse(text)


def is_quantity(text: str) -> bool:
    try:
        Quantity.parse(text)
    except ValueError:
        return False
    return True


# -- helpers -------------------------------------------------------------------


def _scan(text: str) -> tuple[bool, str, str, str]:
    """Split `text` into sign, integer digits, fraction digits and suffix."""
    pos, end = 0, len(text)
    positive = True
    if text[0] in "+-":
        positive = text[0] == "+"
        pos = 1
    start = pos
    while pos < end and text[pos].isdigit() and text[pos].isascii():
        pos += 1
    num = text[start:pos]
    denom = ""
    has_point = pos < end and text[pos] == "."
    if has_point:
        pos += 1
        start = pos
        while pos < end and text[pos].isdigit() and text[pos].isascii():
            pos += 1
        denom = text[start:pos]
    if not num and not denom:
        raise ValueError(f"quantity {text!r}: unable to parse numeric part")
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos].isdigit() and text[pos].isascii():
        pos += 1
    if pos != end:
        raise ValueError(
            f"quantity {text!r}: must match the regular expression "
            "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        )
    return positive, num, denom, text[suffix_start:]


def _interpret(suffix: str, text: str) -> tuple[int, int, QuantityFormat]:
    if suffix in _DECIMAL:
        return 10, _DECIMAL[suffix], "DecimalSI"
    if suffix in _BINARY:
        return 2, _BINARY[suffix], "BinarySI"
    if len(suffix) > 1 and suffix[0] in "eE":
        exp_text = suffix[1:]
        body = exp_text[1:] if exp_text[0] in "+-" else exp_text
        if body.isdigit() and body.isascii():
            exponent = int(exp_text)
            if _int64_ok(exponent):
                return 10, exponent, "DecimalExponent"
    raise ValueError(f"quantity {text!r}: unable to parse quantity's suffix {suffix!r}")


def _fast_path_form(
    num: str, denom: str, base: int, exponent: int, fmt: QuantityFormat, positive: bool
) -> tuple[int, int] | None:
    """The int64 (value, scale) upstream would store, or None for its decimal form."""
    num = num.lstrip("0")
    mantissa = 1
    if fmt == "BinarySI":
        if exponent < 0 or denom:
            return None
        mantissa = 1 << exponent
        precision = 15 - len(num) - int(exponent * 3 / 10) - 1
        scale = 0
    else:
        precision = _MAX_INT64_FACTORS - (len(num) + len(denom))
        scale = exponent
    if precision < 0:
        return None
    scale -= len(denom)
    if scale < -9:
        return None
    shifted = int((num + denom) or "0")
    if not _int64_ok(shifted):
        return None
    result = shifted * mantissa
    if not _int64_ok(result):
        return None
    return (result if positive else -result), scale


def _int64_add(a: tuple[int, int] | None, b: tuple[int, int] | None) -> tuple[int, int] | None:
    if a is None or b is None:
        return None
    if b[0] == 0:
        return a
    if a[0] == 0:
        return b
    scale = min(a[1], b[1])
    left = a[0] * 10 ** (a[1] - scale)
    right = b[0] * 10 ** (b[1] - scale)
    if not (_int64_ok(left) and _int64_ok(right) and _int64_ok(left + right)):
        return None
    return left + right, scale


def _decimal_canonical(value: Fraction) -> tuple[int, int]:
    """Integer mantissa and an exponent that is a multiple of 3 (value = m * 10**e)."""
    exponent = 0
    scaled = value
    while scaled.denominator != 1:
        scaled *= 10
        exponent -= 1
    mantissa = int(scaled)
    while mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    while exponent % 3:
        mantissa *= 10
        exponent -= 1
    return mantissa, exponent


def _binary_string(value: int) -> str:
    exponent = 0
    while value % 1024 == 0 and exponent < 6:
        value //= 1024
        exponent += 1
    return f"{value}{_BINARY_SUFFIX_FOR.get(exponent, '')}"
