"""Storage faults of the SQLite store end in clear states: a domain error of
one line naming the path, and the database unchanged and consistent.

Disk full and read-only run on a real filesystem when we are root (a small
tmpfs; a read-only bind mount); otherwise SQLite's own SQLITE_FULL
(max_page_count) and permissions stand in. The identity checks refuse a
database that would hand out job ids again next to the old jobs' files."""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

import pytest

from gqa.adapters.local import storage_errors
from gqa.adapters.local.lock import acquire_lock, daemon_running
from gqa.adapters.local.paths import StatePaths, marker_for
from gqa.adapters.local.store import SqliteStore, lock_timeout_from_env
from gqa.models.errors import (Conflict, NotFound, QueueMismatch, SpecError, StorageBusy, StorageCorrupt, StorageFull,
                               StorageUnavailable)
from gqa.models.job import JobState
from gqa.ports import Change
from tests.builders import job_record

ROOT = os.geteuid() == 0


def fresh(n: int = 1, **overrides):
    return [job_record(id="", group="", **overrides) for _ in range(n)]


def snapshot(path: Path) -> dict:
    """Every row of the queue's tables, read by a connection of its own."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return {t: sorted(db.execute(f"SELECT * FROM {t}").fetchall(), key=repr) for t in tables}
    finally:
        db.close()


def integrity(store: SqliteStore) -> str:
    return store.db.execute("PRAGMA integrity_check").fetchone()[0]


def sqlite_error(cls: type[sqlite3.Error], code: int | None, message: str = "whatever") -> sqlite3.Error:
    error = cls(message)
    if code is not None:
        error.sqlite_errorcode = code
        error.sqlite_errorname = f"SQLITE_{code}"
    return error


# -- the table ---------------------------------------------------------------------------------------

SQLITE_FULL, SQLITE_IOERR_WRITE, SQLITE_IOERR_SHMSIZE = 13, 10 | (3 << 8), 10 | (19 << 8)
SQLITE_READONLY, SQLITE_READONLY_DBMOVED, SQLITE_BUSY_SNAPSHOT = 8, 8 | (4 << 8), 5 | (2 << 8)


@pytest.mark.parametrize("error, domain, words", [
    (sqlite_error(sqlite3.OperationalError, SQLITE_FULL), StorageFull, "is full; free space and retry"),
    (sqlite_error(sqlite3.OperationalError, SQLITE_IOERR_SHMSIZE), StorageFull, "is full"),
    (sqlite_error(sqlite3.OperationalError, SQLITE_IOERR_WRITE), StorageUnavailable, "I/O error on"),
    (sqlite_error(sqlite3.OperationalError, SQLITE_READONLY), StorageUnavailable, "is read-only"),
    (sqlite_error(sqlite3.OperationalError, SQLITE_READONLY_DBMOVED), StorageUnavailable, "moved or deleted"),
    (sqlite_error(sqlite3.OperationalError, 5), StorageBusy, "locked by another process for more than 7 s"),
    (sqlite_error(sqlite3.OperationalError, SQLITE_BUSY_SNAPSHOT), StorageBusy, "locked by another process"),
    (sqlite_error(sqlite3.OperationalError, 6), StorageBusy, "locked by another process"),
    (sqlite_error(sqlite3.DatabaseError, 11), StorageCorrupt, "damaged or not a database"),
    (sqlite_error(sqlite3.DatabaseError, 26), StorageCorrupt, "damaged or not a database"),
    (sqlite_error(sqlite3.OperationalError, 14), StorageUnavailable, "cannot open or create"),
    (sqlite_error(sqlite3.OperationalError, 3), StorageUnavailable, "may not write"),
    # judged by the code, never by the text
    (sqlite_error(sqlite3.OperationalError, 5, "database or disk is full"), StorageBusy, "locked"),
    (sqlite_error(sqlite3.OperationalError, 1, "database is locked"), None, ""),      # an SQL error: ours
    (sqlite_error(sqlite3.IntegrityError, 2067, "disk I/O error"), None, ""),        # a constraint
    # no code: by the class
    (sqlite_error(sqlite3.OperationalError, None), StorageUnavailable, "cannot use the queue database"),
    (sqlite_error(sqlite3.DatabaseError, None), StorageCorrupt, "damaged or not a database"),
    (sqlite_error(sqlite3.IntegrityError, None), None, ""),
    (sqlite_error(sqlite3.ProgrammingError, None), None, ""),
    # OSError by errno, naming its own file
    (OSError(errno.ENOSPC, "No space left on device", "/q/logs/1.log"), StorageFull, "/q/logs/1.log is full"),
    (OSError(errno.EDQUOT, "Disk quota exceeded", "/q/x"), StorageFull, "over the disk quota"),
    (OSError(errno.EROFS, "Read-only file system", "/q/x"), StorageUnavailable, "/q/x is read-only"),
    (OSError(errno.EACCES, "Permission denied", "/q/x"), StorageUnavailable, "may not write /q/x"),
    (OSError(errno.EPERM, "Operation not permitted", "/q/x"), StorageUnavailable, "may not write /q/x"),
    (OSError(errno.ENOTDIR, "Not a directory", "/q/x"), StorageUnavailable, "is a file, not a directory"),
    (OSError(errno.EEXIST, "File exists", "/q/x"), StorageUnavailable, "is a file, not a directory"),
    (OSError(errno.EIO, "Input/output error", "/q/x"), StorageUnavailable, "I/O error on /q/x"),
    (OSError(errno.ENOSPC, "No space left on device"), StorageFull, "/q/gqa.db is full"),   # no file: the store's
    (OSError(errno.ENOENT, "No such file or directory", "/q/x"), None, ""),
    (OSError(errno.EPIPE, "Broken pipe"), None, ""),
    (ValueError("not storage"), None, ""),
])
def test_storage_faults_translate_by_code_to_one_line(error, domain, words):
    translated = storage_errors.translate(error, "/q/gqa.db", timeout=7)
    if domain is None:
        assert translated is None
        return
    assert type(translated) is domain
    message = str(translated)
    assert words in message and "\n" not in message
    assert "/q/" in message                     # it names the path


def test_a_domain_error_passes_through_unchanged():
    error = Conflict("changed")
    assert storage_errors.translate(error, "/q/gqa.db") is error


def test_a_permission_fault_names_the_user():
    message = str(storage_errors.translate(OSError(errno.EACCES, "Permission denied", "/q/x"), "/q/gqa.db"))
    assert f"user {storage_errors._user()} may not write /q/x" in message


@pytest.mark.parametrize("raw, seconds", [("", 30.0), (None, 30.0), ("1", 1.0), (" 0.5 ", 0.5), ("0", 0.0)])
def test_the_lock_timeout_comes_from_the_environment(raw, seconds):
    env = {} if raw is None else {"GQA_LOCK_TIMEOUT": raw}
    assert lock_timeout_from_env(env) == seconds


@pytest.mark.parametrize("raw", ["soon", "-1", "nan", "1e9"])
def test_a_bad_lock_timeout_is_a_spec_error_naming_the_variable(raw):
    with pytest.raises(SpecError, match="GQA_LOCK_TIMEOUT"):
        lock_timeout_from_env({"GQA_LOCK_TIMEOUT": raw})


# -- disk full ---------------------------------------------------------------------------------------

@pytest.fixture
def small_disk(tmp_path):
    """A 3 MiB tmpfs as the queue's home (root only; unmounted on teardown)."""
    if not ROOT:
        pytest.skip("mounting a tmpfs needs root; test_sqlite_full_* covers this without it")
    home = tmp_path / "small"
    home.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(home)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield home
    finally:
        subprocess.run(["umount", "-l", str(home)], check=True)


def fill(directory: Path) -> Path:
    """Write a filler file until the filesystem refuses: ENOSPC."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    return filler


def check_full_then_freed(store: SqliteStore, path: Path, free) -> None:
    """create and apply fail with StorageFull and change nothing; after `free()` both succeed."""
    job = store.get("1")
    before = snapshot(path)
    with pytest.raises(StorageFull) as raised:
        store.create(fresh(300, name="x" * 200))
    message = str(raised.value)
    assert message.startswith(f"the disk holding {path} is full") and "nothing was changed" in message
    with pytest.raises(StorageFull):
        store.apply([Change(job.id, JobState.QUEUED, JobState.CANCELLED, "y" * 400_000, 2.0)])
    assert not store.db.in_transaction
    assert snapshot(path) == before and integrity(store) == "ok"
    other = SqliteStore(path)        # another process's view: the same rows
    assert [j.id for j in other.list()] == ["1"]
    other.close()

    free()
    created = store.create(fresh(300, name="x" * 200))
    assert [j.id for j in created][:2] == ["2", "3"]          # the counter did not move while full
    [cancelled] = store.apply([Change(job.id, JobState.QUEUED, JobState.CANCELLED, "cancelled", 2.0)])
    assert cancelled.state is JobState.CANCELLED and integrity(store) == "ok"


def test_a_full_disk_changes_nothing_and_the_same_write_succeeds_once_freed(small_disk):
    path = small_disk / "gqa.db"
    store = SqliteStore(path)        # held open through the fault, as the daemon holds it
    try:
        store.create(fresh())
        filler = fill(small_disk)
        check_full_then_freed(store, path, filler.unlink)
    finally:
        store.close()


def test_sqlite_full_changes_nothing_and_the_same_write_succeeds_once_raised(tmp_path):
    """Without root: SQLite's own SQLITE_FULL, from a page cap on the connection."""
    path = tmp_path / "gqa.db"
    store = SqliteStore(path)
    try:
        store.create(fresh())
        pages = store.db.execute("PRAGMA page_count").fetchone()[0]
        store.db.execute(f"PRAGMA max_page_count = {pages}")
        check_full_then_freed(store, path, lambda: store.db.execute("PRAGMA max_page_count = 1000000"))
    finally:
        store.close()


def test_opening_on_a_full_disk_says_so(small_disk):
    path = small_disk / "gqa.db"
    SqliteStore(path).close()
    fill(small_disk)
    with pytest.raises(StorageFull, match=f"the disk holding {small_disk}"):
        SqliteStore(path)


def test_a_failed_commit_is_rolled_back_and_the_connection_stays_usable(tmp_path, monkeypatch):
    path = tmp_path / "gqa.db"
    store = SqliteStore(path)
    store.create(fresh())
    before = snapshot(path)
    execute = store.db.execute
    failing = {"COMMIT", "ROLLBACK"}      # the rollback after it fails too: its error is ignored

    def commit_fails(sql, parameters=()):
        if sql in failing:
            failing.discard(sql)
            raise StorageFull("the disk holding it is full")
        return execute(sql, parameters)

    monkeypatch.setattr(store.db, "execute", commit_fails)
    with pytest.raises(StorageFull):
        store.create(fresh(3))
    assert store.db.in_transaction      # the rollback failed: the transaction is still open...
    assert [j.id for j in store.create(fresh())] == ["2"]   # ...and the next write ends it first
    assert not store.db.in_transaction
    after = snapshot(path)
    assert len(after["jobs"]) == len(before["jobs"]) + 1
    store.close()


def test_an_error_inside_a_transaction_leaves_nothing_half_written(tmp_path):
    path = tmp_path / "gqa.db"
    store = SqliteStore(path)
    [job] = store.create(fresh())
    before = snapshot(path)
    with pytest.raises(NotFound):   # the first change is applied, the second fails: neither stays
        store.apply([Change(job.id, JobState.QUEUED, JobState.HELD, "held", 2.0),
                     Change("404", JobState.QUEUED, JobState.HELD, "held", 2.0)])
    assert snapshot(path) == before and not store.db.in_transaction
    store.close()


# -- read-only ---------------------------------------------------------------------------------------

@pytest.fixture
def read_only(tmp_path):
    """Makes a directory read-only: a read-only bind mount as root (root ignores modes), else chmod 0500."""
    made: list[tuple[Path, int | None]] = []

    def make(directory: Path) -> None:
        if ROOT:
            subprocess.run(f"mount --bind {directory} {directory} && mount -o remount,bind,ro {directory}",
                           shell=True, check=True, capture_output=True)
            made.append((directory, None))
        else:
            made.append((directory, directory.stat().st_mode))
            for f in directory.iterdir():
                f.chmod(0o400)
            directory.chmod(0o500)

    yield make
    for directory, mode in reversed(made):
        if mode is None:
            subprocess.run(["umount", "-l", str(directory)], check=True)
        else:
            directory.chmod(mode)
            for f in directory.iterdir():
                f.chmod(0o600)


def test_a_read_only_home_is_one_line_and_changes_nothing(tmp_path, read_only):
    home = tmp_path / "home"
    home.mkdir()
    path = home / "gqa.db"
    store = SqliteStore(path)
    store.create(fresh())
    store.close()
    before = snapshot(path)
    read_only(home)
    with pytest.raises(StorageUnavailable) as raised:
        SqliteStore(path).create(fresh())
    message = str(raised.value)
    assert str(path) in message and "\n" not in message
    assert ("is read-only" in message) if ROOT else ("may not write" in message)
    assert snapshot(path) == before


def test_a_read_only_file_under_an_open_reader_refuses_writes(tmp_path, read_only):
    """The database opens (its -wal and -shm exist), but a write is SQLITE_READONLY."""
    if not ROOT:
        pytest.skip("needs a read-only mount; without root the home cannot be opened at all (above)")
    home = tmp_path / "home"
    home.mkdir()
    path = home / "gqa.db"
    holder = SqliteStore(path)     # keeps -wal and -shm in place
    holder.create(fresh())
    read_only(home)
    store = SqliteStore(path)
    try:
        assert [j.id for j in store.list()] == ["1"]
        with pytest.raises(StorageUnavailable, match=f"{path} is read-only"):
            store.create(fresh())
        assert [j.id for j in store.list()] == ["1"]
    finally:
        store.close()
        holder.close()


# -- a lock held past the timeout ----------------------------------------------------------------------

def test_a_lock_held_past_the_timeout_fails_in_about_that_long(tmp_path, monkeypatch):
    monkeypatch.setenv("GQA_LOCK_TIMEOUT", "1")
    path = tmp_path / "gqa.db"
    store = SqliteStore(path)
    [job] = store.create(fresh())
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        started = time.monotonic()
        with pytest.raises(StorageBusy) as raised:
            store.apply([Change(job.id, JobState.QUEUED, JobState.HELD, "held", 2.0)])
        waited = time.monotonic() - started
        assert 0.9 <= waited < 5
        assert str(raised.value) == (f"the queue database {path} is locked by another process for more than 1 s; "
                                     "retry, or check `gqa local status`")
        assert store.get(job.id).state is JobState.QUEUED     # reads are not blocked
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert store.apply([Change(job.id, JobState.QUEUED, JobState.HELD, "held", 2.0)])[0].state is JobState.HELD
    store.close()


# -- identity ------------------------------------------------------------------------------------------

def queue_id(path: Path) -> str:
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT value FROM meta WHERE key = 'queue_id'").fetchone()[0]
    finally:
        db.close()


def new_queue(home: Path, jobs: int = 2) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "gqa.db"
    store = SqliteStore(path)
    store.create(fresh(jobs))
    store.close()
    return path


def test_a_fresh_home_is_a_new_queue_with_its_id_in_the_database_and_the_marker(tmp_path):
    path = new_queue(tmp_path / "home")
    marker = (tmp_path / "home" / "queue-id").read_text().strip()
    assert len(marker) == 16 and marker == queue_id(path)
    assert sorted(p.name for p in path.parent.iterdir() if p.name.startswith(".")) == []   # no temp file left
    again = SqliteStore(path)        # reopened: the same queue, the ids go on
    assert [j.id for j in again.create(fresh())] == ["3"]
    again.close()
    assert queue_id(path) == marker == (tmp_path / "home" / "queue-id").read_text().strip()


def test_every_queue_draws_its_own_id(tmp_path):
    assert queue_id(new_queue(tmp_path / "a")) != queue_id(new_queue(tmp_path / "b"))


def test_processes_creating_one_queue_at_once_agree_on_its_id(tmp_path):
    path = tmp_path / "gqa.db"
    barrier, ids, errors = threading.Barrier(6), [], []

    def open_one():
        barrier.wait()
        try:
            store = SqliteStore(path)
            ids.append(store._meta("queue_id"))
            store.close()
        except Exception as exc:   # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(set(ids)) == 1
    assert marker_for(path).read_text().strip() == ids[0]


def assert_refused(path: Path, error: type, *words: str) -> None:
    before = path.read_bytes() if path.exists() else None
    with pytest.raises(error) as raised:
        SqliteStore(path)
    message = str(raised.value)
    assert "\n" not in message and str(path) in message
    for word in words:
        assert word in message
    assert (path.read_bytes() if path.exists() else None) == before     # refused without writing


def test_an_emptied_database_of_a_known_queue_is_refused(tmp_path):
    path = new_queue(tmp_path / "home")
    marker = queue_id(path)
    for side in ("gqa.db-wal", "gqa.db-shm"):
        (path.parent / side).unlink(missing_ok=True)
    path.write_bytes(b"")
    assert_refused(path, QueueMismatch, f"{path} is empty", f"(id {marker})", "restore it from a backup",
                   f"move {path.parent} aside to start a new queue")


def test_a_missing_database_of_a_known_queue_is_refused_and_not_recreated(tmp_path):
    path = new_queue(tmp_path / "home")
    path.unlink()
    assert_refused(path, QueueMismatch, "is missing", "restore it from a backup")
    assert not path.exists()


def test_another_queues_database_is_refused(tmp_path):
    path = new_queue(tmp_path / "home")
    other = new_queue(tmp_path / "other")
    ours, theirs = queue_id(path), queue_id(other)
    shutil.copy(other, path)
    assert_refused(path, QueueMismatch, f"another queue (id {theirs})", f"this one (id {ours})")


def test_a_database_without_an_id_where_the_marker_says_one_is_refused(tmp_path):
    path = new_queue(tmp_path / "home")
    db = sqlite3.connect(path)
    db.execute("DELETE FROM meta WHERE key = 'queue_id'")
    db.commit()
    db.close()
    assert_refused(path, QueueMismatch, "has no queue id", f"delete {path.parent / 'queue-id'} to adopt it")


def test_a_database_that_lost_its_group_counter_is_damaged_in_one_line_and_left_as_it_was(tmp_path):
    path = new_queue(tmp_path / "home")
    db = sqlite3.connect(path)
    db.execute("DELETE FROM meta WHERE key = 'next_group'")
    db.commit()
    db.close()
    before = snapshot(path)
    store = SqliteStore(path)
    try:
        for use in (lambda: store.create(fresh()), lambda: store.reserved("1")):
            with pytest.raises(StorageCorrupt) as raised:
                use()
            message = str(raised.value)
            assert "\n" not in message and str(path) in message and "next_group" in message
            assert "restore it from a backup" in message
    finally:
        store.close()
    assert snapshot(path) == before


def test_a_foreign_sqlite_database_is_refused(tmp_path):
    path = tmp_path / "gqa.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE notes (text TEXT)")
    db.commit()
    db.close()
    assert_refused(path, StorageCorrupt, "not a gqa queue")
    assert not marker_for(path).exists()


def test_a_file_that_is_not_a_database_is_refused(tmp_path):
    path = tmp_path / "gqa.db"
    path.write_bytes(b"these are not the jobs you are looking for" * 100)
    assert_refused(path, StorageCorrupt, "damaged or not a database", "SQLITE_NOTADB")


@pytest.mark.parametrize("leftover", ["logs/1.log", "checkpoints/1/latest", "exits/1.1"])
@pytest.mark.parametrize("database", [None, b""])
def test_a_lost_queues_logs_or_checkpoints_without_marker_or_database_are_refused(tmp_path, leftover, database):
    home = tmp_path / "home"
    (home / leftover).parent.mkdir(parents=True)
    (home / leftover).write_text("old job")
    path = home / "gqa.db"
    if database is not None:
        path.write_bytes(database)
    assert_refused(path, QueueMismatch, str(home / leftover.split("/")[0]), "would reuse their job ids")
    assert not marker_for(path).exists()


def test_empty_state_directories_are_no_leftovers(tmp_path):
    paths = StatePaths(tmp_path / "home")
    paths.ensure()
    assert paths.leftovers() == []
    store = SqliteStore(paths.db)
    assert store._meta("queue_id") == paths.queue_id.read_text().strip()
    store.close()


def test_a_database_from_before_queue_ids_is_adopted(tmp_path):
    path = new_queue(tmp_path / "home", jobs=3)
    marker_for(path).unlink()
    db = sqlite3.connect(path)       # as the previous release left it
    db.execute("DELETE FROM meta WHERE key = 'queue_id'")
    db.commit()
    db.close()
    (path.parent / "logs").mkdir()
    (path.parent / "logs" / "1.log").write_text("its own job's log")
    store = SqliteStore(path)
    adopted = store._meta("queue_id")
    assert adopted and marker_for(path).read_text().strip() == adopted
    assert [j.id for j in store.create(fresh())] == ["4"]      # its counters go on
    store.close()


def test_a_lost_marker_is_written_again_from_the_database(tmp_path):
    path = new_queue(tmp_path / "home")
    marker = marker_for(path)
    expected = marker.read_text().strip()
    for damage in (marker.unlink, lambda: marker.write_text("half-writ")):
        damage()
        SqliteStore(path).close()
        assert marker.read_text().strip() == expected == queue_id(path)


def test_databases_sharing_a_directory_have_markers_of_their_own(tmp_path):
    a, b = SqliteStore(tmp_path / "a.db"), SqliteStore(tmp_path / "b.db")
    assert a._meta("queue_id") != b._meta("queue_id")
    assert marker_for(tmp_path / "a.db") == tmp_path / "a.db.queue-id"
    assert StatePaths(tmp_path).queue_id == tmp_path / "queue-id"
    a.close()
    b.close()


# -- the home and the daemon's lock ----------------------------------------------------------------------

def test_a_home_under_a_file_is_one_line_naming_it(tmp_path):
    (tmp_path / "file").write_text("")
    paths = StatePaths(tmp_path / "file" / "home")
    with pytest.raises(StorageUnavailable, match=f"cannot create {paths.home}: .* is a file, not a directory"):
        paths.ensure()
    with pytest.raises(StorageUnavailable):
        daemon_running(paths)


def test_an_uncreatable_home_names_the_path_and_the_reason(tmp_path, read_only):
    parent = tmp_path / "parent"
    parent.mkdir()
    read_only(parent)
    paths = StatePaths(parent / "home")
    with pytest.raises(StorageUnavailable) as raised:
        paths.ensure()
    message = str(raised.value)
    assert str(paths.home) in message
    assert ("is read-only" in message) if ROOT else (f"user {storage_errors._user()} may not write" in message)


def test_the_daemon_lock_in_a_read_only_home_is_one_line(tmp_path, read_only):
    paths = StatePaths(tmp_path / "home")
    paths.ensure()
    read_only(paths.home)
    with pytest.raises(StorageUnavailable, match=str(paths.pidfile)):
        acquire_lock(paths)
    assert daemon_running(paths) is None
