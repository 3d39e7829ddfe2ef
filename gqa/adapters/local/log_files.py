"""The JobLogs port over the local daemon's log files, so that a shared
box's daemon answers GET /jobs/{id}/logs with gqa.services.logs.LogService,
page by page, as the AWS API does: users of a system queue cannot read the
files themselves (each is its owner's, and admins read through the daemon).

One file per job holds every attempt, each opened by the line the launcher
writes ("--- gqa: attempt N of job ID on GPUs ... at ...: argv"). An attempt's
stream is the part of the file after its line and before the next attempt's;
a token is the byte offset reached in it. LogService heads each attempt
itself, so the launcher's line is not repeated.

Rotation (logfiles.py) moves earlier parts aside and truncates the live file:
pages read the live file only, so output rotated away before it was read is
not given (an attempt whose opening line was rotated away starts at the top
of the live file, and a token past the live file's end starts over there).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO

from ...models.errors import NotFound, SpecError
from ...models.job import JobRecord, JobState
from ...ports import AttemptLog, LogChunk
from .paths import StatePaths

MAX_LINE = 1 << 20      # a longer line (a progress bar without newlines) is given in pieces
LIVE, ENDED = "RUNNING", "ENDED"


class LocalLogFiles:
    def __init__(self, paths: StatePaths):
        self.paths = paths

    def attempt(self, job: JobRecord, attempt: int) -> AttemptLog | None:
        over = attempt < job.attempts or job.state != JobState.RUNNING
        return AttemptLog(attempt, source="this machine", status=ENDED if over else LIVE,
                          started_at=_started(job, attempt), stream=str(self.paths.log_for(job.id)))

    def read(self, log: AttemptLog, token: str | None, limit: int) -> LogChunk:
        path = Path(log.stream or "")
        job_id = path.name.removesuffix(".log")
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError):
            raise NotFound(f"{path} does not exist") from None
        with os.fdopen(fd, "rb") as fh:
            if token is None:
                offset = _after_header(fh, _header(log.attempt, job_id))
                if offset is None and not _rotated(path):
                    raise NotFound(f"attempt {log.attempt} wrote nothing to {path}")
                offset = offset or 0     # its opening line was rotated away: what is left starts the file
            else:
                offset = _offset(token)
                if offset > os.fstat(fh.fileno()).st_size:
                    offset = 0           # rotated under the reader (logfiles.py truncates in place)
            fh.seek(offset)
            lines: list[str] = []
            caught_up = False
            following = _header(log.attempt + 1, job_id)
            while len(lines) < limit:
                raw = fh.readline(MAX_LINE)
                whole = raw.endswith(b"\n") or len(raw) == MAX_LINE
                if not raw or raw.startswith(following) or (not whole and log.status == LIVE):
                    caught_up = True      # the end, the next attempt, or a line still being written
                    break
                offset += len(raw)
                lines.append(raw.rstrip(b"\n").decode(errors="replace"))
            return LogChunk(tuple(lines), str(offset), caught_up)


def _header(attempt: int, job_id: str) -> bytes:
    return f"--- gqa: attempt {attempt} of job {job_id} ".encode()


def _after_header(fh: BinaryIO, header: bytes) -> int | None:
    position = 0
    while raw := fh.readline(MAX_LINE):
        position += len(raw)
        if raw.startswith(header) and raw.endswith(b"\n"):
            return position
    return None


def _rotated(path: Path) -> bool:
    """Whether earlier parts of the log were moved aside (logfiles.py's rotation)."""
    return path.with_name(path.name + ".1").exists() or path.with_name(path.name + ".rotations").exists()


def _offset(token: str) -> int:
    if not token.isdigit():
        raise SpecError("not a log token gqa gave out; start again without it")
    return int(token)


def _started(job: JobRecord, attempt: int) -> float | None:
    """When attempt `attempt` started: the attempt-th move to RUNNING in the history."""
    starts = [t.at for t in job.history if t.state == JobState.RUNNING]
    return starts[attempt - 1] if len(starts) >= attempt else None
