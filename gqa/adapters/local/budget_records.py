"""BudgetRecords on SQLite: alert claims and live spend, in the queue's
database file (tables of their own, created on first use).

A claim is one IMMEDIATE transaction (read, then insert or take over an
expired claim), so two ticks on two connections cannot both win it."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ...models.errors import BackendUnavailable
from ...ports import LiveSpend
from .sqlite_db import in_parts

SCHEMA = """
CREATE TABLE IF NOT EXISTS alert_claims (
    key TEXT PRIMARY KEY, token TEXT NOT NULL, sent INTEGER NOT NULL DEFAULT 0,
    claimed_at REAL NOT NULL, lease_until REAL NOT NULL, sent_at REAL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS live_spend (
    period TEXT NOT NULL, team TEXT NOT NULL, settled REAL NOT NULL, running REAL NOT NULL, as_of REAL NOT NULL,
    PRIMARY KEY (period, team)
) WITHOUT ROWID;
"""


class SqliteBudgetRecords:
    def __init__(self, path: Path | str):
        self.path = str(path)
        try:
            self.db = sqlite3.connect(self.path, isolation_level=None, timeout=30.0, check_same_thread=False)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA busy_timeout=30000")
            self.db.executescript(SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise BackendUnavailable(f"cannot open the queue database {self.path}: {exc}") from None

    def close(self) -> None:
        self.db.close()

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def sent(self, keys: Iterable[str], now: float) -> set[str]:
        wanted = list(dict.fromkeys(keys))
        out: set[str] = set()
        for chunk, marks in in_parts(wanted):
            rows = self.db.execute(f"SELECT key, sent, lease_until FROM alert_claims WHERE key IN ({marks})", chunk)
            out.update(k for k, sent, until in rows if sent or until >= now)
        return out

    def claim(self, key: str, at: float, lease: float) -> str | None:
        token = uuid.uuid4().hex
        with self._transaction():
            row = self.db.execute("SELECT sent, lease_until FROM alert_claims WHERE key = ?", (key,)).fetchone()
            if row is not None and (row[0] or row[1] >= at):
                return None
            self.db.execute("INSERT INTO alert_claims (key, token, claimed_at, lease_until) VALUES (?, ?, ?, ?) "
                            "ON CONFLICT(key) DO UPDATE SET token = excluded.token, claimed_at = excluded.claimed_at, "
                            "lease_until = excluded.lease_until", (key, token, at, at + lease))
        return token

    def confirm(self, key: str, token: str, at: float) -> None:
        self.db.execute("UPDATE alert_claims SET sent = 1, sent_at = ? WHERE key = ? AND token = ?", (at, key, token))

    def release(self, key: str, token: str) -> None:
        self.db.execute("DELETE FROM alert_claims WHERE key = ? AND token = ? AND sent = 0", (key, token))

    def record_spend(self, period: str, spend: list[LiveSpend]) -> None:
        with self._transaction():   # one transaction: a reader sees all teams of a tick or none
            self.db.executemany(
                "INSERT INTO live_spend VALUES (?, ?, ?, ?, ?) ON CONFLICT(period, team) DO UPDATE SET "
                "settled = excluded.settled, running = excluded.running, as_of = excluded.as_of "
                "WHERE excluded.as_of >= live_spend.as_of",
                [(period, s.team, s.settled, s.running, s.as_of) for s in spend])

    def live_spend(self, period: str) -> dict[str, LiveSpend]:
        rows = self.db.execute("SELECT team, settled, running, as_of FROM live_spend WHERE period = ?", (period,))
        return {team: LiveSpend(team, settled, running, as_of) for team, settled, running, as_of in rows}
