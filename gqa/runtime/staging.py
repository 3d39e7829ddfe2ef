"""Where a process writes a checkpoint before committing it to a directory,
and which leftovers of earlier processes may be removed.

Every process of an attempt (a torchrun worker, an eval hook, the script's
next stage) may save into the same directory at once, so a process removes
another's leftovers only once that process is dead. Each process stages in
a room of its own, `.tmp-<token>-<random>/`, holding an exclusive lock on
the room's `lock` file for as long as it lives: the lock goes with the
process (or with the last child it forked), so a room whose lock can be
taken is a dead process's, and is removed whole; a room whose lock is held
is left alone. A room is made under another name (`.gqa-new-...`) and locked
before it takes its `.tmp-` name, so no sweep sees it unlocked. On a
filesystem without locks nothing is ever judged dead: leftovers stay rather
than a live save be deleted.

Entries an earlier gqa left (a staging folder or pointer temp without a
lock, `.tmp-<token>-<random>`) are removed once a day old: those gqa versions
staged directly under that name, and no save takes a day.
"""

from __future__ import annotations

import errno
import fcntl
import os
import secrets
import shutil
import time
from pathlib import Path

STAGING_PREFIX = ".tmp-"
NEW_PREFIX = ".gqa-new-"
LOCK = "lock"
POINTER_LOCK = ".gqa-lock"   # serialises moves of `latest` (LocalStorage.update_latest)
UNLOCKED_AGE = 24 * 3600     # seconds: an entry without a lock is a dead process's past this

# locks a filesystem may not offer: then no room is ever judged dead
_NO_LOCKS = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL, errno.EBADF, errno.ENOSYS}
_TOKEN = secrets.token_hex(4)
# root (resolved) -> (this process's room there, the descriptor holding its lock), for the process's life
_ROOMS: dict[str, tuple[Path, int | None]] = {}


def room(root: Path) -> Path:
    """This process's locked staging room in `root`, made on first use."""
    key = os.path.realpath(root)
    known = _ROOMS.get(key)
    if known is not None and known[0].is_dir():
        return known[0]
    suffix = f"{_TOKEN}-{secrets.token_hex(4)}"
    pending = root / f"{NEW_PREFIX}{suffix}"
    pending.mkdir()
    fd: int | None = os.open(pending / LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    assert fd is not None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno not in _NO_LOCKS:
            raise
        fd = None   # a filesystem without locks: no sweep will ever take this room for a dead one's
    made = root / f"{STAGING_PREFIX}{suffix}"
    os.rename(pending, made)
    if known is not None and known[1] is not None:
        os.close(known[1])
    _ROOMS[key] = (made, fd)
    return made


def sweep(root: Path, *, now: float | None = None) -> list[str]:
    """Remove the rooms of dead processes and day-old unlocked leftovers in `root`;
    the names removed."""
    now = time.time() if now is None else now
    mine = _ROOMS.get(os.path.realpath(root))
    removed = []
    try:
        entries = list(os.scandir(root))
    except FileNotFoundError:
        return []
    for entry in entries:
        if mine is not None and entry.name == mine[0].name:
            continue
        if entry.name.startswith(STAGING_PREFIX):
            gone = _sweep_staging(entry, now)
        elif entry.name.startswith(NEW_PREFIX):
            gone = _old(entry, now) and _remove(entry)
        else:
            continue
        if gone:
            removed.append(entry.name)
    return removed


def _sweep_staging(entry: os.DirEntry[str], now: float) -> bool:
    if not entry.is_dir(follow_symlinks=False):
        return _old(entry, now) and _remove(entry)   # an earlier gqa's pointer temp
    try:
        fd = os.open(os.path.join(entry.path, LOCK), os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return _old(entry, now) and _remove(entry)   # an earlier gqa's staging folder
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False   # held: its process lives (or this filesystem cannot tell)
    try:
        return _remove(entry)
    finally:
        os.close(fd)


def _old(entry: os.DirEntry[str], now: float) -> bool:
    try:
        return now - entry.stat(follow_symlinks=False).st_mtime > UNLOCKED_AGE
    except OSError:
        return False


def _remove(entry: os.DirEntry[str]) -> bool:
    if entry.is_dir(follow_symlinks=False):
        shutil.rmtree(entry.path, ignore_errors=True)
    else:
        Path(entry.path).unlink(missing_ok=True)
    return not os.path.lexists(entry.path)


class PointerLock:
    """An exclusive lock on `root`'s POINTER_LOCK while `latest` is read and
    moved, so two processes never move it out of order; where the filesystem
    has no locks, unlocked (the move is then re-checked by its caller)."""

    def __init__(self, root: Path) -> None:
        self.path = root / POINTER_LOCK
        self.fd: int | None = None
        self.held = False

    def __enter__(self) -> PointerLock:
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
        except PermissionError:   # another user's lock file in a shared folder: a lock needs no write
            self.fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
            self.held = True
        except OSError as exc:
            if exc.errno not in _NO_LOCKS:
                os.close(self.fd)
                raise
        return self

    def __exit__(self, *_: object) -> None:
        if self.fd is not None:
            os.close(self.fd)   # closing drops the lock
            self.fd = None
