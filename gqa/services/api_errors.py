"""The status each domain error answers with, for every API that speaks
JSON (the Lambda behind API Gateway, the shared local daemon's socket), and
the error a client raises for an answer: by the error's class name when the
answer carries one, else by its status. One table, so a refusal reads the
same whichever backend gave it."""

from __future__ import annotations

from typing import Any

from ..models import errors
from ..models.errors import (BackendUnavailable, Conflict, GqaError, InvalidTransition, NotAuthenticated, NotFound,
                             NotPermitted, Rejected, SpecError)

# most specific first: NotAuthenticated is a NotPermitted
STATUS: tuple[tuple[type[GqaError], int], ...] = (
    (SpecError, 400), (NotAuthenticated, 401), (NotPermitted, 403), (NotFound, 404), (Conflict, 409),
    (InvalidTransition, 409), (Rejected, 422), (BackendUnavailable, 503))


def status_of(exc: GqaError) -> int:
    return next((code for kind, code in STATUS if isinstance(exc, kind)), 500)


def error_body(exc: GqaError) -> dict[str, str]:
    """{"error": <class name>, "message": <one line>}: the client raises the class of that name."""
    return {"error": type(exc).__name__, "message": str(exc)}


def error_from_answer(status: int, body: Any, *, fallback: str = "") -> GqaError:
    """The domain error an error answer stands for: the class its body names,
    else the first class the table gives `status`, else BackendUnavailable."""
    data = body if isinstance(body, dict) else {}
    message = str(data.get("message") or data.get("error") or fallback or f"status {status}").strip()
    kind = getattr(errors, str(data.get("error")), None)
    if isinstance(kind, type) and issubclass(kind, GqaError):
        return kind(message)
    by_status = next((k for k, code in STATUS if code == status and k is not NotAuthenticated), None)
    return (by_status or BackendUnavailable)(message)
