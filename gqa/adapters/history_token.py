"""The `next` token of a history page, as both stores write it: where the
page stopped (unfinished jobs by their start, 0 for one not started yet,
or finished ones by their end) and the job it stopped at, which the next
page starts after. Opaque to everyone else: base64 of a small JSON list.
The unfinished jobs' phase keeps the name it had when it held running
jobs alone, so a token stays valid across versions."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from ..models.errors import SpecError
from ..models.job import JobRecord

RUNNING, ENDED = "running", "ended"


def encode(phase: str, at: float, key: Any) -> str:
    raw = json.dumps(["history", phase, at, key], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def after(job: JobRecord, key: Any) -> str:
    """The token of the page that goes on after `job`, the last of a page:
    an unfinished job by its start, a finished one by its end; `key` breaks ties."""
    if not job.state.terminal:
        return encode(RUNNING, job.started_at or 0.0, key)
    return encode(ENDED, job.ended_at or 0.0, key)


def decode(token: str | None, key_type: type) -> tuple[str, float, Any] | None:
    """(phase, time, key) of a token this module made; None for no token;
    SpecError for anything else."""
    if token is None:
        return None
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (ValueError, binascii.Error):
        data = None
    if (isinstance(data, list) and len(data) == 4 and data[0] == "history" and data[1] in (RUNNING, ENDED)
            and isinstance(data[2], (int, float)) and not isinstance(data[2], bool)
            and isinstance(data[3], key_type) and not isinstance(data[3], bool)):
        return data[1], float(data[2]), data[3]
    raise SpecError(f"next {token!r} is not a page token of a history; pass the `next` of the previous page "
                    "as it came, or leave it out for the first page")
