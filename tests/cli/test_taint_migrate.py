"""`draco taint --migrate` against a recorded API: what is created, when draco's rule is
deleted, and every reason a rule is left in place."""

from __future__ import annotations

from typing import Any

import pytest

from operators.cli.inputs import InputError
from operators.cli.taint_migrate import DRACO_RULES, migrate

UP = "/apis/resource.k8s.io/v1/devicetaintrules"


def draco_rule(name: str, effect: str = "NoExecute", time_added: str | None = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    taint: dict[str, Any] = {"key": "example.com/maint", "effect": effect}
    if time_added:
        taint["timeAdded"] = time_added
    return {"metadata": {"name": name, "uid": f"uid-{name}", "creationTimestamp": "2025-12-31T00:00:00Z"},
            "spec": {"deviceSelector": {"pool": "p"}, "taint": taint}}


class FakeAPI:
    """Upstream serves v1; rules named in `refuse` fail the dry run; `taken_over` rules
    get upstream's condition once created."""

    def __init__(self, rules: list[dict[str, Any]], *, refuse: frozenset[str] = frozenset(),
                 taken_over: bool = True, existing: dict[str, Any] | None = None) -> None:
        self.rules = {r["metadata"]["name"]: r for r in rules}
        self.upstream: dict[str, Any] = dict(existing or {})
        self.refuse, self.taken_over = refuse, taken_over
        self.calls: list[tuple[str, str]] = []
        self.deletes: list[Any] = []

    def __call__(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        self.calls.append((method, path))
        if path == "/apis/resource.k8s.io/v1":
            return 200, {"resources": [{"name": "devicetaintrules"}]}
        if path == DRACO_RULES:
            return 200, {"items": list(self.rules.values())}
        if path.startswith(DRACO_RULES + "/") and method == "DELETE":
            self.deletes.append(body)
            self.rules.pop(path.rsplit("/", 1)[1], None)
            return 200, {}
        if path.startswith(UP):
            name = body["metadata"]["name"] if body else path.rsplit("/", 1)[1]
            if method == "POST" and name in self.refuse:
                return 422, {"message": f'DeviceTaintRule "{name}" is invalid: spec.taint.effect: Unsupported value'}
            if method == "POST" and path.endswith("dryRun=All"):
                return 201, body
            if method == "POST":
                self.upstream[name] = {**body, "status": {"conditions": [{"type": "EvictionInProgress"}]}
                                       if self.taken_over else {}}
                return 201, self.upstream[name]
            if method == "GET":
                return (200, self.upstream[name]) if name in self.upstream else (404, {})
        return 404, {"message": "not found"}


def run(api: FakeAPI, dry_run: bool = False) -> dict[str, str]:
    return migrate(api, dry_run=dry_run, timeout=0.0, poll=0.0, out=lambda _: None)


def test_migrates_with_selector_taint_and_time_kept_then_deletes_by_uid() -> None:
    api = FakeAPI([draco_rule("a"), draco_rule("b", "NoSchedule", time_added=None)])
    assert run(api) == {"a": "migrated to devicetaintrules.resource.k8s.io/a",
                        "b": "migrated to devicetaintrules.resource.k8s.io/b"}
    assert api.upstream["a"]["spec"] == {"deviceSelector": {"pool": "p"}, "taint": {
        "key": "example.com/maint", "effect": "NoExecute", "timeAdded": "2026-01-01T00:00:00Z"}}
    # never stamped by draco's controller: the taint counted from the rule's creation
    assert api.upstream["b"]["spec"]["taint"]["timeAdded"] == "2025-12-31T00:00:00Z"
    assert [d["preconditions"] for d in api.deletes] == [{"uid": "uid-a"}, {"uid": "uid-b"}]
    assert api.rules == {}


# (case, FakeAPI options) -> how the outcome starts; draco's rule stays in every case
LEFT = [
    ("an effect upstream does not know", {"refuse": frozenset({"a"})}, "left: upstream refuses it (DeviceTaintRule"),
    ("upstream's controller never takes over", {"taken_over": False},
     "left: upstream's controller did not take over devicetaintrules.resource.k8s.io/a within 0s"),
    ("an upstream rule of that name with another spec", {"existing": {"a": {"spec": {"deviceSelector": {}}}}},
     "left: devicetaintrules.resource.k8s.io/a exists with another selector or taint"),
]


@pytest.mark.parametrize(("options", "start"), [c[1:] for c in LEFT], ids=[c[0] for c in LEFT])
def test_rules_left_in_place(options: dict[str, Any], start: str) -> None:
    api = FakeAPI([draco_rule("a")], **options)
    assert run(api)["a"].startswith(start)
    assert "a" in api.rules and api.deletes == []


def test_dry_run_changes_nothing() -> None:
    api = FakeAPI([draco_rule("a")])
    assert run(api, dry_run=True) == {"a": "would be migrated to devicetaintrules.resource.k8s.io/a (dry run)"}
    assert api.upstream == {} and "a" in api.rules
    assert all(m == "GET" or "dryRun=All" in p for m, p in api.calls)


def test_no_upstream_rules_is_bad_input() -> None:
    with pytest.raises(InputError, match="does not serve upstream's DeviceTaintRule"):
        migrate(lambda m, p, b: (404, {}), dry_run=False, timeout=0, out=lambda _: None)
