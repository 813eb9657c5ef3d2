"""List and watch query options checked as kube-apiserver checks them (WatchList on).

kube-apiserver 1.34 serves watch-lists (`sendInitialEvents=true`): the current state
as ADDED events, then, when the client allows bookmarks, one BOOKMARK carrying the
annotation `k8s.io/initial-events-end: "true"` and the resourceVersion the state was
read at. kubectl 1.37's `wait` waits for that bookmark. As upstream, a watch with
no resourceVersion (or "0") and no watch-list options is defaulted to a watch-list.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from operators.apiserver.errors import APIError, invalid
from operators.apiserver.validation.causes import Cause, forbidden, not_supported

NOT_OLDER_THAN = "NotOlderThan"
EXACT = "Exact"
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


@dataclass(frozen=True)
class WatchOptions:
    resource_version: str
    send_initial_events: bool | None
    allow_bookmarks: bool

    @property
    def watch_list(self) -> bool:
        """Initial events followed by the initial-events-end bookmark."""
        return bool(self.send_initial_events) and self.allow_bookmarks


def _bool(value: str | None) -> bool | None:
    if value is None:
        return None
    if value in ("1", "t", "T", "TRUE", "true", "True"):  # Go's strconv.ParseBool
        return True
    if value in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    raise APIError(400, f'invalid boolean value "{value}"')


def _fail(causes: list[Cause]) -> APIError:
    return invalid("meta.k8s.io", "ListOptions", "", causes)


def check_list(q: Mapping[str, str]) -> None:
    causes: list[Cause] = []
    match = q.get("resourceVersionMatch", "")
    if match:
        if not q.get("resourceVersion"):
            causes.append(forbidden("resourceVersionMatch",
                                    "resourceVersionMatch is forbidden unless resourceVersion is provided"))
        if q.get("continue"):
            causes.append(forbidden("resourceVersionMatch",
                                    "resourceVersionMatch is forbidden when continue is provided"))
        if match not in (EXACT, NOT_OLDER_THAN):
            causes.append(not_supported("resourceVersionMatch", match, [EXACT, NOT_OLDER_THAN, ""]))
        if match == EXACT and q.get("resourceVersion") == "0":
            causes.append(forbidden("resourceVersionMatch",
                                    'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'))
    if q.get("sendInitialEvents") is not None:
        causes.append(forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"))
    if causes:
        raise _fail(causes)


def watch_options(q: Mapping[str, str]) -> WatchOptions:
    rv = q.get("resourceVersion", "")
    send = _bool(q.get("sendInitialEvents"))
    match = q.get("resourceVersionMatch", "")
    causes: list[Cause] = []
    if send is not None and match != NOT_OLDER_THAN:
        causes.append(forbidden("resourceVersionMatch",
                                f"sendInitialEvents requires setting resourceVersionMatch to {NOT_OLDER_THAN}"))
    if match:
        if send is None:
            causes.append(forbidden("resourceVersionMatch",
                                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"))
        if match != NOT_OLDER_THAN:
            causes.append(not_supported("resourceVersionMatch", match, [NOT_OLDER_THAN]))
        if q.get("continue"):
            causes.append(forbidden("resourceVersionMatch",
                                    "resourceVersionMatch is forbidden when continue is provided"))
    if causes:
        raise _fail(causes)
    if send is None and not match and rv in ("", "0"):
        send = True  # upstream's default for legacy watches while WatchList is on
    return WatchOptions(rv, send, _bool(q.get("allowWatchBookmarks")) is True)
