"""`victim_gangs`: the closure of a wish and the choices for a gang that cannot go whole,
as tables (pods a, b, c of one running gang; x of none)."""

from __future__ import annotations

import pytest

from operators.preemption.victim_gangs import VictimGang, VictimGangs, reprieve


def gangs(min_count: int, launcher: bool = False) -> VictimGangs:
    members = ("a", "b", "c", "l") if launcher else ("a", "b", "c")
    return VictimGangs([VictimGang("Gang/ns/g", members, min_count)])


@pytest.mark.parametrize(("min_count", "launcher", "wish", "victims"), [
    (2, False, ["a"], ["a"]),  # two stay: minCount kept
    (2, False, ["a", "b"], ["a", "b", "c"]),  # one would stay: the gang goes whole
    (1, False, ["a", "b"], ["a", "b"]),
    (3, False, ["x", "c"], ["x", "c", "a", "b"]),
    (2, True, ["a", "b"], ["a", "b"]),  # the launcher and c keep minCount 2
    (3, True, ["a", "b"], ["a", "b", "c", "l"]),  # the launcher goes with its gang
    (2, False, [], []),
])
def test_the_closure_of_a_wish(min_count: int, launcher: bool, wish: list[str], victims: list[str]) -> None:
    assert gangs(min_count, launcher).closure(wish) == victims


def test_a_gang_that_cannot_go_whole_offers_each_choice_least_important_first() -> None:
    g = gangs(2, launcher=True)  # the launcher l may not go: at most 2 of a, b, c
    importance = {"a": (-1, 1.0), "b": (-1, 2.0), "c": (-1, 3.0)}  # c started last: least important
    wishes = list(g.wishes(["a", "b", "c", "x"], lambda v: v != "l", importance.__getitem__))
    assert wishes == [["b", "c", "x"], ["a", "c", "x"], ["a", "b", "x"]]
    assert list(g.wishes(["a", "b", "c"], lambda v: v != "l", importance.__getitem__, limit=1)) == [["b", "c"]]


def test_reprieve_passes_from_the_whole_gang_to_one_member() -> None:
    # the preemptor needs what c holds, and nothing else: a and b are reprieved though
    # the gang (minCount 2) first goes whole
    g = gangs(2)
    tried: list[list[str]] = []

    def attempt(trial: list[str], now: list[str], fits: str) -> str | None:
        tried.append(trial)
        return "fits" if "c" in trial else None

    victims, fits = reprieve(["a", "b", "c"], ["a", "b", "c"], "fits", ["a", "b", "c"], g, attempt)
    assert (victims, fits) == (["c"], "fits")
    assert tried == [["c"]], "a's reprieve changes no victim (the gang still goes whole): no search"
