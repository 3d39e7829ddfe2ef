"""The queued and running jobs as the scheduler reads them (`scheduling_view`),
kept between reads by the store object that made them.

The daemon plans a pass after every change, and read every live row at each:
with 3,000 queued, the read and the records made from it were 80% of a
pass, however little had changed. Every row carries the revision its change
committed as (sqlite_schema.TRIGGERS), so a read asks only for the rows past the
revision the previous read saw, and keeps the very record of every job that
did not change: the estimates and the index the supervisor keeps know an
unchanged job by it (services/snapshot.Estimated, scheduling/kept.py).

Why a delta is whole: the revision is read first, then the rows. A
transaction stamps its rows one past the revision it read inside its write
lock and bumps the revision as it commits, so a row committed before the
revision was read has a stamp at most that revision and is visible to the
row read after it, and one committed since has a stamp past it and is read
next time (read twice at worst, never missed). A live job deleted (never by
gqa: only finished jobs are pruned) is counted in meta, and the count moving
makes the next read a whole one, as does a revision that went back (a
database put back from a copy). A write outside a transaction stamps its
rows one past the revision and bumps nothing, so the rows past the revision
seen are asked for at every read, moved or not (one probe of an index when
none are). Inside a write transaction of its own the store reads whole and
keeps nothing: what it reads may still be rolled back."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import MISSING, fields
from typing import Any

from ...ports.store import PendingChanges
from ...scheduling.snapshot import PendingJob, RunningJob
from .sqlite_rows import _built, _indices

PENDING_STATES = ("QUEUED", "HELD")
RUNNING_STATES = ("STARTING", "RUNNING")

_PENDING_SELECT = (
    "SELECT id, team, owner, tier, gpus, submitted_at, gpu_type, cpus, memory, wall_time, grp, "
    "group_limit, seq, max_gpu_hours, state, spot, reclaims, name, dependency, user_hold, begin, nice, "
    "exclusive, time_min, gpu_seconds FROM jobs")
_PENDING_STATE = 14   # the column of the state, in each select
_RUNNING_SELECT = (
    "SELECT id, team, owner, assigned, started_at, cpus, memory, grp, COALESCE(time_limit, wall_time), tier, "
    "kill_reason, state, name, exclusive, gpu_seconds, submitted_at FROM jobs")
_RUNNING_STATE = 11
_PENDING = {f.name: f.default for f in fields(PendingJob) if f.default is not MISSING}
LOG_AT_LEAST = 4096   # the changes kept for `feed`: at least this many, else twice the pending jobs


def pending_job(r: tuple) -> PendingJob:
    return _built(PendingJob, _PENDING, dict(
        id=r[0], team=r[1], user=r[2], tier=r[3], gpus=r[4], submitted_at=r[5], gpu_type=r[6],
        cpus=r[7], memory=r[8], wall_time=r[9], group=r[10], group_limit=r[11], seq=r[12],
        max_gpu_hours=r[13], held=r[14] == "HELD", spot=bool(r[15]), reclaims=r[16],
        name=r[17], dependency=r[18], user_hold=bool(r[19]), begin=r[20], nice=r[21],
        exclusive=bool(r[22]), time_min=r[23], served=r[24] or 0.0))


def running_job(r: tuple) -> RunningJob:
    return RunningJob(id=r[0], team=r[1], user=r[2], gpus=_indices(r[3]), started_at=r[4] or 0.0, cpus=r[5],
                      memory=r[6], group=r[7], wall_time=r[8], tier=r[9], stopping=r[10] is not None,
                      started=r[11] == "RUNNING", name=r[12], exclusive=bool(r[13]), served=r[14] or 0.0,
                      submitted_at=r[15] or 0.0)


class LiveView:
    """What one store object last read of the live jobs, and the revision it read them at; and,
    since its last whole read, which pending jobs each read changed, in order (`feed`)."""

    def __init__(self) -> None:
        self._seen: tuple[int, int] | None = None   # (revision, live deletions) at the last read
        self._pending: dict[str, PendingJob] = {}
        self._running: dict[str, RunningJob] = {}
        self.whole_reads = 0   # reads of every live row, the first included: what a test reads
        # the pending jobs set (True) or dropped (False) since the whole read numbered `_era`, in the
        # order made: replayed in order on a copy of `_pending`, they give its very order
        self._era = 0
        self._log: list[tuple[str, bool]] = []
        # the schema the database is at, read with the marks: a newer gqa may have opened it since
        self.schema: int | None = None

    def read(self, db: sqlite3.Connection) -> tuple[list[PendingJob], list[RunningJob]]:
        if db.in_transaction:
            self._seen = None
            pending: dict[str, PendingJob] = {}
            running: dict[str, RunningJob] = {}
            read_whole(db, pending, running)
            return list(pending.values()), list(running.values())
        marks = dict(db.execute(
            "SELECT key, value FROM meta WHERE key IN ('revision', 'live_deleted', 'schema_version')"))
        self.schema = int(marks.get("schema_version") or 0)
        seen = (int(marks.get("revision") or 0), int(marks.get("live_deleted") or 0))
        if self._seen is None or seen[1] != self._seen[1] or seen[0] < self._seen[0]:
            self._forget()
            self._pending, self._running = {}, {}
            read_whole(db, self._pending, self._running)
            self.whole_reads += 1
        else:
            since = self._seen[0]
            _changed(db, _PENDING_SELECT, _PENDING_STATE, since, PENDING_STATES, self._pending, pending_job,
                     self._log)
            _changed(db, _RUNNING_SELECT, _RUNNING_STATE, since, RUNNING_STATES, self._running, running_job)
            if len(self._log) > max(LOG_AT_LEAST, 2 * len(self._pending)):
                self._forget()   # a reader that far behind reads whole: cheaper than the log
        self._seen = seen
        return list(self._pending.values()), list(self._running.values())

    def feed(self, db: sqlite3.Connection, mark: object | None
             ) -> tuple[list[PendingJob], list[RunningJob], object, PendingChanges | None]:
        """read(), its mark, and the pending jobs' changes since `mark`: each with its record now
        (None: no longer pending), in the order made; None where not known."""
        pending, running = self.read(db)
        if self._seen is None:   # read inside a write transaction: nothing was kept
            return pending, running, None, None
        now = (self._era, len(self._log))
        if not (isinstance(mark, tuple) and len(mark) == 2 and mark[0] == self._era and mark[1] <= now[1]):
            return pending, running, now, None
        kept = self._pending
        return pending, running, now, [(job_id, kept.get(job_id) if present else None)
                                       for job_id, present in self._log[mark[1]:]]

    def _forget(self) -> None:
        self._era += 1
        self._log = []


def read_whole(db: sqlite3.Connection, pending: dict[str, PendingJob], running: dict[str, RunningJob]) -> None:
    """Every waiting job's and every job holding GPUs' scheduling columns, into `pending`/`running`."""
    for r in db.execute(f"{_PENDING_SELECT} WHERE state IN {PENDING_STATES}"):
        pending[r[0]] = pending_job(r)
    for r in db.execute(f"{_RUNNING_SELECT} WHERE state IN {RUNNING_STATES}"):
        running[r[0]] = running_job(r)


def _changed(db: sqlite3.Connection, select: str, state_at: int, since: int, live: tuple[str, ...],
             kept: dict, make: Callable[[tuple], Any], log: list[tuple[str, bool]] | None = None) -> None:
    """The rows stamped past `since`: a live one's record made again, any other's dropped; each
    set or drop noted in `log`, where given."""
    for r in db.execute(f"{select} WHERE rev > ?", (since,)):
        if r[state_at] in live:
            kept[r[0]] = make(r)
            if log is not None:
                log.append((r[0], True))
        elif kept.pop(r[0], None) is not None and log is not None:
            log.append((r[0], False))
