"""The JobLogs port over the local daemon's log files, so that a shared
box's daemon answers GET /jobs/{id}/logs with gqa.services.logs.LogService,
page by page, as the AWS API does: users of a system queue cannot read the
files themselves (each is its owner's, and admins read through the daemon).

One log per job holds every attempt, each opened by the line the launcher
writes ("--- gqa: attempt N of job ID on GPUs ... at ...: argv"). An attempt's
stream is the part of the log after its line and before a later attempt's.
LogService heads each attempt itself, so the launcher's line is not repeated.

The log is read as log_rotation.py lays it out: the rotated parts `.K ... .1`
then the live file, as one log. A token is a position in the whole log as
written: the bytes written before it, counting those rotated away (the
`.rotations` record's `dropped`), so it stays valid however often the log
is rotated after it was given; a follower whose bytes moved to `.1` reads on
there, then into the live file. A position rotated away entirely continues
at the oldest byte kept, after log_rotation's marker line ("--- gqa: N bytes of
earlier output rotated away (log cap ...)"), N the bytes it missed. An
attempt whose opening line was rotated away starts there too, if what is
kept starts with its output (the first attempt line kept is the next
attempt's, or there is none and it is the job's latest attempt); otherwise
all of its output was rotated away and the marker is all it gives.

Each page is read from the parts opened at once, with sizes taken then, as
log_rotation.as_read lays them out: a rotation under way, or one a crash
left half done, is read as it will be settled, its copy no part until the
live file is cut. The page is checked against the rotations afterwards: one
read while a rotation moved things (or a part vanished as it was opened) is
read again (a few times at most), so a page never gives bytes twice or a
truncated file's new bytes at old positions. Bytes the job wrote
inside a rotation's window (log_rotation.py) are not in the log and take no
position; a token past the end of the log (a file cut short by someone
else) continues at the top of the live file.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ...models.errors import NotFound, SpecError
from ...models.job import JobRecord, JobState
from ...ports import AttemptLog, LogChunk
from .log_records import continued_line, sibling
from .log_rotation import BLOCK, Rotations, as_read, marker, read_from, rotations_of
from .paths import StatePaths

MAX_LINE = 1 << 20      # a longer line (a progress bar without newlines) is given in pieces
LIVE, ENDED, RETRIED = "RUNNING", "ENDED", "RETRIED"   # RETRIED: over, and a later attempt started
TRIES = 20              # reads of a page while rotations keep moving the parts under it
PAUSE = 0.01            # seconds between them


class LocalLogFiles:
    def __init__(self, paths: StatePaths):
        self.paths = paths

    def attempt(self, job: JobRecord, attempt: int) -> AttemptLog | None:
        status = RETRIED if attempt < job.attempts else LIVE if job.state == JobState.RUNNING else ENDED
        return AttemptLog(attempt, source="this machine", status=status,
                          started_at=_started(job, attempt), stream=str(self.paths.log_for(job.id)))

    def read(self, log: AttemptLog, token: str | None, limit: int) -> LogChunk:
        path = Path(log.stream or "")
        position = None if token is None else _position(token)
        job_id = path.name.removesuffix(".log")
        for n in range(1, TRIES + 1):
            last = n == TRIES
            before = _stamp(path)
            whole = _Log.open(path)
            try:
                if whole.whole or last:
                    chunk = _page(whole, log, job_id, position, limit)
                    if last or (_stamp(path) == before and whole.live_intact()):
                        return chunk
            finally:
                whole.close()
            time.sleep(PAUSE)   # a rotation moved the parts as they were read: read again
        raise AssertionError("unreachable")


# -- the log as one ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Part:
    path: Path
    fd: int
    start: int      # the position of its first byte in the whole log
    size: int       # as it was when opened: a page reads no further


@dataclass
class _Log:
    """The parts of a log opened at once, placed in the whole log."""

    path: Path
    rotations: Rotations
    parts: list[_Part]
    whole: bool = True      # every part it was to read was there to open
    passed: int = 0         # the oldest part's head that ends a line rotated away (continued_line)

    @classmethod
    def open(cls, path: Path) -> "_Log":
        rotations, names = as_read(path)
        opened, at, whole = [], rotations.dropped, True
        try:
            for name in names:
                try:
                    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                except (FileNotFoundError, NotADirectoryError):
                    whole = whole and name == path     # a part moved or dropped since it was listed
                    continue
                except OSError as exc:
                    if exc.errno == errno.ELOOP:   # a link where a part should be: not a file gqa wrote
                        continue
                    raise
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode):
                    os.close(fd)
                    continue
                opened.append(_Part(name, fd, at, st.st_size))
                at += st.st_size
        except BaseException:
            for part in opened:
                os.close(part.fd)
            raise
        if not opened:
            raise NotFound(f"{path} does not exist")
        try:
            passed = continued_line(opened[0].fd, rotations) if opened[0].path != path else 0
        except BaseException:
            for part in opened:
                os.close(part.fd)
            raise
        return cls(path, rotations, opened, whole, passed)

    def close(self) -> None:
        for part in self.parts:
            os.close(part.fd)
        self.parts = []

    @property
    def kept(self) -> int:
        """The position of the oldest byte kept: past the end of a line rotated away."""
        return self.parts[0].start + self.passed

    @property
    def end(self) -> int:
        return self.parts[-1].start + self.parts[-1].size

    @property
    def live(self) -> _Part | None:
        return self.parts[-1] if self.parts[-1].path == self.path else None

    def live_intact(self) -> bool:
        """The live file was not truncated while it was read (a rotation keeping no parts)."""
        live = self.live
        return live is None or os.fstat(live.fd).st_size >= live.size

    def blocks(self, position: int) -> Iterator[bytes]:
        """The log's bytes from `position` to its end as opened."""
        for part in self.parts:
            if position < part.start + part.size:
                yield from read_from(part.fd, max(0, position - part.start), part.size, BLOCK)

    def lines(self, position: int) -> Iterator[bytes]:
        """The lines from `position`, each with its newline, at most MAX_LINE bytes
        (a longer one in pieces); the last without one if the log ends inside it."""
        buf = bytearray()
        for data in self.blocks(position):
            buf += data
            start = 0
            while True:
                nl = buf.find(b"\n", start, start + MAX_LINE)
                if nl >= 0:
                    yield bytes(buf[start:nl + 1])
                    start = nl + 1
                elif len(buf) - start >= MAX_LINE:
                    yield bytes(buf[start:start + MAX_LINE])
                    start += MAX_LINE
                else:
                    break
            del buf[:start]
        if buf:
            yield bytes(buf)

    def headers(self, job_id: str) -> Iterator[tuple[int, int]]:
        """(position, attempt) of each attempt's opening line in what is kept, in order.
        The oldest byte kept is taken for the start of a line."""
        pattern = re.compile(rb"\n" + _HEADER + re.escape(job_id.encode()) + rb" ")
        overlap = len(pattern.pattern) + 16
        carry, carry_at, last = b"\n", self.kept - 1, self.kept - 1
        for data in self.blocks(self.kept):
            buf = carry + data
            for match in pattern.finditer(buf):
                at = carry_at + match.start() + 1
                if at > last:
                    last = at
                    yield at, int(match[1])
            carry = buf[-overlap:]
            carry_at += len(buf) - len(carry)


_HEADER = rb"--- gqa: attempt (\d{1,9}) of job "


def _stamp(path: Path) -> tuple:
    """What changes when a rotation moves things: the record, `.1`, the record
    file itself and the rotation's intent."""
    def ident(p: Path, field: str) -> tuple[int, int] | None:
        try:
            st = os.stat(p, follow_symlinks=False)
        except OSError:
            return None
        return st.st_ino, getattr(st, field)

    return (rotations_of(path), ident(sibling(path, 1), "st_ctime_ns"),
            ident(sibling(path, "rotations"), "st_mtime_ns"), ident(sibling(path, "rotating"), "st_mtime_ns"))


# -- a page ------------------------------------------------------------------------------------------

def _page(whole: _Log, log: AttemptLog, job_id: str, position: int | None, limit: int) -> LogChunk:
    lines: list[str] = []
    first: tuple[int, int] | None = None     # the first attempt line kept, once looked for
    if position is None:
        for at, n in whole.headers(job_id):
            first = first or (at, n)
            if n == log.attempt:
                position = at + len(next(whole.lines(at)))
                break
        else:
            if (first is not None and first[1] <= log.attempt) or not whole.kept:
                raise NotFound(f"attempt {log.attempt} wrote nothing to {whole.path}")
            position = 0                     # its opening line was rotated away
    if position < whole.kept:
        lines.append(marker(whole.kept - position, whole.rotations.cap).rstrip(b"\n").decode())
        if first is None:
            first = next(whole.headers(job_id), None)
        ours = first[1] == log.attempt + 1 if first else log.status != RETRIED
        if not ours:                         # what is kept is later attempts': this one's was all rotated away
            return LogChunk(tuple(lines), str(first[0] if first else whole.end), True)
        position = whole.kept
    elif position > whole.end:               # cut short under the reader, not by a rotation
        position = whole.live.start if whole.live else whole.end
    later = re.compile(_HEADER + re.escape(job_id.encode()) + rb" ")
    caught_up = True
    for raw in whole.lines(position):
        if len(lines) >= limit:
            caught_up = False
            break
        whole_line = raw.endswith(b"\n") or len(raw) == MAX_LINE
        opens = later.match(raw)
        if (opens and int(opens[1]) > log.attempt) or (not whole_line and log.status == LIVE):
            break                            # a later attempt, or a line still being written
        position += len(raw)
        lines.append(raw.rstrip(b"\n").decode(errors="replace"))
    return LogChunk(tuple(lines), str(position), caught_up)


def _position(token: str) -> int:
    if not (token.isascii() and token.isdigit()):
        raise SpecError("not a log token gqa gave out; start again without it")
    return int(token)


def _started(job: JobRecord, attempt: int) -> float | None:
    """When attempt `attempt` started: the attempt-th move to RUNNING in the history."""
    starts = [t.at for t in job.history if t.state == JobState.RUNNING]
    return starts[attempt - 1] if len(starts) >= attempt else None
