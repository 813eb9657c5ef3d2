"""Consumable capacity (KEP-5075): what a request consumes of a device, as upstream
computes it, and what shares of devices other claims hold.

Per device capacity (every one the device has, not only those the request names):
- not requested: the policy's `default`, else the whole capacity;
- requested without a policy: the amount asked;
- a `validRange` with a minimum: below it, the minimum; with a step, rounded up to the
  next `min + k*step` (integers, as upstream's int64 path: fractions round up first),
  written in the step's format;
- `validValues`: the smallest valid value not below the amount (above all of them the
  amount itself, which then violates the policy).
A device fits when the request names no capacity the device lacks, no amount violates
the policy (above `max`, off the step, not a valid value; the default itself always
passes) and, per capacity, what other claims' shares hold plus what this attempt
already gave plus the new amount stays within the capacity. A negative amount is an
error, as upstream's; from 1.38 a negative request is one before any rounding, and a
request naming one capacity both short and qualified is one too (`Semantics`).

Shares held by allocated claims: results with a `shareID` (admin access holds nothing).
A result without one keeps the whole device (it is in use), even on a device that
allows multiple allocations.
"""

from __future__ import annotations

import math
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from operators.allocator.features import DEFAULT_SEMANTICS, Semantics
from operators.allocator.inventory import Candidate
from operators.allocator.requests import AllocationError
from operators.model import DeviceID, ResourceClaim
from operators.model.capacity import CapacityPolicy
from operators.model.quantity import Quantity, parse_quantity
from operators.model.values import qualify

_PARSED: dict[str, Quantity] = {}


def _q(text: str) -> Quantity:
    q = _PARSED.get(text)
    if q is None:
        q = parse_quantity(text)
        if len(_PARSED) < 4096:
            _PARSED[text] = q
    return q


def _ceil(q: Quantity) -> int:
    return math.ceil(q.value)


INT64_MAX = 2**63 - 1


def _milli(q: Quantity) -> int | None:
    """The value in thousandths when it is exactly that and fits int64 (else None)."""
    whole, rest = divmod(q.value.numerator * 1000, q.value.denominator)  # no Fraction built
    if rest or abs(whole) > INT64_MAX:
        return None
    return whole


def use_milli(p: CapacityPolicy, fractional: bool) -> bool:
    """Whether range arithmetic runs in thousandths (DRAFractionalCapacityRange): the
    gate is on and min, max and step are all exact in thousandths (a step of at least
    one thousandth)."""
    if not fractional:
        return False
    found = _MILLI_RANGES.get(id(p))
    if found is None or found[0] is not p:  # keyed by identity, kept alive by the entry
        exact = all(q is None or _milli(q) is not None for q in (p.min, p.max, p.step)) and (
            p.step is None or (_milli(p.step) or 0) >= 1)
        if len(_MILLI_RANGES) >= 8192:
            _MILLI_RANGES.clear()
        found = _MILLI_RANGES[id(p)] = (p, exact)
    return found[1]


_MILLI_RANGES: dict[int, tuple[CapacityPolicy, bool]] = {}


def _not_representable(why: str) -> AllocationError:
    return AllocationError(f"capacity request cannot be represented in the device's range "
                           f"arithmetic: {why}")


def round_up_range(req: Quantity, p: CapacityPolicy, fractional: bool = False) -> Quantity:
    """The request rounded up onto `min + k*step`: in thousandths with fractional ranges,
    else in whole units (fractions round up first). Like upstream, a request or a
    rounded value beyond int64 (in those units) is an error that stops the allocation."""
    assert p.min is not None
    if req.value < p.min.value:
        return p.min
    if p.step is None:
        return req
    if use_milli(p, fractional):
        asked = _milli(req)
        if asked is None:
            raise _not_representable(f"request {req} is not a representable milli value")
        lo, step = _milli(p.min) or 0, _milli(p.step) or 1
        n = -(-(asked - lo) // step)
        if n > (INT64_MAX - lo) // step:
            raise _not_representable(f"rounding request {req} up to the next step passes the "
                                     "milli-value range")
        return Quantity(Fraction(lo + step * n, 1000), p.step.format)
    if req.value > INT64_MAX:
        raise _not_representable(f"request {req} exceeds MaxInt64")
    lo, step = _ceil(p.min), _ceil(p.step)
    n = math.ceil(Fraction(_ceil(req) - lo, step))
    if lo >= 0 and n > (INT64_MAX - lo) // step:
        raise _not_representable(f"rounding request {req} up to the next step passes MaxInt64")
    return Quantity(Fraction(lo + n * step), p.step.format)


def consumed_amount(requested: Quantity | None, value: Quantity, p: CapacityPolicy | None,
                    fractional: bool = False) -> Quantity:
    if requested is None:
        return p.default if p is not None and p.default is not None else value
    if p is None:
        return requested
    if p.range_set and p.min is not None:
        return round_up_range(requested, p, fractional)
    if p.valid_values:
        return next((v for v in p.valid_values if v.value >= requested.value), requested)
    return requested


def violates(amount: Quantity, p: CapacityPolicy | None, fractional: bool = False) -> bool:
    if p is None:
        return False
    if p.default is not None and amount.value == p.default.value and amount.format == p.default.format:
        return False
    if p.range_set:
        if p.max is not None and amount.value > p.max.value:
            return True
        if p.step is not None and p.min is not None:
            if use_milli(p, fractional):
                asked = _milli(amount)
                return asked is None or (asked - (_milli(p.min) or 0)) % (_milli(p.step) or 1) != 0
            return (_ceil(amount) - _ceil(p.min)) % _ceil(p.step) != 0
        return False
    if p.valid_values:
        return not any(amount.value == v.value for v in p.valid_values)
    return False


Number = int | Fraction


def num(value: Fraction) -> Number:
    """An exact value as an int when it is one: capacities are whole bytes almost always,
    and int arithmetic is many times faster than Fraction's."""
    return value.numerator if value.denominator == 1 else value


def _asked(requests: Mapping[str, Quantity], d: Candidate,
           semantics: Semantics) -> dict[str, Quantity] | None:
    """The request by qualified name; None when D lacks one of them. Before 1.38 names
    compare as spelled (a short request does not reach a capacity the device spells with
    its driver's domain, nor the reverse: the real kube-scheduler 1.36 and 1.37 leave such
    a pod pending); from 1.38 both sides are qualified, and naming one capacity of D twice
    (short and qualified) is an error."""
    asked: dict[str, Quantity] = {}
    spelled: dict[str, str] = {}
    for name, q in requests.items():
        qualified = qualify(name, d.id.driver)
        if qualified not in d.capacity:
            return None
        own_domain = qualified.rpartition("/")[0] == d.id.driver
        if (not semantics.device_spellings and own_domain
                and (name == qualified) != (qualified in d.domain_spelled)):
            return None  # spelled the other way round (before 1.38)
        if qualified in spelled and semantics.capacity_name_conflicts:
            raise AllocationError(f'capacity "{qualified.rpartition("/")[2]}" requested both as '
                                  f'"{name}" and as "{spelled[qualified]}"')
        asked[qualified], spelled[qualified] = q, name
    return asked


def consumption(requests: Mapping[str, Quantity], d: Candidate,
                held: Mapping[str, Number], allocating: Mapping[str, Number],
                fractional: bool = False,
                semantics: Semantics = DEFAULT_SEMANTICS) -> dict[str, Quantity] | None:
    """What D would give the request, by qualified capacity name; None when it cannot.
    `held`: what allocated claims' shares consume; `allocating`: this attempt's."""
    if requests:
        found = _asked(requests, d, semantics)
        if found is None:
            return None
        asked = found
    else:
        asked = {}
    if semantics.negative_requests_abort:  # before rounding could lift it to a minimum
        for name, q in asked.items():
            if q.value < 0:
                raise AllocationError(f"device {d.id}: capacity {name}: capacity value is "
                                      f"negative: request {q}")
    out: dict[str, Quantity] = {}
    for name, text in d.capacity.items():
        requested = asked.get(name)
        amount, value, total, bad = _amount(requested, text, d.capacity_policies.get(name),
                                            fractional)
        if value < 0:
            raise AllocationError(f"device {d.id}: capacity {name}: negative amount {amount}")
        if bad:
            return None
        if held.get(name, 0) + allocating.get(name, 0) + value > total:
            return None
        out[name] = amount
    return out


_AMOUNTS: dict[tuple[int, str, int, bool],
               tuple[Quantity, Number, Number, bool, CapacityPolicy | None, Quantity | None]] = {}


def _amount(requested: Quantity | None, text: str, policy: CapacityPolicy | None,
            fractional: bool) -> tuple[Quantity, Number, Number, bool]:
    """(amount, its value, the capacity's value, whether the amount violates the policy), computed
    once per (request, capacity, policy): a claim tried on devices published alike
    rounds its amount once. The request and the policy are keyed by identity (hashing
    their quantities cost more than the rounding); the entry keeps both, so their ids
    cannot be reused while it lives. Bounded."""
    k = (id(requested), text, id(policy), fractional)
    found = _AMOUNTS.get(k)
    if found is None or found[4] is not policy or found[5] is not requested:
        value = _q(text)
        amount = consumed_amount(requested, value, policy, fractional)
        found = (amount, num(amount.value), num(value.value), violates(amount, policy, fractional), policy,
                 requested)
        if len(_AMOUNTS) >= 8192:
            _AMOUNTS.clear()
        _AMOUNTS[k] = found
    return found[0], found[1], found[2], found[3]


def short_name(name: str, driver: str) -> str:
    """The capacity name as results carry it before 1.38: drivers publish names in their
    own domain without it, so the domain is dropped when it is the driver's."""
    domain, _, short = name.rpartition("/")
    return short if domain == driver else name


def status_name(name: str, d: Candidate) -> str:
    """The capacity name as consumedCapacity carries it: as the device spells it (with its
    driver's domain when it published it so, which from 1.38 also wins when it published
    both; before 1.38 such a device is never allocated)."""
    if name in d.domain_spelled:
        return name
    return short_name(name, d.id.driver)


@dataclass
class Shares:
    """Shares allocated claims hold: per device, what they consume in sum."""

    held: dict[DeviceID, dict[str, Number]] = field(default_factory=dict)

    def add(self, device: DeviceID, consumed: Iterable[tuple[str, Quantity]]) -> None:
        into = self.held.setdefault(device, {})
        for name, q in consumed:
            n = qualify(name, device.driver)
            into[n] = into.get(n, 0) + num(q.value)

    def __contains__(self, device: object) -> bool:
        return device in self.held


NO_SHARES = Shares()


def shares_from_claims(claims: Iterable[ResourceClaim]) -> Shares:
    out = Shares()
    for c in claims:
        if c.allocation is not None:
            for r in c.allocation.results:
                if r.share_id and not r.admin_access:
                    out.add(r.id, r.consumed_capacity.items())
    return out


class Charged(Container[DeviceID]):
    """Devices whose counters allocated claims use: held whole, or shared."""

    def __init__(self, in_use: Container[DeviceID], shares: Shares) -> None:
        self.in_use, self.shares = in_use, shares

    def __contains__(self, device: object) -> bool:
        return device in self.in_use or device in self.shares


__all__ = ["NO_SHARES", "Charged", "Shares", "consumed_amount", "consumption", "round_up_range",
           "shares_from_claims", "short_name", "status_name", "violates"]
