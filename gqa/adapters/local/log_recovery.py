"""A rotation that a crash left half done (log_rotation.py), finished or undone.

Rotation copies the live log to `.1` and then cuts the copied bytes off the
live file: truncating it to nothing, or collapsing its head, the copy cut
back first to end where the collapse will (log_rotation._collapse_cut).
A daemon killed between the two leaves the copy in place and the live file
whole: every reader would show that part twice, and the next rotation would
keep both. So before it moves anything, a rotation writes its intent to
`<log>.rotating`: the record it will write, the inode of its copy and of the
oldest part it drops. The intent is removed once the record is written.

An intent whose record was not written is settled by whether the live file
was cut. That happens only once the copy is at `.1`; until then the live
file holds everything. Once the copy is there, a live file that no longer
starts with the copy's head (its first bytes, copied before the intent was
written: a copy cut in the middle goes on with other bytes) was cut. (One
that does may also have been cut and then rewritten with the very same
bytes, as long as the whole head: taken as not cut, such a part is lost as
a repeat, the one case where this guesses. A collapse leaves the live
file starting with the bytes that followed the part, which are the head
again only in a log that repeats itself with a period dividing the part's
size: the same guess, and the same bytes lost.) Whether the copy was cut
back to a block is no matter: the collapse comes after that, so a copy cut
back with the live file whole is undone like any other.
- Cut: the record is written, as the rotation would have.
- Not cut: the copy is removed and the parts are numbered again from `.1`;
  only the oldest part, if it was already dropped, counts as dropped.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .log_records import Rotations, parts, read_json, record, rotations_of, sibling, write_json

BLOCK = 1 << 20
FINISHED, UNDONE = "finished", "undone"


@dataclass(frozen=True)
class Intent:
    """`<log>.rotating`: the rotation under way."""

    then: Rotations              # the record it writes when done
    copy: int | None = None      # the inode of its copy (`.1.tmp`, then `.1`); None keeping no parts
    oldest: int | None = None    # the inode of the part it drops, if any
    oldest_size: int = 0
    size: int = 0                # keeping no parts: the bytes it cuts
    head: int | None = None      # the copy's first bytes, the live file's own; None: all of it

    def as_json(self) -> dict:
        return {"then": self.then.as_json(), "copy": self.copy, "oldest": self.oldest,
                "oldest_size": self.oldest_size, "size": self.size, "head": self.head}


def intent_of(path: Path) -> Intent | None:
    raw = read_json(sibling(path, "rotating"))
    if raw is None:
        return None
    try:
        return Intent(Rotations.from_json(raw["then"]), _inode(raw["copy"]), _inode(raw["oldest"]),
                      int(raw["oldest_size"]), int(raw["size"]),
                      None if raw.get("head") is None else int(raw["head"]))   # None: written before heads
    except (ValueError, TypeError, KeyError):
        return None


def intend(path: Path, intent: Intent, like: os.stat_result) -> None:
    write_json(sibling(path, "rotating"), intent.as_json(), like)


def done(path: Path) -> None:
    _remove(sibling(path, "rotating"))


@dataclass(frozen=True)
class Settled:
    """What a rotation under way (or left half done) comes to, as things are
    now: `cut` whether the live file was cut; `rotations` the record that
    then holds; `copy` its copy's name while that is not a part yet."""

    cut: bool
    rotations: Rotations
    copy: Path | None
    live: os.stat_result


def pending(path: Path) -> tuple[Intent, Rotations] | None:
    """The intent of a rotation whose record is not written, with the record there is."""
    intent = intent_of(path)
    if intent is None:
        return None
    before = rotations_of(path)
    return (intent, before) if before.count < intent.then.count else None


def settled(path: Path, intent: Intent, before: Rotations) -> Settled | None:
    """Read only: what the rotation comes to if settled now; None where the log is gone."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno not in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
            raise
        return None
    try:
        live = os.fstat(fd)
        if not stat.S_ISREG(live.st_mode):
            return None
        if intent.copy is None:
            cut, copy = live.st_size < intent.size, None
        else:
            copy = _part_with(path, intent.copy, [sibling(path, 1), sibling(path, "1.tmp")])
            cut = copy is not None and copy == sibling(path, 1) and not _starts_with(fd, copy, intent.copy,
                                                                                      intent.head)
    finally:
        os.close(fd)
    if cut:
        return Settled(True, intent.then, None, live)
    oldest_gone = intent.oldest is not None and _part_with(path, intent.oldest, _older(path, intent.then.keep)) is None
    dropped = before.dropped + (intent.oldest_size if oldest_gone else 0)
    return Settled(False, Rotations(before.count, dropped, intent.then.cap, intent.then.keep), copy, live)


def finish(path: Path | str) -> str | None:
    """Settle the rotation a crash left half done at the log `path`: FINISHED
    (the live file had been cut: the record is written), UNDONE (it had not:
    the copy is removed), or None (there was none). OSError (a full disk)
    leaves the intent, to be settled at the next try."""
    path = Path(path)
    intent = intent_of(path)
    if intent is None:
        for left in (sibling(path, "rotating"), sibling(path, "1.tmp"), sibling(path, "rotating.tmp")):
            # an intent unreadable (not one a rotation wrote: they are renamed in whole), a copy
            # a crash cut short before its intent, or that intent half written: nothing moved yet
            if os.path.lexists(left):
                _remove(left)
        return None
    before = rotations_of(path)
    if before.count >= intent.then.count:           # the record was written, the intent not yet removed
        done(path)
        return None
    outcome = settled(path, intent, before)
    if outcome is None:                             # the log itself is gone (or is not one gqa writes)
        done(path)
        return None
    if outcome.cut:
        record(path, outcome.rotations, outcome.live)
        done(path)
        return FINISHED
    if outcome.copy is not None:
        _remove(outcome.copy)
    _renumber(path, outcome.rotations.keep)
    if (outcome.rotations.count, outcome.rotations.dropped) != (before.count, before.dropped):
        record(path, outcome.rotations, outcome.live)
    done(path)
    return UNDONE


def finish_all(logs: Path) -> Iterator[tuple[Path, str | None | OSError]]:
    """Settle every half-done rotation under `logs`, and remove the copies
    cut short before their intent (at the daemon's start: the logs of jobs
    that ended meanwhile are rotated no more)."""
    try:
        logs_left = sorted({p.with_name(p.name[:p.name.rindex(".log.") + 4]) for p in logs.iterdir()
                            if p.name.endswith((".log.rotating", ".log.1.tmp"))})
    except FileNotFoundError:
        return
    for log in logs_left:
        try:
            yield log, finish(log)
        except OSError as exc:
            yield log, exc


# -- helpers -------------------------------------------------------------------------------------------

def _inode(value) -> int | None:
    return None if value is None else int(value)


def _inode_of(name: Path) -> int | None:
    try:
        st = os.stat(name, follow_symlinks=False)
    except OSError:
        return None
    return st.st_ino if stat.S_ISREG(st.st_mode) else None


def _older(path: Path, keep: int) -> list[Path]:
    """The rotated parts there are, `.1` up (gaps skipped), as readers find them."""
    return [name for name in reversed(parts(path, Rotations(keep=keep))) if name != path]


def _part_with(path: Path, inode: int | None, names: list[Path]) -> Path | None:
    return next((name for name in names if inode is not None and _inode_of(name) == inode), None)


def _starts_with(fd: int, copy: Path, inode: int, head: int | None) -> bool:
    """Whether the live file (fd) starts with the copy's first `head` bytes (None: all of them; the
    file `copy` names, if it is still the copy: one the rotation's undoing removed or numbered over
    counts as never cut)."""
    try:
        src = os.open(copy, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return True
    try:
        copied = os.fstat(src)
        if copied.st_ino != inode:
            return True
        size = copied.st_size if head is None else min(head, copied.st_size)
        if os.fstat(fd).st_size < size:
            return False
        at = 0
        while at < size:
            want = min(BLOCK, size - at)
            if os.pread(src, want, at) != os.pread(fd, want, at):
                return False
            at += want
        return True
    finally:
        os.close(src)


def _renumber(path: Path, keep: int) -> None:
    """Number the rotated parts `.1` up again, in order, closing the gaps an
    undone shift leaves (readers probe from `.1`)."""
    for n, name in enumerate(_older(path, keep), 1):
        if name != sibling(path, n):
            os.replace(name, sibling(path, n))


def _remove(name: Path) -> None:
    try:
        os.unlink(name)
    except FileNotFoundError:
        pass
