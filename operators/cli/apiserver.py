"""`draco apiserver`: the embedded Kubernetes API server, for trying draco without a cluster."""

from __future__ import annotations

import argparse
from typing import Any

from operators.apiserver.runner import add_arguments, run


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "apiserver", help="the embedded Kubernetes API server alone (prints how to point kubectl at it)",
        description=__doc__)
    add_arguments(parser)
    parser.set_defaults(func=lambda args: run(args))


__all__ = ["register", "argparse"]
