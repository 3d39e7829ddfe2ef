"""Storage faults of the local backend -> domain errors, one table.

SQLite errors are judged by their (extended, then primary) result code,
falling back to the exception class when the module raised one without a code;
OSErrors by errno. Never by message text. Each fault reads as one line that
names the path and what to do. Errors that are not storage faults (an SQL
mistake, a constraint) are not ours to translate: translate() returns None
and the caller lets them through.

`connect()` opens a connection whose every statement, fetch and row goes
through the table, so every use of the store's connection is covered,
including methods added later."""

from __future__ import annotations

import errno
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

from ...models.errors import GqaError, StorageBusy, StorageCorrupt, StorageFull, StorageUnavailable

# what went wrong -> (domain error, message); {path} {user} {timeout} {reason} are filled in
FULL = (StorageFull, "the disk holding {path} is full; free space and retry: nothing was changed")
QUOTA = (StorageFull, "user {user} is over the disk quota where {path} lives; free space and retry: "
                      "nothing was changed")
READ_ONLY = (StorageUnavailable, "{path} is read-only (the file or the filesystem holding it); make it writable "
                                 "and retry: nothing was changed")
DENIED = (StorageUnavailable, "user {user} may not write {path} (permission denied); fix its owner or mode, "
                              "or set GQA_HOME to a directory {user} owns: nothing was changed")
CANNOT_OPEN = (StorageUnavailable, "cannot open or create {path} as user {user}; check that its directory exists "
                                   "and that {user} may write there")
NOT_A_DIRECTORY = (StorageUnavailable, "cannot create {path}: a part of that path is a file, not a directory; "
                                       "set GQA_HOME to a directory")
LOCKED = (StorageBusy, "the queue database {path} is locked by another process for more than {timeout:g} s; "
                       "retry, or check `gqa local status`")
CORRUPT = (StorageCorrupt, "{path} is damaged or not a database ({reason}); restore it from a backup, "
                           "or move GQA_HOME aside to start a new queue")
IO_ERROR = (StorageUnavailable, "I/O error on {path} ({reason}); check the disk (dmesg) and retry")
MOVED = (StorageUnavailable, "{path} was moved or deleted while in use; put it back, or restart whatever "
                             "holds it open (`gqa local stop`, then `gqa local start`)")
UNUSABLE = (StorageUnavailable, "cannot use the queue database {path} ({reason}); retry, or check `gqa local status`")

# SQLite result codes (https://sqlite.org/rescode.html)
SQLITE_BUSY, SQLITE_LOCKED, SQLITE_READONLY, SQLITE_IOERR, SQLITE_CORRUPT = 5, 6, 8, 10, 11
SQLITE_PERM, SQLITE_FULL, SQLITE_CANTOPEN, SQLITE_PROTOCOL, SQLITE_NOTADB = 3, 13, 14, 15, 26
SQLITE_READONLY_DBMOVED = SQLITE_READONLY | (4 << 8)
SQLITE_IOERR_SHMSIZE = SQLITE_IOERR | (19 << 8)   # the -shm file could not grow: out of space
SQLITE_CANTOPEN_ISDIR = SQLITE_CANTOPEN | (2 << 8)

SQLITE_EXTENDED = {
    SQLITE_READONLY_DBMOVED: MOVED,
    SQLITE_IOERR_SHMSIZE: FULL,
    SQLITE_CANTOPEN_ISDIR: NOT_A_DIRECTORY,
}
SQLITE_PRIMARY = {
    SQLITE_FULL: FULL,
    SQLITE_READONLY: READ_ONLY,
    SQLITE_PERM: DENIED,
    SQLITE_BUSY: LOCKED,
    SQLITE_LOCKED: LOCKED,
    SQLITE_PROTOCOL: LOCKED,      # WAL locks kept changing hands: contention, as BUSY
    SQLITE_CORRUPT: CORRUPT,
    SQLITE_NOTADB: CORRUPT,
    SQLITE_CANTOPEN: CANNOT_OPEN,
    SQLITE_IOERR: IO_ERROR,
}
# an error the sqlite3 module raised without a result code; the first class that matches decides
# (None: not a storage fault, let it through: a constraint, a misuse of the API)
SQLITE_CLASSES: tuple[tuple[type[sqlite3.Error], tuple | None], ...] = (
    (sqlite3.IntegrityError, None),
    (sqlite3.ProgrammingError, None),
    (sqlite3.InterfaceError, None),
    (sqlite3.OperationalError, UNUSABLE),
    (sqlite3.DatabaseError, CORRUPT),
)
OS_ERRNOS = {
    errno.ENOSPC: FULL,
    errno.EDQUOT: QUOTA,
    errno.EROFS: READ_ONLY,
    errno.EACCES: DENIED,
    errno.EPERM: DENIED,
    errno.ENOTDIR: NOT_A_DIRECTORY,
    errno.EEXIST: NOT_A_DIRECTORY,   # mkdir(exist_ok=True) over a file
    errno.EIO: IO_ERROR,
}


def translate(exc: BaseException, path: str | os.PathLike, *, timeout: float = 30.0) -> GqaError | None:
    """The domain error for a storage fault on `path` (an OSError names its own
    file when it has one), or None when `exc` is not a storage fault."""
    if isinstance(exc, GqaError):
        return exc
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)
        if code is None:
            entry = next((entry for cls, entry in SQLITE_CLASSES if isinstance(exc, cls)), None)
        else:
            entry = SQLITE_EXTENDED.get(code) or SQLITE_PRIMARY.get(code & 0xFF)
        reason = getattr(exc, "sqlite_errorname", None) or type(exc).__name__
    elif isinstance(exc, OSError):
        entry = OS_ERRNOS.get(exc.errno) if exc.errno is not None else None
        path = exc.filename if exc.filename else path
        reason = exc.strerror or type(exc).__name__
    else:
        return None
    if entry is None:
        return None
    if entry is CANNOT_OPEN:
        entry = _why_not_open(path)
    cls, message = entry
    return cls(message.format(path=os.fspath(path), user=_user(), timeout=timeout, reason=reason))


@contextmanager
def storage_errors(path: str | os.PathLike, *, timeout: float = 30.0) -> Iterator[None]:
    """Storage faults inside the block leave it as domain errors."""
    try:
        yield
    except (sqlite3.Error, OSError) as exc:
        error = translate(exc, path, timeout=timeout)
        if error is None:
            raise
        raise error from exc


def connect(path: str, *, timeout: float) -> "Connection":
    """A connection in autocommit mode (the store issues BEGIN/COMMIT itself),
    waiting up to `timeout` seconds for another writer's lock."""
    with storage_errors(path, timeout=timeout):
        db = sqlite3.connect(path, isolation_level=None, timeout=timeout, check_same_thread=False,
                             factory=Connection)
    db.where, db.lock_timeout, db.tx_depth = path, timeout, 0
    return db


class Connection(sqlite3.Connection):
    where: str
    lock_timeout: float
    tx_depth: int   # open store transactions (store._Transaction)

    def execute(self, sql: str, parameters=()) -> "Cursor":
        return self.cursor(Cursor).execute(sql, parameters)

    def executemany(self, sql: str, parameters) -> "Cursor":
        return self.cursor(Cursor).executemany(sql, parameters)


class Cursor(sqlite3.Cursor):
    """Rows are stepped lazily, so a fault may come at any fetch, not only at execute."""

    def execute(self, sql: str, parameters=()) -> "Cursor":
        try:
            return super().execute(sql, parameters)
        except sqlite3.Error as exc:
            _reraise(self.connection, exc)

    def executemany(self, sql: str, parameters) -> "Cursor":
        try:
            return super().executemany(sql, parameters)
        except sqlite3.Error as exc:
            _reraise(self.connection, exc)

    def fetchone(self):
        try:
            return super().fetchone()
        except sqlite3.Error as exc:
            _reraise(self.connection, exc)

    def fetchmany(self, size: int | None = None):
        try:
            return super().fetchmany(self.arraysize if size is None else size)
        except sqlite3.Error as exc:
            _reraise(self.connection, exc)

    def fetchall(self):
        try:
            return super().fetchall()
        except sqlite3.Error as exc:
            _reraise(self.connection, exc)

    def __iter__(self):
        return iter(self.fetchall())   # in C and translated at once: a row at a time costs a pass dearly


def _why_not_open(path: str | os.PathLike) -> tuple:
    """SQLite says only that it could not open the file (or its -wal/-shm
    beside it): look at the directory to say why."""
    directory = os.path.dirname(os.path.abspath(path))
    try:
        if os.statvfs(directory).f_flag & os.ST_RDONLY:
            return READ_ONLY
    except OSError:
        return CANNOT_OPEN   # no such directory, or one we may not even look at
    if not os.access(directory, os.W_OK) or (os.path.exists(path) and not os.access(path, os.R_OK | os.W_OK)):
        return DENIED
    return CANNOT_OPEN


def _reraise(db: sqlite3.Connection, exc: sqlite3.Error) -> NoReturn:
    if not isinstance(db, Connection):   # a cursor on a connection connect() did not open: not ours to judge
        raise exc
    error = translate(exc, db.where, timeout=db.lock_timeout)
    if error is None:
        raise exc
    raise error from exc


def _user() -> str:
    try:
        import pwd

        return pwd.getpwuid(os.geteuid()).pw_name
    except (ImportError, KeyError):
        return str(os.geteuid())
