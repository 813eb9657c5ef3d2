"""meta/v1 Status answers: every failure reaches clients the way kube-apiserver says it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

REASONS = {
    400: "BadRequest", 403: "Forbidden", 404: "NotFound", 405: "MethodNotAllowed",
    409: "Conflict", 410: "Expired", 415: "UnsupportedMediaType", 422: "Invalid",
    429: "TooManyRequests", 500: "InternalError",
}


class APIError(Exception):
    def __init__(self, code: int, message: str, *, reason: str | None = None,
                 details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or REASONS.get(code, "Unknown")
        self.details = details

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": self.message, "reason": self.reason, "code": self.code,
        }
        if self.details:
            body["details"] = self.details
        return body


def resource_label(group: str, plural: str) -> str:
    return f"{plural}.{group}" if group else plural


def not_found(group: str, plural: str, name: str) -> APIError:
    return APIError(404, f'{resource_label(group, plural)} "{name}" not found',
                    details={"name": name, "group": group, "kind": plural})


def already_exists(group: str, plural: str, name: str) -> APIError:
    return APIError(409, f'{resource_label(group, plural)} "{name}" already exists',
                    reason="AlreadyExists", details={"name": name, "group": group, "kind": plural})


def conflict(group: str, plural: str, name: str, why: str) -> APIError:
    return APIError(
        409,
        f'Operation cannot be fulfilled on {resource_label(group, plural)} "{name}": {why}',
        details={"name": name, "group": group, "kind": plural},
    )


def invalid(group: str, kind: str, name: str, causes: Sequence[Mapping[str, Any]]) -> APIError:
    summary = ", ".join(f"{c.get('field') or '<nil>'}: {c.get('message', '')}" for c in causes)
    label = f"{kind}.{group}" if group else kind
    return APIError(422, f'{label} "{name}" is invalid: [{summary}]' if len(causes) > 1
                    else f'{label} "{name}" is invalid: {summary}',
                    details={"name": name, "group": group, "kind": kind,
                             "causes": [dict(c) for c in causes]})
