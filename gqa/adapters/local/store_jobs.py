"""The local store's job records: ids and seqs reserved from meta's counters,
submissions created, jobs read, and what the control loop reads each turn."""

from __future__ import annotations

import contextlib
import re
import sqlite3
from collections.abc import Iterable, Iterator
from typing import TypeVar

from ...models.errors import Conflict, NotFound, QueueMismatch, StorageCorrupt
from ...models.job import PENDING, JobRecord, JobState, Transition
from ...models.records import with_changes
from ...ports.store import JobEvent, PendingChanges, QueueListing
from ...scheduling.dependencies import delay_anchor
from ...scheduling.snapshot import PendingJob, RunningJob
from .live_view import LiveView, read_whole
from .sqlite_db import in_parts
from .sqlite_rows import _INSERT, _SELECT, INSERT_TEXT, SharedTexts, _record, _records_of_group, _row
from .sqlite_schema import SCHEMA_VERSION
from .store_settings import SqliteSettings

_GROUP = re.compile(r"[1-9][0-9]*")   # a group id as _reserve makes one
LISTED = PENDING | {JobState.STARTING, JobState.RUNNING}   # the jobs a listing of the queue shows
# `list` is also a method of the store: annotations below it name the builtin this way
List = list
T = TypeVar("T")


class SqliteJobs(SqliteSettings):
    """Job records and the control loop's reads; their guarded changes are store_changes.py's."""

    live_view: LiveView | None = None   # the scheduling view, once read

    def reserve_ids(self, jobs: list[JobRecord]) -> list[JobRecord]:
        with self._tx():
            return self._reserve(jobs)

    def reserved(self, group: str) -> bool:
        return _GROUP.fullmatch(group) is not None and int(group) < self._next_group()

    def purged(self, group: str) -> float | None:
        # at or below the last group the retention deleted from (prune_history), a group handed out
        # with no job left is gone: one accepted (a trigger's) and never recorded that long is lost too
        if (not self.reserved(group) or int(group) > int(self._meta("pruned_group") or 0)
                or self.db.execute("SELECT 1 FROM jobs WHERE grp = ? LIMIT 1", (group,)).fetchone()):
            return None
        return float(self._meta("history_kept") or 0.0)

    def _next_group(self) -> int:
        """The number the next reservation starts at; every queue database holds it from its creation."""
        raw = self._meta("next_group")
        if raw is None:
            raise StorageCorrupt(f"{self.path} is damaged (its meta table lost the next_group counter); "
                                 "restore it from a backup, or move GQA_HOME aside to start a new queue")
        return int(raw)

    def _reserve(self, jobs: list[JobRecord]) -> list[JobRecord]:
        """Assign ids and seqs from the counters in meta and advance them (inside a transaction)."""
        if not jobs:
            return []
        group_no = self._next_group()
        seq = self._next_seq()
        reserved, groups = [], 0
        shared = str(group_no)
        for job in jobs:
            if job.array_index is not None:
                job_id, group = f"{shared}_{job.array_index}", shared
                groups = 1
            else:
                job_id = group = str(group_no + groups)
                groups += 1
            reserved.append(with_changes(job, id=job_id, group=group, seq=seq))
            seq += 1
        self.db.execute("UPDATE meta SET value = ? WHERE key = 'next_group'", (str(group_no + max(groups, 1)),))
        self.db.execute("INSERT INTO meta VALUES ('next_seq', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                        (str(seq),))
        return reserved

    def _next_seq(self) -> int:
        # a database from before reservations has no counter: the next seq follows the jobs
        raw = self._meta("next_seq")
        if raw is not None:
            return int(raw)
        return (self.db.execute("SELECT MAX(seq) FROM jobs").fetchone()[0] or 0) + 1

    def create(self, jobs: list[JobRecord]) -> list[JobRecord]:
        with self._tx():
            records = list(jobs)
            fresh = [i for i, j in enumerate(records) if not j.id]
            for i, job in zip(fresh, self._reserve([records[i] for i in fresh])):
                records[i] = job
            found = {r[0] for r in self._rows_of([j.id for j in records], "id")}
            if found & {records[i].id for i in fresh}:
                raise Conflict("a freshly reserved job id already exists: was the queue database's counter reset?")
            new = [j for j in records if j.id not in found]
            try:
                stamp = self._stamp()
                shared = SharedTexts()     # the records it saw stay alive in `new` meanwhile
                rows = [(*_row(j, shared), stamp) for j in new]
                self.db.executemany(INSERT_TEXT, shared.bodies.items())
                self.db.executemany(_INSERT, rows)
            except sqlite3.IntegrityError as exc:   # a reserved seq taken by another job
                raise Conflict(f"cannot record jobs {', '.join(j.id for j in new)}: {exc}") from None
            self.db.executemany("INSERT INTO history VALUES (?, ?, ?, ?, ?)",
                                [(j.id, n, t.state.value, t.at, t.reason)
                                 for j in new for n, t in enumerate(j.history)])
            # a job that already existed is returned as it is stored, not as given
            stored = {j.id: j for j in self._with_history([_record(r) for r in self._rows_of(list(found))])}
        return [stored.get(j.id, j) for j in records]

    def _rows_of(self, ids: list[str], columns: str | None = None) -> list[tuple]:
        """The rows of these job ids, a query per part (_parts)."""
        select = f"SELECT {columns} FROM jobs" if columns else _SELECT
        rows: list[tuple] = []
        for part, marks in in_parts(ids):
            rows += self.db.execute(select + f" WHERE id IN ({marks})", part).fetchall()
        return rows

    def get(self, job_id: str) -> JobRecord:
        row = self.db.execute(_SELECT + " WHERE id = ?", (job_id,)).fetchone()
        if row is None:
            raise NotFound(f"no job {job_id}")
        return self._with_history([_record(row)])[0]

    def resolve(self, ref: str, *, history: bool = True) -> list[JobRecord]:
        rows = self.db.execute(_SELECT + " WHERE id = ? OR grp = ? ORDER BY seq", (ref, ref)).fetchall()
        if not rows:
            raise NotFound(f"no job or array {ref}")
        # one query for the whole group, its tasks' environment decoded once: an array of 100,000 tasks
        # reads in about a second, and its transitions in two more
        records = _records_of_group(rows)
        return self._with_history(records) if history else records

    def list(self, states: Iterable[JobState] | None = None, *, team: str | None = None,
             limit: int | None = None, history: bool = False) -> list[JobRecord]:
        where, params = [], []
        if states is not None:
            states = list(states)
            where.append(f"state IN ({', '.join('?' for _ in states)})")
            params += [s.value for s in states]
        if team is not None:
            where.append("team = ?")
            params.append(team)
        sql = _SELECT + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY seq"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        jobs = [_record(r) for r in self.db.execute(sql, params)]
        return self._with_history(jobs) if history else jobs

    def state_counts(self) -> dict[JobState, int]:
        return {JobState(s): n for s, n in self.db.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state")}

    def _with_history(self, jobs: List[JobRecord]) -> List[JobRecord]:
        """The jobs with their transitions, read 500 jobs to a query by the history table's primary
        key (a query a job made `gqa status` of a 100,000-task array 100,000 queries)."""
        found: dict[str, List[Transition]] = {}
        ids = [j.id for j in jobs]
        states = {s.value: s for s in JobState}
        for part, marks in in_parts(ids):
            for job_id, state, at, reason in self.db.execute(
                    f"SELECT job_id, state, at, reason FROM history WHERE job_id IN ({marks}) "
                    "ORDER BY job_id, n", part):
                found.setdefault(job_id, []).append(Transition(states[state], at, reason))
        return [with_changes(j, history=tuple(found.get(j.id, ()))) for j in jobs]

    def recent_events(self, *, since: float, limit: int) -> List[JobEvent]:
        # history_by_time: the newest transitions first, however long the queue's past
        rows = self.db.execute(
            "SELECT h.job_id, j.name, h.state, h.at, h.reason FROM history h JOIN jobs j ON j.id = h.job_id "
            "WHERE h.at >= ? ORDER BY h.at DESC, h.n DESC LIMIT ?", (since, max(0, int(limit)))).fetchall()
        return [JobEvent(job_id, name, JobState(state), at, reason) for job_id, name, state, at, reason in rows]

    def with_requests(self) -> List[JobRecord]:
        rows = self.db.execute(_SELECT + " WHERE request IS NOT NULL AND kill_reason IS NULL "
                               "AND state IN ('STARTING', 'RUNNING') ORDER BY seq").fetchall()
        return [_record(r) for r in rows]

    def scheduling_view(self) -> tuple[List[PendingJob], List[RunningJob]]:
        """Kept by this store object between reads: only the rows changed since are read (live_view.py)."""
        if self.live_view is None:
            self.live_view = LiveView()
        return self._still_readable(self.live_view.read(self.db))

    def scheduling_feed(self, mark: object | None) -> tuple[List[PendingJob], List[RunningJob], object,
                                                             PendingChanges | None]:
        """scheduling_view() with the pending jobs' changes since `mark` (ports.PendingFeed)."""
        if self.live_view is None:
            self.live_view = LiveView()
        return self._still_readable(self.live_view.feed(self.db, mark))

    def queue_listing(self) -> QueueListing:
        """In one read transaction: the scheduling columns read whole into records of their own (the
        view kept between reads is the passes', live_view.py) and the same jobs' rows."""
        pending: dict[str, PendingJob] = {}
        running: dict[str, RunningJob] = {}
        with _one_state(self.db):
            read_whole(self.db, pending, running)
            records = self.list(LISTED)
            timed = {j.id: j for j in self._with_history([j for j in records if j.state == JobState.STARTING])}
        return QueueListing(list(pending.values()), list(running.values()), [timed.get(j.id, j) for j in records])

    def _still_readable(self, read: T) -> T:
        """`read`, unless a newer gqa brought the database to a schema this one cannot read since
        it was opened (a long-lived reader, the daemon, meets that after an upgrade): then
        QueueMismatch, which stops the daemon and leaves its jobs to the new version's."""
        schema = self.live_view.schema if self.live_view is not None else None
        if schema is not None and schema > SCHEMA_VERSION:
            raise QueueMismatch(f"{self.path} was brought to schema {schema} by a newer gqa; this one reads "
                                f"schema {SCHEMA_VERSION}: start the new version (gqa local start)")
        return read

    def states_of(self, refs: Iterable[str]) -> dict[str, dict[JobState, int]]:
        refs = list(dict.fromkeys(refs))
        out: dict[str, dict[JobState, int]] = {}
        for part, marks in in_parts(refs):
            # a job or task by its id; an array by its group: its tasks (a single job's group is its id)
            rows = self.db.execute(
                f"SELECT id, state, 1 FROM jobs WHERE id IN ({marks}) UNION ALL SELECT grp, state, COUNT(*) "
                f"FROM jobs WHERE grp IN ({marks}) AND array_index IS NOT NULL GROUP BY grp, state",
                part * 2).fetchall()
            for ref, state, count in rows:
                counts = out.setdefault(ref, {})
                counts[JobState(state)] = counts.get(JobState(state), 0) + count
        for ref in refs:
            # recorded once and deleted since by the retention (purged; a task of an array partly
            # deleted too): its job had ended
            group = ref.partition("_")[0]
            if ref not in out and self.reserved(group) and int(group) <= int(self._meta("pruned_group") or 0):
                out[ref] = {}
        return out

    def start_times(self, refs: Iterable[str]) -> dict[str, tuple[float, bool]]:
        refs = list(dict.fromkeys(refs))
        found: dict[str, list[tuple[float | None, float | None, str]]] = {}
        for part, marks in in_parts(refs):
            rows = self.db.execute(
                f"SELECT id, started_at, ended_at, state FROM jobs WHERE id IN ({marks}) UNION ALL "
                f"SELECT grp, started_at, ended_at, state FROM jobs WHERE grp IN ({marks}) "
                "AND array_index IS NOT NULL", part * 2).fetchall()
            for ref, started_at, ended_at, state in rows:
                found.setdefault(ref, []).append((started_at, ended_at, state))
        return {ref: anchor for ref, jobs in found.items() if (anchor := delay_anchor(jobs)) is not None}

    def runtime_samples(self, limit: int = 500) -> List[tuple[str, float, float]]:
        rows = self.db.execute(
            "SELECT team, ended_at - started_at, wall_time FROM jobs WHERE state = 'SUCCEEDED' "
            "AND wall_time IS NOT NULL AND started_at IS NOT NULL AND ended_at IS NOT NULL "
            "ORDER BY seq DESC LIMIT ?", (limit,)).fetchall()
        return [(team, float(actual), float(limit_)) for team, actual, limit_ in rows]

    def next_wakeup(self) -> float | None:
        return self.db.execute("SELECT MIN(not_before) FROM jobs WHERE state = 'RETRY_WAIT'").fetchone()[0]

    def due_retries(self, now: float) -> List[JobRecord]:
        rows = self.db.execute(_SELECT + " WHERE state = 'RETRY_WAIT' AND (not_before IS NULL OR not_before <= ?) "
                               "ORDER BY seq", (now,)).fetchall()
        return [_record(r) for r in rows]


@contextlib.contextmanager
def _one_state(db: sqlite3.Connection) -> Iterator[None]:
    """A read transaction: in WAL mode every read in it sees the state its first read saw, however
    many commits the daemon makes meanwhile (a drain of short jobs: several a second). Inside a
    transaction already, its reads are that one's."""
    if db.in_transaction:
        yield
        return
    db.execute("BEGIN")
    try:
        yield
    finally:
        if db.in_transaction:
            db.execute("ROLLBACK")   # nothing was written: ending it is all
