"""draco's own version, as the installed distribution says: a module of its own, so that
`main` (for `--version`) and `run` (for its start-up log line) both read it without
importing each other."""

from __future__ import annotations


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("draco")
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "unknown"
