"""Watch-lists (`sendInitialEvents`), as kube-apiserver 1.34 serves them with WatchList on:
the requests kubectl 1.37's `wait` makes, and the option combinations upstream refuses."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

from operators.apiserver.testing import EmbeddedCluster
from tests.apiserver.http import call, watch_lines

END = "k8s.io/initial-events-end"


def cms(cluster: EmbeddedCluster, *names: str) -> str:
    base = f"{cluster.url}/api/v1/namespaces/default/configmaps"
    rv = ""
    for name in names:
        code, obj = call(base, "POST", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})
        assert code == 201
        rv = obj["metadata"]["resourceVersion"]
    return rv


def test_initial_events_then_the_end_bookmark_then_changes(cluster: EmbeddedCluster) -> None:
    rv = cms(cluster, "a", "b")
    base = f"{cluster.url}/api/v1/namespaces/default/configmaps"
    url = (f"{base}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
           f"&allowWatchBookmarks=true&timeoutSeconds=5")
    with urllib.request.urlopen(url, timeout=10) as resp:
        first = [json.loads(resp.readline()) for _ in range(3)]
        assert [(e["type"], e["object"]["metadata"].get("name")) for e in first] == [
            ("ADDED", "a"), ("ADDED", "b"), ("BOOKMARK", None)]
        mark = first[2]["object"]
        assert mark["kind"] == "ConfigMap" and mark["apiVersion"] == "v1"
        assert mark["metadata"]["annotations"] == {END: "true"}
        assert mark["metadata"]["resourceVersion"] == rv  # the state the initial events show
        cms(cluster, "c")
        later = json.loads(resp.readline())
        assert (later["type"], later["object"]["metadata"]["name"]) == ("ADDED", "c")


@pytest.mark.parametrize(("query", "expected"), [
    # without allowWatchBookmarks upstream sends the initial events but no end bookmark
    ("sendInitialEvents=true&resourceVersionMatch=NotOlderThan", ["ADDED a"]),
    # sendInitialEvents=false: only what happens from now on
    ("sendInitialEvents=false&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true", []),
    # a legacy watch from "" or "0" is defaulted to a watch-list while WatchList is on
    ("allowWatchBookmarks=true", ["ADDED a", "BOOKMARK end"]),
    ("resourceVersion=0&allowWatchBookmarks=true", ["ADDED a", "BOOKMARK end"]),
], ids=["no-bookmarks", "no-initial-events", "legacy-empty-rv", "legacy-rv-0"])
def test_which_requests_get_initial_events_and_the_end_bookmark(
        cluster: EmbeddedCluster, query: str, expected: list[str]) -> None:
    cms(cluster, "a")
    url = f"{cluster.url}/api/v1/namespaces/default/configmaps?watch=true&{query}&timeoutSeconds=1"
    seen = []
    for e in watch_lines(url, 10):
        meta = e["object"]["metadata"]
        if e["type"] == "BOOKMARK":
            if meta.get("annotations", {}).get(END) == "true":
                seen.append("BOOKMARK end")
        else:
            seen.append(f"{e['type']} {meta['name']}")
    assert seen == expected


REFUSED: list[tuple[str, str, str]] = [
    ("watch=true&sendInitialEvents=true", "resourceVersionMatch",
     "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"),
    ("watch=true&resourceVersionMatch=NotOlderThan", "resourceVersionMatch",
     "Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"),
    ("watch=true&sendInitialEvents=true&resourceVersionMatch=Exact", "resourceVersionMatch",
     "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"),
    ("sendInitialEvents=true", "sendInitialEvents", "Forbidden: sendInitialEvents is forbidden for list"),
    ("resourceVersionMatch=NotOlderThan", "resourceVersionMatch",
     "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"),
    ("resourceVersion=0&resourceVersionMatch=Exact", "resourceVersionMatch",
     'Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"'),
    ("resourceVersion=1&resourceVersionMatch=Newest", "resourceVersionMatch",
     'Unsupported value: "Newest": supported values: "Exact", "NotOlderThan", ""'),
]


@pytest.mark.parametrize(("query", "field", "message"), REFUSED, ids=[r[0] for r in REFUSED])
def test_invalid_option_combinations_are_refused_like_upstream(
        cluster: EmbeddedCluster, query: str, field: str, message: str) -> None:
    code, body = call(f"{cluster.url}/api/v1/namespaces/default/configmaps?{query}")
    assert (code, body["reason"]) == (422, "Invalid")
    assert body["message"].startswith('ListOptions.meta.k8s.io "" is invalid: ')
    causes: list[dict[str, Any]] = body["details"]["causes"]
    assert causes[0]["field"] == field and causes[0]["message"] == message


def test_a_resource_version_from_the_future_ends_the_stream_with_a_timeout(cluster: EmbeddedCluster) -> None:
    events = watch_lines(f"{cluster.url}/api/v1/namespaces/default/configmaps?watch=true&sendInitialEvents=true"
                         "&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&resourceVersion=999999", 5)
    assert len(events) == 1 and events[0]["type"] == "ERROR"
    status = events[0]["object"]
    assert (status["code"], status["reason"]) == (504, "Timeout")
    assert status["message"].startswith("Timeout: Too large resource version: 999999, current: ")
