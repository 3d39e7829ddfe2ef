"""A job's output, page by page, from wherever its attempts wrote it (the
JobLogs port): what `gqa logs ID [-f]` prints on a remote backend, and what
the API answers for GET /jobs/{id}/logs.

Pages give every attempt's lines in order, each attempt headed the way the
local log file heads it ("--- gqa: attempt 2 of job 12 on ... at ...: argv"),
so the two backends print the same shape. The token says where the next
page starts (the attempt, how far into it, and the stream's own position);
callers pass it back as they got it.

An attempt is left for the next one only once it is over (a later attempt
has started, or the job is no longer running) and its stream has been read
to the end; the live attempt is read as far as it goes and the page ends
there. `done` says nothing more will come for what was asked: the job has
ended (or the one attempt asked for is over) and its output was all given.

A caller whose answer is bounded in bytes (the API's, Lambda's 6 MB: a line
of escaped text travels up to 7 times its UTF-8) gives each line's `size` and
a `budget`: the page ends at the last line that fits, and its token continues
after it (LogChunk.after), so every line is given once. A line that alone
does not fit an empty page is cut, and says so: a page always moves on.
"""

from __future__ import annotations

import base64
import binascii
import json
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..models.array_syntax import index_ranges
from ..models.errors import BackendUnavailable, NotFound, NotStarted, SpecError
from ..models.job import JobRecord, JobState
from ..ports import AttemptLog, JobLogs, JobRecords
from . import lookup

DEFAULT_LIMIT = 1000
MAX_LIMIT = 10_000        # what one CloudWatch GetLogEvents call may return


@dataclass(frozen=True)
class LogPage:
    """Lines of output (no line ends), where to continue, the attempt the
    last line belongs to, and whether more can come."""

    lines: tuple[str, ...]
    token: str
    attempt: int
    done: bool

    def to_dict(self) -> dict[str, Any]:
        return {"lines": list(self.lines), "token": self.token, "attempt": self.attempt, "done": self.done}

    @classmethod
    def from_dict(cls, data: Any) -> "LogPage":
        """A page as the API sent it; BackendUnavailable names what is malformed."""
        try:
            lines, token, attempt, done = data["lines"], data["token"], data["attempt"], data["done"]
        except (TypeError, KeyError) as exc:
            raise BackendUnavailable(f"the API sent a log page without {exc}") from None
        if not (isinstance(lines, list) and all(isinstance(line, str) for line in lines)):
            raise BackendUnavailable("the API sent a log page whose lines are not a list of strings")
        if not isinstance(token, str) or not isinstance(done, bool) or type(attempt) is not int:
            raise BackendUnavailable("the API sent a log page with a malformed token, attempt or done")
        return cls(tuple(lines), token, attempt, done)


@dataclass(frozen=True)
class Cursor:
    """Where a page starts: attempt `attempt` of job `job_id`; `headed` once
    its header was given, `finished` once it was over and read to the end;
    `position` is the stream's own token."""

    job_id: str
    attempt: int
    headed: bool = False
    finished: bool = False
    position: str | None = None

    def encode(self) -> str:
        raw = json.dumps({"j": self.job_id, "a": self.attempt, "h": self.headed, "f": self.finished,
                          "p": self.position}, separators=(",", ":"))
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    @classmethod
    def decode(cls, token: str) -> "Cursor":
        try:
            raw = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
            cursor = cls(raw["j"], raw["a"], raw["h"], raw["f"], raw["p"])
        except (binascii.Error, ValueError, TypeError, KeyError):
            raise SpecError("not a log token gqa gave out; start again without it") from None
        if not (isinstance(cursor.job_id, str) and type(cursor.attempt) is int and cursor.attempt >= 1
                and isinstance(cursor.headed, bool) and isinstance(cursor.finished, bool)
                and (cursor.position is None or isinstance(cursor.position, str))):
            raise SpecError("not a log token gqa gave out; start again without it")
        return cursor


class LogService:
    def __init__(self, store: JobRecords, logs: JobLogs):
        self.store, self.logs = store, logs

    def page(self, job_ref: str, attempt: int | None = None, token: str | None = None,
             limit: int = DEFAULT_LIMIT, *, allow: Callable[[JobRecord], None] | None = None,
             size: Callable[[str], int] | None = None, budget: int | None = None) -> LogPage:
        """Up to about `limit` lines (attempt headers and notes may add one or
        two) from where `token` points, or from the start of attempt `attempt`
        (default: the first). With `attempt`, only that attempt's lines.
        `allow`: the caller's access rule, given the job as read (it raises
        to refuse) before anything of its output is. `size` and `budget`: the
        page's lines take at most `budget` by `size` (a line as it travels)."""
        if not 1 <= limit <= MAX_LIMIT:
            raise SpecError(f"a log page holds 1 to {MAX_LIMIT} lines, not {limit}")
        if attempt is not None and attempt < 1:
            raise SpecError(f"attempts are numbered from 1, not {attempt}")
        job = self._job(job_ref)
        if allow is not None:
            allow(job)
        if job.attempts == 0:
            raise _never_started(job)
        if attempt is not None and attempt > job.attempts:
            raise _attempt_not_started(job, attempt)
        cursor = Cursor.decode(token) if token else Cursor(job.id, attempt or 1)
        if cursor.job_id != job.id:
            raise SpecError(f"that log token belongs to job {cursor.job_id}, not job {job.id}")
        if attempt is not None and cursor.attempt != attempt:
            raise SpecError(f"that log token continues attempt {cursor.attempt}, not attempt {attempt}")
        if cursor.attempt > job.attempts:
            raise SpecError(f"that log token points at attempt {cursor.attempt}; job {job.id} has had "
                            f"{job.attempts}")
        page = Lines(size, budget)
        while True:
            cursor = self._read(job, cursor, page, limit)
            lines = tuple(page.lines)
            if not cursor.finished:      # the page is full, or the live attempt has no more for now
                return LogPage(lines, cursor.encode(), cursor.attempt, False)
            if attempt is not None or cursor.attempt == job.attempts:
                done = attempt is not None or job.state.terminal
                return LogPage(lines, cursor.encode(), cursor.attempt, done)
            if len(lines) >= limit or page.full:
                return LogPage(lines, cursor.encode(), cursor.attempt, False)
            cursor = Cursor(job.id, cursor.attempt + 1)

    def _read(self, job: JobRecord, cursor: Cursor, page: "Lines", limit: int) -> Cursor:
        """Add what attempt `cursor.attempt` has from the cursor on to `page`;
        the cursor after it (where the page had room for nothing more, the
        cursor as far as it got: the next page goes on from there)."""
        if cursor.finished:
            return cursor
        n = cursor.attempt
        over = n < job.attempts or job.state != JobState.RUNNING
        where = self.logs.attempt(job, n)
        if not cursor.headed:
            if not page.add(header(job, n, where)):
                return cursor
            cursor = replace(cursor, headed=True)
        if where is None:
            if over and not page.add(f"--- gqa: the output of attempt {n} cannot be found: "
                                     "the compute backend no longer knows the attempt"):
                return cursor
            return replace(cursor, finished=over)
        if where.stream is None:
            if over and not page.add(f"--- gqa: attempt {n} left no output ({_status(where)})"):
                return cursor
            return replace(cursor, finished=over)
        if page.full:
            return cursor
        try:
            chunk = self.logs.read(where, cursor.position, max(1, limit - len(page.lines)))
        except NotFound:   # the container has not written yet, or the stream expired
            if over and not page.add(f"--- gqa: attempt {n} left no output (log stream {where.stream} in "
                                     f"{where.group} does not exist: nothing was written, or it expired)"):
                return cursor
            return replace(cursor, finished=over)
        kept = page.take(chunk.lines, whole=chunk.after is None)
        if chunk.after is not None and kept < len(chunk.lines):   # no bytes left: the next page goes on from here
            return replace(cursor, position=chunk.after[kept - 1] if kept else cursor.position, finished=False)
        return replace(cursor, position=chunk.token, finished=over and chunk.caught_up)

    def _job(self, ref: str) -> JobRecord:
        # NotAdmitted (a NotStarted) just after submitting; no transitions needed (nor an array's, told to name one)
        jobs = lookup.resolve(self.store, ref, history=False)
        if len(jobs) != 1:
            raise SpecError(name_one(ref, jobs))
        return jobs[0]


class Lines:
    """A page's lines, and the bytes left for them where the caller bounds its answer."""

    def __init__(self, size: Callable[[str], int] | None = None, budget: int | None = None):
        self.lines: list[str] = []
        self.size = size if budget is not None else None
        self.room = budget if budget is not None else 0

    @property
    def full(self) -> bool:
        return self.size is not None and self.room <= 0

    def add(self, line: str) -> bool:
        """Add `line` if it fits (cut, on an empty page); False if the page has no room for it."""
        return self.take((line,)) == 1

    def take(self, lines: Sequence[str], *, whole: bool = False) -> int:
        """Add the first of `lines` that fit, the first cut to fit on an empty page; how many.
        `whole`: all of them, whatever they take (a reader that cannot resume within them)."""
        if self.size is None:
            self.lines.extend(lines)
            return len(lines)
        for n, line in enumerate(lines):
            cost = self.size(line)
            if cost > self.room and not whole:
                if self.lines:
                    return n
                line, cost = _cut(line, self.room, self.size)
            self.lines.append(line)
            self.room -= cost
        return len(lines)


def _cut(line: str, room: int, size: Callable[[str], int]) -> tuple[str, int]:
    """The longest head of `line` that fits `room` with the note that it was cut, and its size."""
    def cut(keep: int) -> str:
        return f"{line[:keep]} [gqa: cut here, {len(line) - keep:,} more characters: longer than a page holds]"
    low, high = 0, len(line)
    while low < high:
        middle = (low + high + 1) // 2
        if size(cut(middle)) <= room:
            low = middle
        else:
            high = middle - 1
    return cut(low), size(cut(low))


def name_one(ref: str, jobs: list[JobRecord]) -> str:
    """What to say when a log is asked of a whole array: one task's, please."""
    first = jobs[0].array_index if jobs[0].array_index is not None else 0
    return (f"{ref} is an array of {len(jobs)} jobs; name one task as GROUP_INDEX: gqa logs {ref}_{first} "
            f"(or gqa logs {ref} --index {first}); its tasks are {index_ranges([j.array_index or 0 for j in jobs])}")


def header(job: JobRecord, attempt: int, where: AttemptLog | None) -> str:
    """The line that opens an attempt, as the local backend writes it."""
    on = f" on {where.source}" if where is not None else ""
    at = f" at {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(where.started_at))}" \
        if where is not None and where.started_at is not None else ""
    return f"--- gqa: attempt {attempt} of job {job.id}{on}{at}: {shlex.join(job.spec.argv())}"


def _status(where: AttemptLog) -> str:
    return f"{where.source} {where.status}" + (f": {where.detail}" if where.detail else "")


def _why(job: JobRecord) -> str:
    return f"it is {job.state.value}" + (f": {job.reason}" if job.reason else "")


def _never_started(job: JobRecord) -> NotFound:
    if job.state.terminal:
        return NotFound(f"job {job.id} never started, so it has no output; {_why(job)}")
    return NotStarted(f"job {job.id} has not started yet; {_why(job)}")


def _attempt_not_started(job: JobRecord, attempt: int) -> NotFound:
    had = f"job {job.id} has had {job.attempts} attempt{'s' if job.attempts != 1 else ''}"
    if job.state.terminal:
        return NotFound(f"{had} and has ended, so attempt {attempt} never ran; {_why(job)}")
    return NotStarted(f"{had}; attempt {attempt} has not started; {_why(job)}")
