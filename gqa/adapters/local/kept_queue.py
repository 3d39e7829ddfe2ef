"""The queue listing the daemon keeps in a personal queue's home, as slurmctld
keeps what squeue reads: written whole after the passes that changed the
queue (a temporary file, fsync, rename: a reader finds the old listing or the
new one, never a half), private to the home's owner like the rest of it, and
stamped with the store revision it was computed from.

A reader takes it only while it is current: same queue, same revision
(`sqlite_db.read_revision`: one lookup). A missing, damaged, foreign or stale
file is None, and the caller computes the queue itself: slower, never wrong.
Only the standard library is imported here, so the CLI's fast path stays light."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from .paths import StatePaths

_STAMP = "SELECT key, value FROM meta WHERE key IN ('revision', 'queue_id')"


def stamp_of(db: Path) -> tuple[str, int] | None:
    """(queue id, revision) read from the database without opening it for
    writing; None where it cannot be read (missing, locked, not a queue).
    A missing or empty file is never opened: a reader of a database in WAL
    mode creates its -wal file, and a spoiled home must be left as it is."""
    try:
        if os.stat(db).st_size == 0:
            return None
    except OSError:
        return None
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1.0)
    except sqlite3.Error:
        return None
    try:
        rows = dict(con.execute(_STAMP).fetchall())
    except sqlite3.Error:
        return None
    finally:
        con.close()
    if "queue_id" not in rows:
        return None
    return str(rows["queue_id"]), int(rows.get("revision") or 0)


def read_current(paths: StatePaths, current: Any) -> dict[str, Any] | None:
    """The kept listing if `current(document, queue_id=, revision=, now=)` says it
    is current for the database and the time as they are now; else None."""
    try:
        with open(paths.queue_view, "rb") as f:
            document = json.loads(f.read())
    except (OSError, ValueError):
        return None
    stamp = stamp_of(paths.db)
    if stamp is None:
        return None
    queue_id, revision = stamp
    return document if current(document, queue_id=queue_id, revision=revision, now=time.time()) else None


def write(paths: StatePaths, document: dict[str, Any]) -> None:
    """Replace the kept listing atomically: written to a private temporary
    file, flushed to disk, then renamed over the old one."""
    target = paths.queue_view
    # one writer, the home's daemon (it holds the home's lock): one temporary name, so a crash leaves one at most
    tmp = target.with_name(f".{target.name}.tmp")
    data = json.dumps(document, separators=(",", ":")).encode()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise

