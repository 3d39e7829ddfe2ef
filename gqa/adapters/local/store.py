"""JobStore on SQLite in WAL mode. Every change is one IMMEDIATE transaction
whose UPDATE is guarded on the state the caller read, so the CLI and the
daemon can write concurrently without lost updates.

The store is composed by concern, each part building on the one before:
the database (sqlite_db.py: opening, identity, schema, transactions), the
settings and usage ledger (store_settings.py), the job records and the
control loop's reads (store_jobs.py), and the guarded changes
(store_changes.py, over the algorithm both backends share); history's
reads and retention (store_history.py)."""

from __future__ import annotations

from .sqlite_db import DEFAULT_LOCK_TIMEOUT, lock_timeout_from_env
from .sqlite_schema import SCHEMA, SCHEMA_VERSION
from .store_changes import SqliteChanges
from .store_history import SqliteHistory

__all__ = ["DEFAULT_LOCK_TIMEOUT", "SCHEMA", "SCHEMA_VERSION", "SqliteStore", "lock_timeout_from_env"]


class SqliteStore(SqliteChanges, SqliteHistory):
    """The local backend's JobStore: every part of the port, on one database
    (`SqliteStore(path, durable=..., lock_timeout=...)`, see sqlite_db.SqliteDatabase)."""
