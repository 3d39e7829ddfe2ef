"""The local queue's outbox of notices, in the queue's own database.

A job's notice is written by the same transaction as the move it tells of:
a trigger on the history table copies each move into a notice-worthy state
(RUNNING, an end, RETRY_WAIT) of a job that asks for notices, so whoever
writes it (the daemon, a `gqa cancel` run in-process) and however (one
guarded change or a bulk one), it is kept if and only if the move is. Its
key (job, attempt, state: models/notices.py) is unique, so a move is never
queued twice. Alerts and approval requests come through the Notifier port
(`OutboxNotifier`) under keys of their own.

The sender (notice_sender.py) marks a try before it makes it and the
delivery after: a daemon killed mid-send tries that notice once more, never
more, and a notice is dropped with a log line only after MAX_TRIES."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from ...models.job import JobRecord, JobState, Transition
from ...models.records import with_changes
from .outbox_schema import drop_stale_trigger, outbox_statements
from .sqlite_db import SqliteDatabase
from .sqlite_rows import _SELECT, _record

MAX_TRIES = 14          # 0.5 s doubling to 5 min between tries: 23.5 minutes of a receiver down
FIRST_BACKOFF, MAX_BACKOFF = 0.5, 300.0



@dataclass(frozen=True)
class Pending:
    """One notice to deliver: a job's move (job_id, state, ...) or a message given whole."""

    id: int
    key: str
    kind: str
    tries: int
    job_id: str | None = None
    state: str | None = None
    at: float = 0.0
    reason: str = ""
    attempt: int = 0
    subject: str | None = None
    message: str | None = None
    recipient: str | None = None
    team: str | None = None


class NoticeOutbox(SqliteDatabase):
    """The outbox's reads and writes, on a connection of its own (the sender's thread)."""

    def __init__(self, path: Path | str, **kwargs):
        super().__init__(path, **kwargs)
        with self._tx():
            drop_stale_trigger(self.db)
            for statement in outbox_statements():
                self.db.execute(statement)

    def put(self, key: str, kind: str, subject: str, message: str, at: float, *,
            recipient: str | None = None, team: str | None = None) -> bool:
        """A message given whole (an alert, an approval request); False if that key is already queued."""
        with self._tx():
            cursor = self.db.execute(
                "INSERT OR IGNORE INTO notices (key, at, kind, subject, message, recipient, team) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)", (key, at, kind, subject, message, recipient, team))
        return cursor.rowcount == 1

    def due(self, now: float, limit: int = 50) -> list[Pending]:
        """The notices due by `now`, by when each came due: the fresh ones (never tried) first,
        in the order written, then the retries; a notice tried again goes behind newer ones."""
        rows = self.db.execute(
            "SELECT id, key, kind, tries, job_id, state, at, reason, attempt, subject, message, recipient, team "
            "FROM notices WHERE done_at IS NULL AND next_at <= ? ORDER BY next_at, id LIMIT ?",
            (now, limit)).fetchall()
        return [Pending(*row) for row in rows]

    def defer(self, ids: list[int], until: float) -> None:
        """Leave these notices untried until `until` (their recipient just failed), their tries uncounted."""
        with self._tx():
            self.db.executemany("UPDATE notices SET next_at = MAX(next_at, ?) WHERE id = ? AND done_at IS NULL",
                                [(until, id_) for id_ in ids])

    def job(self, job_id: str) -> JobRecord | None:
        """The job as it is now (its name, owner, notify settings, exit) with its transitions,
        whose runs an end's notice adds up; None once it is gone."""
        row = self.db.execute(_SELECT + " WHERE id = ?", (job_id,)).fetchone()
        if row is None:
            return None
        steps = self.db.execute("SELECT state, at, reason FROM history WHERE job_id = ? ORDER BY n", (job_id,))
        return with_changes(_record(row), history=tuple(Transition(JobState(state), at, reason)
                                                        for state, at, reason in steps))

    def next_due(self) -> float | None:
        row = self.db.execute("SELECT MIN(next_at) FROM notices WHERE done_at IS NULL").fetchone()
        return row[0] if row else None

    def trying(self, notice: Pending, now: float) -> int:
        """Record a try before making it (committed): a crash mid-send then costs
        one more try after the backoff, never an endless resend. The tries so far."""
        tries = notice.tries + 1
        with self._tx():
            self.db.execute("UPDATE notices SET tries = ?, next_at = ? WHERE id = ?",
                            (tries, now + backoff(tries), notice.id))
        return tries

    def finished(self, notice: Pending, now: float, outcome: str, error: str | None = None) -> None:
        """Never tried again: `sent`, `skipped` (nothing asked for it, or nobody to send to) or `gave up`."""
        with self._tx():
            self.db.execute("UPDATE notices SET done_at = ?, outcome = ?, error = ? WHERE id = ?",
                            (now, outcome, error, notice.id))

    def failed(self, notice: Pending, error: str) -> None:
        with self._tx():
            self.db.execute("UPDATE notices SET error = ? WHERE id = ?", (error[:500], notice.id))

    def outcomes(self) -> dict[str, str | None]:
        """Each notice's outcome by key (None while it is still to be sent): for `gqa local status` and tests."""
        return dict(self.db.execute("SELECT key, outcome FROM notices").fetchall())


def backoff(tries: int) -> float:
    """Seconds before the next try after `tries` of them."""
    return min(MAX_BACKOFF, FIRST_BACKOFF * 2 ** max(0, tries - 1))


class OutboxNotifier:
    """The Notifier port on the local queue: an alert or an approval request is
    queued in the outbox (to the `alerts_to` recipient of the daemon's notice
    settings) and sent by the daemon's sender, so a mail server that is down
    never holds up the caller. The same subject and message on the same day
    are one notice."""

    def __init__(self, outbox: NoticeOutbox, clock, recipient: str | None = None):
        self.outbox, self.clock, self.recipient = outbox, clock, recipient

    def notify(self, subject: str, message: str, *, kind: str, team: str | None = None) -> None:
        now = self.clock.now()
        digest = hashlib.sha256(f"{kind}\0{team}\0{subject}\0{message}".encode()).hexdigest()[:16]
        self.outbox.put(f"{kind}.{int(now // 86400)}.{digest}", kind, subject, message, now,
                        recipient=self.recipient, team=team)
