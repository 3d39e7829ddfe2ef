"""A job's log file on this machine: capped and rotated while the job runs.
log_stream.py reads it as one stream, log_pages.py page by page by attempt.

Layout, for job 12 (`paths.log_for`): `12.log` is the live file the job
appends to; `12.log.1` (newest) ... `12.log.K` (oldest) are earlier parts
moved aside by rotation; `12.log.rotations` records how many rotations
there were, how many bytes the oldest parts took with them, and the cap.
Readers treat `.K ... .1, live` as one log in order, headed by a one-line
marker once earlier parts were dropped (`as_read`).

Rotation copies the live file to `.1` and cuts the copied bytes off it in
place. The job writes through a descriptor opened with O_APPEND (the
executor opens the log with "ab"), so its next write lands at the new end
of the file, never past a hole. Where the file system collapses a file's
head (ext4, XFS: collapse.py) the cut removes exactly the part's bytes, the
copy cut back to a block boundary, atomically against the job's writes:
nothing the job writes is lost and no line is torn; a part may end inside
a line, which the live file goes on with, and readers join them. Elsewhere
(tmpfs, btrfs, NFS, overlay), for a log under a block, and where the
copy's last block boundary falls in its middle cut, the live file is
truncated: bytes written before the copy finished are in `.1`, bytes
written after the truncation are in the live file; bytes written in
between (a few renames and one small copy long) may be lost.
A part holds at most `LogLimits.part_bytes`, the cap and as much again
(1 MiB at least; log_watch.py looks at a log soon enough after it is
written that a job writing tens of MB/s stays within it): of a job that
wrote past that before the rotation began, the part keeps the head and the
newest bytes, and a line saying how many bytes were cut between them
(`cut_marker`). Truncating, a copy that caught up waits QUIET for more
before the cut (a job's last lines come right after its last burst), and
one that writes on is chased for CHASE; what it writes after the last look
goes with the cut, as in the window above.
Before it moves anything a rotation writes its intent beside the log, so
that a rotation a crash left half done is finished or undone, never kept
twice (log_recovery.py).
"""

from __future__ import annotations

import errno
import os
import re
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from ...models.errors import SpecError
from ...models.units import parse_size
from . import collapse, log_recovery
from .log_records import Rotations, create_like, cut_marker, marker, parts, record, rotations_of, sibling
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
    def part_bytes(self) -> int:
        """The most a rotated part holds: the cap and as much again, 1 MiB at
        least. A job that writes past it before its log is rotated has the
        middle of what it wrote cut (`_catch_up`)."""
        return self.max_bytes + max(self.max_bytes, MiB)

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
        then = before.after(0, limits.keep, limits.cap)   # truncated, until a collapse says how much it cut
        try:
            if limits.keep == 0:
                intent = Intent(replace(then, dropped=before.dropped + live.st_size), size=live.st_size)
                log_recovery.intend(path, intent, live)
                os.ftruncate(fd, 0)
            else:
                intent = _copy_aside(path, fd, live, then, limits)   # its last step cuts the live file
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


def _copy_aside(path: Path, src: int, live: os.stat_result, then: Rotations, limits: LogLimits) -> Intent:
    """Copy the live log to `.1`, shifting the older parts and dropping the
    oldest, and cut the live file; the intent, written before anything
    moved. A log past the part's bound keeps its head and its newest bytes,
    the middle cut (`_catch_up`). On any error before the cut the copy is
    removed and the live file left whole, so nothing is lost."""
    tmp, first = sibling(path, "1.tmp"), sibling(path, 1)
    dst = create_like(tmp, live)
    copy = tmp
    room = limits.part_bytes - limits.max_bytes
    try:
        try:
            # the long part, while the job keeps writing: what was there as the rotation began, within the
            # head's share of the bound (chased, a job writing as fast as the copy would keep it going)
            head = _copy(src, dst, min(live.st_size, limits.max_bytes + room // 2))
            if head < live.st_size:         # stopped short: the head ends with its last whole line
                _end_at_line(dst)
                head = os.lseek(src, os.fstat(dst).st_size, os.SEEK_SET)
            oldest = _part_stat(sibling(path, then.keep))
            stood_for = oldest.st_size + _middle_cut(sibling(path, then.keep), limits) if oldest else 0
            intent = Intent(replace(then, dropped=then.dropped + stood_for),
                            copy=os.fstat(dst).st_ino, oldest=oldest.st_ino if oldest else None,
                            oldest_size=oldest.st_size if oldest else 0, head=head)
            log_recovery.intend(path, intent, live)
            _shift(path, then.keep)         # .1 -> .2 ... ; the oldest kept is dropped
            os.replace(tmp, first)
            copy = first
            def continued(cut: int) -> None:
                # the intent says how much the cut takes before it is made (0 again where it was refused): a
                # reader by the intent, or the record a crash's recovery writes, goes on in the live file there
                nonlocal intent
                intent = replace(intent, then=replace(intent.then, continued=(cut,) + intent.then.continued[1:]))
                log_recovery.intend(path, intent, live)

            torn = _catch_up(src, dst, head, limits.part_bytes, room // 4, then.cap, continued)
        except BaseException:
            try:
                os.unlink(copy)
            except OSError:
                pass
            raise
        if torn:
            # truncated: the job wrote on as the copy ended, or the copy ends at a page boundary (where a write
            # becomes visible a page at a time): its last line may be a write seen half done, whose
            # rest the cut took. Lost whole rather than torn; a line the job left unfinished with no
            # write after it is kept. (After the cut, which nothing may undo: it only ends the part)
            try:
                _end_at_line(dst)
            except OSError:
                pass
        return intent
    finally:
        os.close(dst)


_MIN_CUT = 256       # bytes; less is kept instead: a cut longer than its line gives no reader a byte twice
CHASE = 0.01         # seconds a rotation copies what a job writes on before it cuts the live file
QUIET = 0.002        # seconds a rotation whose copy caught up waits for what comes right after a burst


def _catch_up(src: int, dst: int, head: int, bound: int, newest: int, cap: str,
              continued: Callable[[int], None]) -> bool:
    """Copy what came after the head, within `bound` bytes in all, then cut
    the live file; whether the copy may end with a write seen half done.
    `continued` is told the bytes a collapse is about to cut off the live
    file's head, before it does (and 0 if it was then refused).
    Where more came than the bound holds, the middle is cut: the copy keeps
    the head, a line saying how many bytes were cut, and the newest `newest`
    bytes (from a line start), for a job's last lines tell why it ended.

    Where the file system collapses a file's head (`_collapse_cut`), the
    live file is cut once the copy has caught up, with nothing lost. Else
    it is truncated, and what the job writes between the last look and the
    truncation goes with it: a copy catches up as a burst ends, just before
    a job's last lines, so the live file is truncated once a copy that
    caught up finds nothing more after QUIET. A job that writes on is chased
    for CHASE, then copied once more (and once more after QUIET if that
    caught up), its newest bytes as they are then. (The intent names the
    head alone as the live file's own bytes, so a crash before the cut is
    still told from one after it; readers take the copy for no part until
    then.)"""
    resumed = None       # where the copy went on in the live file after a middle cut

    def another() -> tuple[int, int]:
        nonlocal resumed
        end, at = os.fstat(src).st_size, os.lseek(src, 0, os.SEEK_CUR)
        if end - at > bound - os.fstat(dst).st_size and end - newest - head >= _MIN_CUT:
            resume = end - newest
            window = os.pread(src, min(newest, 64 << 10), resume)
            resume += window.find(b"\n") + 1     # 0 where the window holds no line end
            os.ftruncate(dst, head)                 # a cut an earlier round made is made again
            os.lseek(dst, head, os.SEEK_SET)
            torn = head > 0 and os.pread(dst, 1, head - 1) != b"\n"
            os.write(dst, (b"\n" if torn else b"") + cut_marker(resume - head, cap))
            os.lseek(src, resume, os.SEEK_SET)
            resumed = resume
        _copy(src, dst, bound - os.fstat(dst).st_size)
        return os.lseek(src, 0, os.SEEK_CUR), os.fstat(src).st_size

    at, size = another()
    if _collapse_cut(src, dst, at, resumed, continued):
        return False
    deadline, quiet_at = time.monotonic() + CHASE, None
    while time.monotonic() < deadline:
        at, size = another()
        if size <= at:                  # caught up
            if at == quiet_at:          # and nothing came for QUIET
                break
            quiet_at = at
            time.sleep(QUIET)
    else:
        at, size = another()
        if size <= at and at != quiet_at:
            time.sleep(QUIET)
            at, size = another()
    os.ftruncate(src, 0)
    return size > at or at % PAGE == 0


def _collapse_cut(src: int, dst: int, at: int, resumed: int | None, continued: Callable[[int], None]) -> bool:
    """Cut the live file (copied up to `at`) by collapsing its head in place
    (collapse.py): the copy is cut back to end at a block boundary X, and the
    live file's first X bytes are removed, so it starts with the byte after
    the copy's last. A write that comes meanwhile lands at the live file's
    end, before the collapse or after it, and is kept either way; the copy
    may end inside a line, which the live file goes on with. Whether it was
    done; where it was not (a file system that cannot, a log under a block,
    an X inside the middle cut), the copy and the live file's position are
    as they were and the caller truncates."""
    try:
        grain = collapse.granularity(src)
    except OSError:
        return False
    x = (at - 1) // grain * grain    # below `at`: a collapse must end before the end of the file
    if x <= 0 or (resumed is not None and x < resumed):
        return False
    ends = os.fstat(dst).st_size - (at - x)
    # the copy is cut back first: a crash before the collapse leaves a copy of the live file's head
    # (undone), one after leaves the part and the live file meeting at X (finished): log_recovery.py
    os.ftruncate(dst, ends)
    os.lseek(dst, ends, os.SEEK_SET)
    continued(x)
    if collapse.collapse_head(src, x):
        return True
    continued(0)
    os.lseek(src, x, os.SEEK_SET)    # refused: the bytes cut off the copy are copied again
    return False


_CUT_LINE = re.compile(rb"(?m)^--- gqa: ([0-9,]{1,20}) bytes cut here, written faster than the log could be rotated ")


def _middle_cut(part: Path, limits: LogLimits) -> int:
    """The job's bytes a part stands for beyond its size: those its middle cut took (`cut_marker`),
    less the marker line, which is no output of the job; 0 without one. So "N bytes of earlier
    output rotated away" counts what a dropped part stood for. A part is written here, at most
    part_bytes (and a line) long; a read beyond that, or that fails, counts none."""
    try:
        fd = os.open(part, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return 0
    try:
        text = os.read(fd, limits.part_bytes + 4096)
    except OSError:
        return 0
    finally:
        os.close(fd)
    found = _CUT_LINE.search(text)
    if found is None:
        return 0
    line = (text.find(b"\n", found.start()) + 1 or len(text)) - found.start()
    return int(found.group(1).replace(b",", b"")) - line


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


def _copy(src: int, dst: int, most: int) -> int:
    """Copy from src's position to its end (as it grows), at most `most` bytes,
    onto dst's position; bytes copied. copy_file_range stays in the kernel (and
    may share blocks); where the file system refuses it, plain reads and writes
    of BLOCK bytes."""
    total = 0
    while total < most:
        try:
            n = os.copy_file_range(src, dst, min(BLOCK, most - total))
        except OSError as exc:
            if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EPERM):
                raise
            return total + _copy_plain(src, dst, most - total)
        if n == 0:
            return total
        total += n
    return total


def _copy_plain(src: int, dst: int, most: int) -> int:
    total = 0
    while total < most and (data := os.read(src, min(BLOCK, most - total))):
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
