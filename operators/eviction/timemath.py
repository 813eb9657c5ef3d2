"""Times and durations from API values, computed without ever overflowing.

API integers are int64 (`tolerationSeconds` up to 9223372036854775807) and timestamps
reach year 9999; Python's `timedelta` stops at 999,999,999 days and `datetime` at year
9999, so naive sums raise `OverflowError`. Upstream converts `tolerationSeconds` into an
int64 count of nanoseconds, which wraps for anything past about 292 years and then
evicts at once: an overflow, not a semantic. draco instead says that a moment past the
last representable API timestamp (9999-12-31T23:59:59Z) never comes.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

LAST = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)  # the last RFC 3339 second the API can write
LONGEST = timedelta.max


def plus_seconds(start: datetime, seconds: float) -> datetime | None:
    """`start + seconds`, or None when that lies past `LAST` (it never comes).

    Negative or NaN seconds count as zero, as a negative tolerationSeconds does upstream.
    """
    if not seconds > 0:  # also NaN
        return start
    if start > LAST:
        return None
    room = LAST - start  # exact: both are representable
    if isinstance(seconds, int):
        # whole seconds: n <= floor(room) exactly when start + n <= LAST
        if seconds > room // timedelta(seconds=1):
            return None
        return start + timedelta(seconds=seconds)
    if math.isinf(seconds) or seconds > room.total_seconds():
        return None
    return start + timedelta(seconds=seconds)


def plus(start: datetime, delta: timedelta) -> datetime | None:
    """`start + delta` for a non-negative delta, None past `LAST`."""
    if delta <= timedelta(0):
        return start
    if start > LAST or delta > LAST - start:
        return None
    return start + delta


def duration(seconds: float) -> timedelta:
    """A settings value in seconds as a timedelta: negative and NaN are zero, anything
    too long for a timedelta is the longest one."""
    if not seconds > 0:
        return timedelta(0)
    if math.isinf(seconds) or seconds >= LONGEST.total_seconds():
        return LONGEST
    return timedelta(seconds=seconds)


def seconds_until(moment: datetime | None, now: datetime) -> float:
    """Seconds from `now` to `moment` (never negative); infinity for a moment that never comes."""
    if moment is None:
        return math.inf
    return max((moment - now).total_seconds(), 0.0)
