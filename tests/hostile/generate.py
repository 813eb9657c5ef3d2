"""The seeded generator: COUNT hostile objects from the tables in `cases`, the same list
for the same seed and context.

Kinds take turns; within a kind the mutations come in a shuffled cycle, so a run of
COUNT >= kinds x mutations tries every row at least once. Each case is a create, or
an update (a well-formed object created first, then replaced by the hostile one)
when the row allows it. `DRACO_HOSTILE_SEED` replays a run, `DRACO_HOSTILE_COUNT`
extends it (see `settings`).
"""

from __future__ import annotations

import copy
import os
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tests.hostile.cases import DELETE, KINDS, Ctx, Expect, Mutation

DEFAULT_COUNT = 100


@dataclass(frozen=True, slots=True)
class Case:
    seq: int
    kind: str
    label: str  # the mutation's label
    op: str  # "create" | "update"
    name: str  # metadata.name as sent ("" when the mutation empties it)
    base: dict[str, Any]  # update: the well-formed object created first
    body: dict[str, Any]  # the hostile object
    expect: Expect
    strict: bool
    shown: str  # the odd value, shortened, for tables and failure messages

    def describe(self) -> str:
        return f"#{self.seq} {self.kind} {self.op} [{self.label}] = {self.shown}"


def settings(environ: dict[str, str] | None = None) -> tuple[int, int]:
    """(seed, count) from DRACO_HOSTILE_SEED / DRACO_HOSTILE_COUNT, a fresh seed otherwise."""
    env = os.environ if environ is None else environ
    seed_text = env.get("DRACO_HOSTILE_SEED", "").strip()
    seed = int(seed_text) if seed_text else int(time.time() * 1000) % 1_000_000_007
    count = int(env.get("DRACO_HOSTILE_COUNT", "").strip() or DEFAULT_COUNT)
    return seed, count


def set_path(body: dict[str, Any], path: Sequence[str | int], value: Any) -> None:
    """Put VALUE at PATH in BODY (DELETE removes the field), creating objects on the way."""
    node: Any = body
    for step in path[:-1]:
        if isinstance(step, int):
            node = node[step]
            continue
        if not isinstance(node.get(step), dict | list):
            node[step] = {}
        node = node[step]
    last = path[-1]
    if value is DELETE:
        if isinstance(last, int):
            del node[last]
        else:
            node.pop(last, None)
    else:
        node[last] = value


def shorten(value: Any, limit: int = 48) -> str:
    if value is DELETE:
        return "(removed)"
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit - 12]}…({len(text)} chars)"


def make_case(seq: int, kind: str, mutation: Mutation, rng: random.Random, ctx: Ctx) -> Case:
    spec = KINDS[kind]
    name = f"hx-{ctx.test_id}-{seq}"
    base = spec.base(ctx, name, rng)
    value = rng.choice(mutation.values)
    if callable(value):
        value = value(rng, ctx)
    body = copy.deepcopy(base)
    set_path(body, mutation.path, value)
    op = "create" if mutation.create_only or rng.random() < 0.5 else "update"
    sent_name = str((body.get("metadata") or {}).get("name") or "")
    return Case(seq, kind, mutation.label, op, sent_name, base, body, mutation.expect, mutation.strict,
                shorten(value))


def generate(seed: int, count: int, ctx: Ctx, kinds: Sequence[str]) -> list[Case]:
    rng = random.Random(seed)
    cycles: dict[str, list[Mutation]] = {k: [] for k in kinds}
    out = []
    for seq in range(count):
        kind = kinds[seq % len(kinds)]
        if not cycles[kind]:
            cycles[kind] = list(KINDS[kind].mutations)
            rng.shuffle(cycles[kind])
        out.append(make_case(seq, kind, cycles[kind].pop(), rng, ctx))
    return out
