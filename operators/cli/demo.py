"""`draco demo`: draco's embedded API server, every controller of `draco run`, and an
example cluster, with what happens narrated step by step and checked against the API.

It finishes on its own (exit 0 when every step happened as narrated, 1 when one did
not) unless --keep leaves it running until Ctrl-C. With --cluster-dir DIR it runs the
same scenario against a cluster started by `hack/cluster up --dir DIR`, where
kube-scheduler binds the pods, in a namespace of its own, and removes what it created
at the end.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from operators.cli.inputs import UsageError

# Internal hooks for tests, not for users: a subset of the controllers (a step that
# needs a missing one then fails), a shorter timeout per step, the first steps only.
CONTROLLERS_ENV = "DRACO_DEMO_CONTROLLERS"
TIMEOUT_ENV = "DRACO_DEMO_STEP_TIMEOUT"
STEPS_ENV = "DRACO_DEMO_STEPS"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "demo", help="the embedded API server, all controllers and an example cluster, narrated",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", action="store_true",
                        help="keep the API server and the controllers running after the last step, "
                             "until Ctrl-C (with --cluster-dir: also keep the demo's objects)")
    parser.add_argument("--cluster-dir", type=Path, default=None, metavar="DIR",
                        help="run against the cluster `hack/cluster up --dir DIR` started "
                             "(its DIR/kubeconfig) instead of the embedded API server")
    parser.set_defaults(func=run)


def run_settings() -> argparse.Namespace:
    """`draco run`'s settings with no flags given: the demo runs the operator as it ships."""
    from operators.cli import run as run_command

    parser = argparse.ArgumentParser()
    run_command.register(parser.add_subparsers(dest="command"))
    return parser.parse_args(["run"])


class OperatorHandle:
    def __init__(self, controllers: Sequence[str]) -> None:
        from operators.cli.operator_thread import OperatorThread

        self.thread = OperatorThread(list(controllers), run_settings()).start()
        self.native_id: int | None = self.thread._thread.native_id

    def stop(self) -> None:
        from operators.cli.operator_thread import OperatorThreadHung

        try:
            self.thread.stop()
        except OperatorThreadHung as hung:  # the demo's verdict stands; the process exits anyway
            print(f"draco demo: warning: {hung}", file=sys.stderr)


def allocate_view(claim: str) -> dict[str, Any]:
    """`draco allocate --claim NS/NAME -o json` against the current kubeconfig: that claim's record."""
    from operators.allocator import DEFAULT_BUDGET_S
    from operators.cli import allocate
    from operators.cli.state import load_state

    tracker, objects = load_state(argparse.Namespace(sources=[]))
    doc = allocate.document(tracker, objects, [allocate.claim_key(claim)], None, DEFAULT_BUDGET_S)
    return dict(doc["claims"][claim])


def evictions_view() -> tuple[str, dict[str, Any]]:
    """`draco evictions` against the current kubeconfig: (its table, its JSON document)."""
    from datetime import UTC, datetime

    from operators.cli import evictions
    from operators.cli.state import load_state

    now = datetime.now(UTC)
    tracker, _ = load_state(argparse.Namespace(sources=[]), clock=lambda: now)
    doc = evictions.document(tracker, now)
    return evictions.table(doc), doc


def controllers() -> list[str]:
    from operators.cli.run import CONTROLLERS

    chosen = os.environ.get(CONTROLLERS_ENV)
    if chosen is None:
        return list(CONTROLLERS)
    names = [c.strip() for c in chosen.split(",") if c.strip()]
    unknown = sorted(set(names) - set(CONTROLLERS))
    if unknown:
        raise UsageError(f"{CONTROLLERS_ENV}: unknown controller(s) {', '.join(unknown)}")
    return names


def step_timeout() -> float:
    from operators.demo.session import DEFAULT_STEP_TIMEOUT

    raw = os.environ.get(TIMEOUT_ENV)
    if not raw:
        return DEFAULT_STEP_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        raise UsageError(f"{TIMEOUT_ENV}: not a number of seconds: {raw!r}") from None
    if not value > 0:
        raise UsageError(f"{TIMEOUT_ENV}: must be more than 0, not {raw}")
    return value


def steps() -> Sequence[Any]:
    from operators.demo.steps import STEPS

    raw = os.environ.get(STEPS_ENV)
    if not raw:
        return STEPS
    try:
        count = int(raw)
    except ValueError:
        raise UsageError(f"{STEPS_ENV}: not a number of steps: {raw!r}") from None
    if not 1 <= count <= len(STEPS):
        raise UsageError(f"{STEPS_ENV}: between 1 and {len(STEPS)}, not {raw}")
    return STEPS[:count]


def run(args: argparse.Namespace) -> int:
    from operators.demo.session import Hooks, Options, run_demo
    from operators.demo.steps import Views

    if args.cluster_dir is not None and not args.cluster_dir.is_dir():
        raise UsageError(f"--cluster-dir {args.cluster_dir}: not a directory")
    hooks = Hooks(controllers=controllers(), start_controllers=OperatorHandle,
                  views=Views(allocate=allocate_view, evictions=evictions_view))
    options = Options(keep=args.keep, cluster_dir=args.cluster_dir, step_timeout=step_timeout(),
                      steps=steps())
    return run_demo(options, hooks, sys.stdout)
