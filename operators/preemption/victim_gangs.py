"""Gangs among the victims of a preemption: a running gang loses members only while it
keeps `minCount` running members, otherwise it goes as a whole. Pure.

A gang's running members are all its pods that run, those holding no device (a
launcher, a driver) included: they count towards `minCount`, and they go with the
gang when it goes whole. So a set of victims is valid when, for every gang it touches,
it takes either at most `spare` members (the running members beyond `minCount`) or
every running member.

The victim search works on a *wish*: the pods whose devices it wants freed. The
victims are the wish's closure: each gang the wish takes more than `spare` members of
is added whole. Reprieving a pod takes it out of the wish; the closure shrinks only
when the gang then keeps `minCount`, so the search can pass from "the whole gang goes"
to "one member goes" one pod at a time, and every set it tries is valid.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

# how many ways to cut gangs that cannot go whole a search tries per node or domain
WISHES = 16


@dataclass(frozen=True, slots=True)
class VictimGang:
    name: str  # KIND/NS/NAME, for messages
    members: tuple[str, ...]  # its running members (NS/NAME), launchers included
    min_count: int

    @property
    def spare(self) -> int:
        """How many members may go while the gang keeps minCount running."""
        return max(0, len(self.members) - self.min_count)


class VictimGangs:
    """Pod label -> the running gang it belongs to (pods of no gang are absent)."""

    def __init__(self, gangs: Iterable[VictimGang] = ()) -> None:
        self.of: dict[str, VictimGang] = {}
        for g in gangs:
            for label in g.members:
                self.of[label] = g

    def closure(self, wish: Iterable[str]) -> list[str]:
        """The victims a wish makes: WISH, plus every gang it takes beyond its spare."""
        out = list(dict.fromkeys(wish))
        if not self.of:
            return out
        taken: dict[str, int] = {}
        gangs: dict[str, VictimGang] = {}
        for label in out:
            g = self.of.get(label)
            if g is not None:
                taken[g.name] = taken.get(g.name, 0) + 1
                gangs[g.name] = g
        seen = set(out)
        for name, count in taken.items():
            g = gangs[name]
            if count > g.spare:
                for m in g.members:
                    if m not in seen:
                        seen.add(m)
                        out.append(m)
        return out

    def wishes(self, wish: Sequence[str], may_go: Callable[[str], bool],
               importance: Callable[[str], tuple[int, float]], limit: int = WISHES) -> Iterator[list[str]]:
        """The largest wishes within WISH whose closure takes no pod that may not go
        (MAY_GO false: a member of no lower priority, the preemptor's own gang): of a
        gang that cannot go whole only `spare` members may be wished, and which ones
        matters (a NIC here, a GPU there), so each choice is offered, the least
        important members first, up to LIMIT wishes in all."""
        out = [w for w in wish if may_go(w)]
        by_gang: dict[str, list[str]] = {}
        for label in out:
            g = self.of.get(label)
            if g is not None and not all(may_go(m) for m in g.members):
                by_gang.setdefault(g.name, []).append(label)
        cuts: list[list[set[str]]] = []  # per gang to cut: each choice of the members left out
        for labels in by_gang.values():
            g = self.of[labels[0]]
            if len(labels) > g.spare:
                ranked = sorted(labels, key=importance, reverse=True)
                cuts.append([set(labels) - set(keep) for keep in itertools.combinations(ranked, g.spare)])
        for choice in itertools.islice(itertools.product(*cuts), limit):
            drop = set().union(*choice)
            yield [w for w in out if w not in drop]


T = TypeVar("T")


def reprieve(wish: Sequence[str], victims: Sequence[str], fits: T, order: Sequence[str],
             gangs: VictimGangs, attempt: Callable[[list[str], list[str], T], T | None],
             ) -> tuple[list[str], T]:
    """Upstream's reprieve over a wish: each pod of ORDER (the victims, most deserving of
    a reprieve first) leaves the wish when the preemptor still fits without it.
    ATTEMPT(trial victims, victims now, the fit now) answers the fit (None: it does not
    fit); it is
    not asked when the victims stay the same (a gang member whose gang still goes
    whole) nor when none would be left (the preemptor did not fit without victims)."""
    wishing = list(wish)
    left = set(wishing)
    current = list(victims)
    for label in order:
        if label not in left:
            continue  # in only with its gang: it goes or stays with the gang
        trial_wish = [w for w in wishing if w != label]
        trial = gangs.closure(trial_wish)
        if len(trial) == len(current):
            wishing = trial_wish
            left.discard(label)
            continue
        if not trial:
            continue
        found = attempt(trial, current, fits)
        if found is not None:
            wishing, current, fits = trial_wish, trial, found
            left.discard(label)
    return current, fits


__all__ = ["VictimGang", "VictimGangs", "reprieve"]
