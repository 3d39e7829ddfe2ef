"""A job's log file on this machine: capped and rotated while the job runs.
log_stream.py reads it as one stream, log_pages.py page by page by attempt.

Layout, for job 12 (`paths.log_for`): `12.log` is the live file the job
appends to; `12.log.1` (newest) ... `12.log.K` (oldest) are earlier parts
moved aside by rotation; `12.log.rotations` records how many rotations
there were, how many bytes the oldest parts took with them, and the cap.
Readers treat `.K ... .1, live` as one log in order, headed by a one-line
marker once earlier parts were dropped (`as_read`).

Rotation copies the live file to `.1` and truncates it in place. The job
writes through a descriptor opened with O_APPEND (the executor opens the
log with "ab"), so its next write lands at the new end of the file, never
past a hole. What is guaranteed: bytes written before the copy finished are
in `.1`, bytes written after the truncation are in the live file; bytes
written in between (a few renames and one small copy long) may be lost.
Before it moves anything a rotation writes its intent beside the log, so
that a rotation a crash left half done is finished or undone, never kept
twice (log_recovery.py).
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from ...models.errors import SpecError
from ...models.units import parse_size
from . import log_recovery
from .log_records import Rotations, create_like, marker, parts, record, rotations_of, sibling
from .log_recovery import Intent

__all__ = ["LogLimits", "Rotations", "as_read", "marker", "parts", "read_from", "rotate_if_needed",
           "rotations_as_read", "rotations_of"]

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
BLOCK = 1 << 20          # bytes per read or copy: memory stays at this whatever the log's size
_BINARY = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([kmgt])i?b?\s*", re.I)


@dataclass(frozen=True)
class LogLimits:
    """Cap a job's live log at `max_bytes`; keep `keep` earlier parts of about
    that size (0: none, the live file is only truncated); drop what is older."""

    max_bytes: int = 100 * MiB
    keep: int = 2

    def __post_init__(self):
        if self.max_bytes < 1:
            raise SpecError(f"a log cap must be a positive size, not {self.max_bytes} bytes")
        if self.keep < 0:
            raise SpecError(f"the number of older log files to keep must be 0 or more, not {self.keep}")

    @classmethod
    def parse(cls, max_size: str | int, keep: int = 2) -> "LogLimits":
        """From `--log-max-size 100M --log-files 2`. K, M, G, T are binary here,
        as in Docker's max-size and Slurm's --mem; a bare number is MiB."""
        match = _BINARY.fullmatch(max_size) if isinstance(max_size, str) else None
        size = parse_size(f"{match[1]}{match[2]}i" if match else max_size, bare_unit="mi")
        return cls(size, keep)

    @property
    def cap(self) -> str:
        """`100 MiB x 2`: the cap and the parts kept, as the log's marker names them."""
        return f"{human_size(self.max_bytes)} x {self.keep}"

    def describe(self) -> str:
        older = f"the {self.keep} latest earlier part{'s' if self.keep != 1 else ''} kept" if self.keep \
            else "earlier output dropped"
        return f"job logs capped at {human_size(self.max_bytes)}, {older} (log cap {self.cap})"


def human_size(size: int) -> str:
    for unit, factor in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} bytes"


# -- rotation -----------------------------------------------------------------------------------------

def rotate_if_needed(path: Path | str, limits: LogLimits) -> bool:
    """Rotate the live log at `path` if it is over the cap; whether it did.
    A log that does not exist (yet, or any more) is no error: False. Any
    other OSError (a full disk, permissions) is raised with the live log
    whole: the copy is removed and the live file is not truncated.

    The daemon may run as root over logs owned by their jobs' users: the
    log is opened without following a link, must be a plain file with one
    name, and is copied and truncated through that one descriptor; the
    parts it makes get the live file's owner and mode."""
    path = Path(path)
    log_recovery.finish(path)     # a rotation a crash left half done is settled first
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as exc:
        if exc.errno == errno.ELOOP:     # a link where the log should be: not a file gqa writes
            return False
        raise
    try:
        live = os.fstat(fd)
        if not stat.S_ISREG(live.st_mode) or live.st_nlink != 1 or live.st_size <= limits.max_bytes:
            return False
        before = rotations_of(path)
        then = Rotations(before.count + 1, before.dropped, limits.cap, limits.keep)
        try:
            if limits.keep == 0:
                intent = Intent(replace(then, dropped=before.dropped + live.st_size), size=live.st_size)
                log_recovery.intend(path, intent, live)
            else:
                intent = _copy_aside(path, fd, live, then)
            os.ftruncate(fd, 0)
        except BaseException:
            _undo(path)
            raise
    finally:
        os.close(fd)
    # recorded after the truncation: a follower that sees the count change knows the live file restarted.
    # The rotation itself is done: a record that cannot be written (a full disk) leaves the intent, and
    # the next call writes it (log_recovery.finish); readers meanwhile read by the intent (as_read)
    try:
        record(path, intent.then, live)
        log_recovery.done(path)
    except OSError:
        pass
    return True


def _undo(path: Path) -> None:
    """Undo a rotation that failed before the live file was cut: the live file is whole."""
    try:
        log_recovery.finish(path)
    except OSError:
        pass    # the intent stays, settled at the next call


def _copy_aside(path: Path, src: int, live: os.stat_result, then: Rotations) -> Intent:
    """Copy the live log to `.1`, shifting the older parts and dropping the
    oldest; the intent, written before anything moved. On any error the copy
    is removed (the caller then does not truncate, so nothing is lost)."""
    tmp, first = sibling(path, "1.tmp"), sibling(path, 1)
    dst = create_like(tmp, live)
    copy = tmp
    try:
        _copy(src, dst)                 # the long part, while the job keeps writing
        oldest = _part_stat(sibling(path, then.keep))
        intent = Intent(replace(then, dropped=then.dropped + (oldest.st_size if oldest else 0)),
                        copy=os.fstat(dst).st_ino, oldest=oldest.st_ino if oldest else None,
                        oldest_size=oldest.st_size if oldest else 0)
        log_recovery.intend(path, intent, live)
        _shift(path, then.keep)         # .1 -> .2 ... ; the oldest kept is dropped
        os.replace(tmp, first)
        copy = first
        _copy(src, dst)                 # what came during the copy and the renames: the window stays small
        copied = os.fstat(dst).st_size
        if os.fstat(src).st_size > copied or copied % PAGE == 0:
            # the job wrote on as the copy ended, or the copy ends at a page boundary (where a write
            # becomes visible a page at a time): its last line may be a write seen half done, whose
            # rest the truncation discards. Lost whole rather than torn; a line the job left
            # unfinished with no write after it is kept
            _end_at_line(dst)
        return intent
    except BaseException:
        try:
            os.unlink(copy)
        except OSError:
            pass
        raise
    finally:
        os.close(dst)


def _part_stat(name: Path) -> os.stat_result | None:
    try:
        st = os.stat(name, follow_symlinks=False)
    except FileNotFoundError:
        return None
    return st if stat.S_ISREG(st.st_mode) else None


PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _end_at_line(fd: int, window: int = 64 << 10) -> None:
    """Cut a copy back to its last line end: a reader may see a write that is
    half done, and the truncation that follows the copy discards its rest.
    A last line longer than `window` is kept as it is."""
    size = os.fstat(fd).st_size
    if size == 0:
        return
    tail = os.pread(fd, min(window, size), size - min(window, size))
    if tail.endswith(b"\n"):
        return
    cut = tail.rfind(b"\n")
    if cut >= 0:
        os.ftruncate(fd, size - len(tail) + cut + 1)


def _shift(path: Path, keep: int) -> None:
    """Move `.1` to `.2` ... `.keep-1` to `.keep`, dropping `.keep`."""
    try:
        os.unlink(sibling(path, keep))
    except FileNotFoundError:
        pass
    for n in range(keep - 1, 0, -1):
        try:
            os.replace(sibling(path, n), sibling(path, n + 1))
        except FileNotFoundError:
            pass


def _copy(src: int, dst: int) -> int:
    """Copy from src's position to its end onto dst's position; bytes copied.
    copy_file_range stays in the kernel (and may share blocks); where the
    file system refuses it, plain reads and writes of BLOCK bytes."""
    total = 0
    while True:
        try:
            n = os.copy_file_range(src, dst, BLOCK)
        except OSError as exc:
            if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EPERM):
                raise
            return total + _copy_plain(src, dst)
        if n == 0:
            return total
        total += n


def _copy_plain(src: int, dst: int) -> int:
    total = 0
    while data := os.read(src, BLOCK):
        view = memoryview(data)
        while view:
            view = view[os.write(dst, view):]
        total += len(data)
    return total


# -- reading ---------------------------------------------------------------------------------------------

def as_read(path: Path) -> tuple[Rotations, list[Path]]:
    """The record and the parts a reader reads the log by now. While a
    rotation is under way (or was left half done) they are what it comes to
    if settled now (log_recovery.settled): its copy is no part until the live
    file is cut, and then the record it will write holds. So a reader never
    sees a part twice, nor a copy being made."""
    rotations, copy = _rotations_as_read(path)
    return rotations, [p for p in parts(path, rotations) if p != copy]


def rotations_as_read(path: Path) -> Rotations:
    """as_read's record alone (a follower's poll)."""
    return _rotations_as_read(path)[0]


def _rotations_as_read(path: Path) -> tuple[Rotations, Path | None]:
    under_way = log_recovery.pending(path)
    outcome = log_recovery.settled(path, *under_way) if under_way is not None else None
    if outcome is None:
        return (under_way[1] if under_way else rotations_of(path)), None
    return outcome.rotations, outcome.copy


def read_from(fd: int, offset: int, limit: int | None, block: int) -> Iterator[bytes]:
    """fd's bytes from `offset` to `limit` (default: its end as it grows), a block at a time."""
    while limit is None or offset < limit:
        data = os.pread(fd, block if limit is None else min(block, limit - offset), offset)
        if not data:
            return
        offset += len(data)
        yield data
