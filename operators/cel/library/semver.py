"""Kubernetes' semver library: semver(), isSemver() and major/minor/patch."""

from __future__ import annotations

from typing import Any

import celpy.celtypes as ct

from operators.cel.library.base import is_bool, need_str
from operators.cel.values import CelSemver, EvalError, type_name
from operators.model.semver import Semver


def f_semver(s: Any, normalize: Any = None) -> CelSemver:
    need_str(s)
    if normalize is not None and not is_bool(normalize):
        raise EvalError(f"no such overload: semver(string, {type_name(normalize)})")
    try:
        return CelSemver(Semver.parse(s, bool(normalize)))
    except ValueError as ex:
        raise EvalError(str(ex)) from None


def f_is_semver(s: Any, normalize: Any = None) -> ct.BoolType:
    need_str(s)
    if normalize is not None and not is_bool(normalize):
        raise EvalError(f"no such overload: isSemver(string, {type_name(normalize)})")
    try:
        Semver.parse(s, bool(normalize))
    except ValueError:
        return ct.BoolType(False)
    return ct.BoolType(True)


def _need_semver(v: Any, name: str) -> Semver:
    if not isinstance(v, CelSemver):
        raise EvalError(f"no such overload: {type_name(v)}.{name}()")
    return v.v


def f_major(v: Any) -> ct.IntType:
    return ct.IntType(_need_semver(v, "major").major)


def f_minor(v: Any) -> ct.IntType:
    return ct.IntType(_need_semver(v, "minor").minor)


def f_patch(v: Any) -> ct.IntType:
    return ct.IntType(_need_semver(v, "patch").patch)
