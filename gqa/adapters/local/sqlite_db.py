"""The queue's SQLite database: opening it (WAL, FULL sync), checking it is
this home's queue, bringing an older schema (sqlite_schema.py) up to date,
and transactions (BEGIN IMMEDIATE, re-entrant). The store's parts by concern
build on it."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

from ...models.errors import BackendUnavailable, QueueMismatch, SpecError, StorageBusy, StorageCorrupt
from .outbox_schema import outbox_statements
from .paths import StatePaths, marker_for
from .sqlite_schema import ADDED_COLUMNS, INDEX_STATEMENT, SCHEMA, SCHEMA_VERSION, TRIGGERS
from .storage_errors import connect, storage_errors

DEFAULT_LOCK_TIMEOUT = 30.0   # seconds; GQA_LOCK_TIMEOUT overrides
_QUEUE_ID = re.compile(r"[0-9a-f]{16}")


class SqliteDatabase:
    """Opening checks that the database is this home's queue (see _check_identity)
    and every storage fault on the way in or out is a domain error (storage_errors)."""

    db: sqlite3.Connection

    def __init__(self, path: Path | str, *, durable: bool = True, lock_timeout: float | None = None):
        self.path = str(path)
        self.marker = marker_for(Path(self.path))
        # how long a write waits for another process's lock before StorageBusy
        self.lock_timeout = lock_timeout_from_env() if lock_timeout is None else lock_timeout
        with storage_errors(self.path, timeout=self.lock_timeout):
            expected = _read_marker(self.marker)
            self._refuse_missing(expected)
            self.db = connect(self.path, timeout=self.lock_timeout)
            try:
                version, queue_id = self._check_identity(expected)
                # FULL: a transition that returned survives a power cut, not only a crash
                self.db.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
                self._migrate(version)
                if queue_id != expected:
                    _write_marker(self.marker, queue_id)
            except BaseException:
                self.db.close()
                raise

    def close(self) -> None:
        with storage_errors(self.path, timeout=self.lock_timeout):
            self.db.close()

    # -- identity -------------------------------------------------------------------
    # A new queue draws a random id and keeps it twice: in meta and in the marker
    # file beside the database. A database that lost its id (emptied, replaced,
    # another queue's) would hand out job ids 1, 2, ... again next to the old jobs'
    # logs and checkpoints, so it is refused, with what to do.
    def _refuse_missing(self, expected: str | None) -> None:
        """Before connecting, which would create the file: a missing or empty
        database where a queue lived (the marker, or its jobs' files, say so)."""
        try:
            size = os.stat(self.path).st_size
        except FileNotFoundError:
            size = None
        if size:
            return
        if expected is not None:
            raise self._lost(expected, "is missing" if size is None else "is empty")
        self._refuse_leftovers()

    def _lost(self, expected: str, what: str) -> QueueMismatch:
        return QueueMismatch(f"{self.path} {what} but this home's queue (id {expected}) was kept in it: restore it "
                             f"from a backup, or move {Path(self.path).parent} aside to start a new queue")

    def _identity(self) -> tuple[int, str | None] | None:
        """(schema version, queue id) from meta; None for a database with no tables at all.
        StorageCorrupt for an SQLite file that is not a gqa database. Both reads
        see one snapshot: another process creating the queue between them must
        not make it look like some other application's tables."""
        if self.db.in_transaction:
            return self._identity_read()
        self.db.execute("BEGIN")
        try:
            return self._identity_read()
        finally:
            self.db.execute("ROLLBACK")

    def _identity_read(self) -> tuple[int, str | None] | None:
        # the catalogue first: its read starts the snapshot the meta read then shares
        tables = {r[0] for r in self.db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not tables:
            return None
        if "meta" not in tables:
            raise self._foreign()
        rows = dict(self.db.execute("SELECT key, value FROM meta WHERE key IN ('schema_version', 'queue_id')"))
        if "schema_version" not in rows:
            raise self._foreign()
        return int(rows["schema_version"]), rows.get("queue_id")

    def _foreign(self) -> StorageCorrupt:
        return StorageCorrupt(f"{self.path} is an SQLite database but not a gqa queue (no schema version); "
                              f"point GQA_HOME elsewhere, or move {self.path} aside")

    def _check_identity(self, expected: str | None) -> tuple[int, str]:
        """The schema version and the queue id, once the database is known to be
        this queue's: a fresh one is created, one from before queue ids adopted."""
        found = self._identity()
        if found is None:   # nothing here yet
            if expected is not None:
                raise self._lost(expected, "is empty")
            self._refuse_leftovers()
            # one creator at a time: several first commands at once on a new home would otherwise switch
            # the journal mode and create the schema against each other's locks
            with _creating(Path(self.path).parent, self.lock_timeout):
                found = self._identity()   # another process may have created it meanwhile
                if found is None:
                    self.db.execute("PRAGMA journal_mode=WAL")
                    with self._tx():
                        new_id = _new_queue_id()
                        for statement in (*SCHEMA.split(";"), *TRIGGERS):
                            if statement.strip():
                                self.db.execute(statement)
                        self.db.executemany("INSERT INTO meta VALUES (?, ?)", [
                            ("schema_version", str(SCHEMA_VERSION)), ("next_group", "1"), ("queue_id", new_id)])
                    return SCHEMA_VERSION, new_id
        version, queue_id = found
        if queue_id is None:
            if expected is not None:
                raise QueueMismatch(
                    f"{self.path} has no queue id but this queue's is {expected}: it is an older file, not this "
                    f"queue's database; restore the right one from a backup, or, if it is this queue's, delete "
                    f"{self.marker} to adopt it")
            # written before queue ids existed: adopt it (inside a write, in case another process does too)
            self.db.execute("PRAGMA journal_mode=WAL")
            with self._tx():
                queue_id = self._meta("queue_id") or _new_queue_id()
                self.db.execute("INSERT OR IGNORE INTO meta VALUES ('queue_id', ?)", (queue_id,))
            return version, queue_id
        if expected is not None and queue_id != expected:
            raise QueueMismatch(f"{self.path} belongs to another queue (id {queue_id}), not this one (id {expected}): "
                                f"restore this queue's database from a backup, or move {Path(self.path).parent} "
                                "aside to start a new queue")
        self.db.execute("PRAGMA journal_mode=WAL")
        return version, queue_id

    def _refuse_leftovers(self) -> None:
        """No database and no marker, but jobs' files: the remains of a lost queue."""
        found = StatePaths(Path(self.path).parent).leftovers()
        if found:
            raise QueueMismatch(
                f"{self.path} is missing or empty and there is no queue id, but {', '.join(map(str, found))} hold "
                "files of earlier jobs: a new queue would reuse their job ids; restore the database from a backup, "
                f"or move {Path(self.path).parent} aside to start a new queue")

    # -- schema --------------------------------------------------------------------
    def _migrate(self, version: int) -> None:
        """Bring a database written by another gqa version to this schema."""
        if version == SCHEMA_VERSION:   # the common case: no write transaction needed
            self._add_indexes()
            return
        if version > SCHEMA_VERSION:
            raise BackendUnavailable(f"{self.path} was written by a newer gqa (schema {version}); upgrade gqa")
        with self._tx():
            for statement in SCHEMA.split(";"):   # the tables first: an index may be on a column added below
                if statement.strip() and not statement.strip().startswith("CREATE INDEX"):
                    self.db.execute(statement)
            self._add_columns()
            for statement in (*dict(INDEX_STATEMENT.findall(SCHEMA)).values(), *TRIGGERS):
                self.db.execute(statement)
            if version < 7 and self.db.execute("SELECT 1 FROM sqlite_master WHERE name = 'notices'").fetchone():
                # the notices' trigger read a job's spec in its row, which now holds a key to `texts`
                self.db.execute("DROP TRIGGER IF EXISTS notices_of_moves")
                for statement in outbox_statements():
                    self.db.execute(statement)
            self.db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))

    def _add_indexes(self) -> None:
        """Indexes added within a schema version (history's, in version 5): one
        read of the catalogue, and a write only for a database that lacks one."""
        wanted = dict(INDEX_STATEMENT.findall(SCHEMA))
        present = {r[0] for r in self.db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        if wanted.keys() - present:
            with self._tx():
                for name in wanted.keys() - present:
                    self.db.execute(wanted[name])

    def _add_columns(self) -> None:
        """Bring a database written by an older gqa up to date: its rows keep their values."""
        for table, column, declaration in ADDED_COLUMNS:
            present = {r[1] for r in self.db.execute(f"PRAGMA table_info({table})")}
            if column not in present:
                self.db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")

    def _tx(self):
        return _Transaction(self.db)

    # -- meta: the counters, the queue id and the settings kept as JSON -------------
    def revision(self) -> int:
        """See read_revision: equal revisions, the same jobs and settings."""
        with storage_errors(self.path, timeout=self.lock_timeout):
            return read_revision(self.db)

    def queue_id(self) -> str:
        """The queue's identity, as its marker file holds it."""
        with storage_errors(self.path, timeout=self.lock_timeout):
            return self._meta("queue_id") or ""

    def _stamp(self) -> int:
        """Inside a write transaction: the revision it commits as, which the rows it writes carry."""
        return read_revision(self.db) + 1

    def _meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None


# one more than the last: the first write of a queue made before the counter starts it at 1
BUMP_REVISION = ("INSERT INTO meta VALUES ('revision', '1') "
                 "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1")


def in_parts(keys: list[str], size: int = 500) -> Iterator[tuple[list[str], str]]:
    """`keys` in parts of `size`, each with its `?, ?, ...` for an IN (...): SQLite caps a statement's
    parameters (999 before 3.32), so a read of many keys is a query per part."""
    for start in range(0, len(keys), size):
        part = keys[start:start + size]
        yield part, ", ".join("?" for _ in part)


def read_revision(db: sqlite3.Connection) -> int:
    """The store's revision: bumped by every transaction that changed a row
    (one primary-key lookup)."""
    row = db.execute("SELECT value FROM meta WHERE key = 'revision'").fetchone()
    return int(row[0]) if row else 0


@contextlib.contextmanager
def _creating(directory: Path, timeout: float):
    """An exclusive flock on the database's directory while a queue is created
    (a lock on the directory, not the file: closing a descriptor of the
    database would drop SQLite's own locks on it). StorageBusy past `timeout`."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise StorageBusy(f"another process has been creating the queue in {directory} for more than "
                                      f"{timeout:g} s; retry") from None
                time.sleep(0.01)
        yield
    finally:
        os.close(fd)


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT; rollback on any error, a failed COMMIT
    included, so no half-written change stays and the connection stays usable.
    Re-entrant: an inner one joins the outer (the depth is kept on the connection).
    A transaction that changed a row bumps the store's revision (meta's
    `revision`) as it commits, so a reader tells a view computed from the
    store is current with one lookup, whichever write path changed it."""

    def __init__(self, db: sqlite3.Connection):
        self.db = db
        self.outer = False
        self.changes = 0

    def __enter__(self):
        if not self.db.tx_depth:
            if self.db.in_transaction:   # left open by a rollback that failed: end it, never join it
                self.db.execute("ROLLBACK")
            self.db.execute("BEGIN IMMEDIATE")
            self.outer = True
            self.changes = self.db.total_changes
        self.db.tx_depth += 1
        return self

    def __exit__(self, exc_type, exc, tb):
        self.db.tx_depth -= 1
        if self.outer:
            if exc_type is None:
                try:
                    if self.db.total_changes != self.changes:
                        self.db.execute(BUMP_REVISION)
                    self.db.execute("COMMIT")
                except BaseException:
                    self._rollback()
                    raise
            else:
                self._rollback()
        return False

    def _rollback(self) -> None:
        # SQLite may already have rolled back (on SQLITE_FULL, IOERR, BUSY); a rollback that
        # fails must not hide the error that caused it (the next transaction retries it)
        try:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
        except Exception:
            pass


def lock_timeout_from_env(env: dict[str, str] | None = None) -> float:
    """GQA_LOCK_TIMEOUT: seconds a write waits for another process's lock (default 30)."""
    raw = (os.environ if env is None else env).get("GQA_LOCK_TIMEOUT", "").strip()
    if not raw:
        return DEFAULT_LOCK_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value < 1e6:
        raise SpecError(f"GQA_LOCK_TIMEOUT must be a number of seconds >= 0, got {raw!r}")
    return value


def _new_queue_id() -> str:
    return os.urandom(8).hex()


def _read_marker(marker: Path) -> str | None:
    """The queue id the marker holds; None without one (or with one that holds no id)."""
    try:
        text = marker.read_text().strip()
    except FileNotFoundError:
        return None
    return text if _QUEUE_ID.fullmatch(text) else None


def _write_marker(marker: Path, queue_id: str) -> None:
    """Atomically: a reader sees the old marker or the new one, never part of one."""
    temp = marker.with_name(f".{marker.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, (queue_id + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, marker)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    with contextlib.suppress(OSError):   # the rename itself survives a power cut
        fd = os.open(marker.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
