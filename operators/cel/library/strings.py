"""The cel-go strings extension that the Kubernetes environment enables (charAt, indexOf,
lowerAscii, replace, split, substring, trim, join, reverse, ...)."""

from __future__ import annotations

from typing import Any

import celpy.celtypes as ct

from operators.cel.library.base import need_str
from operators.cel.library.operators import op_eq
from operators.cel.values import EvalError


def f_char_at(s: Any, i: Any) -> ct.StringType:
    need_str(s)
    if not 0 <= int(i) <= len(s):
        raise EvalError(f"index out of range: {i}")
    return ct.StringType(s[int(i): int(i) + 1])


def f_index_of(s: Any, sub: Any, start: Any = None) -> ct.IntType:
    if isinstance(s, list):
        for i, v in enumerate(s):
            if op_eq(v, sub):
                return ct.IntType(i)
        return ct.IntType(-1)
    need_str(s, sub)
    begin = 0 if start is None else int(start)
    if not 0 <= begin <= len(s):
        raise EvalError(f"index out of range: {begin}")
    return ct.IntType(s.find(sub, begin))


def f_last_index_of(s: Any, sub: Any, end: Any = None) -> ct.IntType:
    if isinstance(s, list):
        for i in range(len(s) - 1, -1, -1):
            if op_eq(s[i], sub):
                return ct.IntType(i)
        return ct.IntType(-1)
    need_str(s, sub)
    if end is None:
        return ct.IntType(s.rfind(sub))
    if not 0 <= int(end) <= len(s):
        raise EvalError(f"index out of range: {end}")
    return ct.IntType(s.rfind(sub, 0, int(end) + len(sub)))


def f_lower_ascii(s: Any) -> ct.StringType:
    need_str(s)
    return ct.StringType("".join(c.lower() if c.isascii() else c for c in s))


def f_upper_ascii(s: Any) -> ct.StringType:
    need_str(s)
    return ct.StringType("".join(c.upper() if c.isascii() else c for c in s))


def f_replace(s: Any, old: Any, new: Any, count: Any = None) -> ct.StringType:
    need_str(s, old, new)
    n = -1 if count is None else int(count)
    return ct.StringType(s.replace(old, new, n))


def f_split(s: Any, sep: Any, limit: Any = None) -> ct.ListType:
    need_str(s, sep)
    n = -1 if limit is None else int(limit)
    if n == 0:
        return ct.ListType([])
    if sep == "":
        parts = list(s)
        if n > 0 and len(parts) > n:
            parts = parts[: n - 1] + ["".join(parts[n - 1:])]
    else:
        parts = s.split(sep, n - 1 if n > 0 else -1)
    return ct.ListType([ct.StringType(p) for p in parts])


def f_substring(s: Any, start: Any, end: Any = None) -> ct.StringType:
    need_str(s)
    stop = len(s) if end is None else int(end)
    if not 0 <= int(start) <= stop <= len(s):
        raise EvalError(f"index out of range: {start}..{stop}")
    return ct.StringType(s[int(start): stop])


def f_trim(s: Any) -> ct.StringType:
    need_str(s)
    return ct.StringType(s.strip())


def f_join(items: Any, sep: Any = "") -> ct.StringType:
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise EvalError("no such overload: join() needs a list of strings")
    need_str(sep)
    return ct.StringType(sep.join(items))


def f_reverse(s: Any) -> ct.StringType:
    need_str(s)
    return ct.StringType(s[::-1])
