"""JobStore on SQLite in WAL mode. Every change is one IMMEDIATE transaction
whose UPDATE is guarded on the state the caller read, so the CLI and the
daemon can write concurrently without lost updates."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import sqlite3
import time
from dataclasses import fields, replace
from pathlib import Path
from typing import Iterable

from ...models.errors import (BackendUnavailable, Conflict, NotFound, QueueMismatch, SpecError, StorageBusy,
                              StorageCorrupt)
from ...models.job import JobRecord, JobState, Request, Transition, check_transition, transition
from ...ports import Change, Inventory
from ...scheduling.budget import period_of
from ...settings_codec import inventory_from, inventory_json, policy_from, policy_json
from ...scheduling.fairshare import decay, with_running
from ...scheduling.snapshot import PendingJob, Policy, RunningJob, TeamPolicy
from .paths import StatePaths, marker_for
from .storage_errors import connect, storage_errors

SCHEMA_VERSION = 3
DEFAULT_LOCK_TIMEOUT = 30.0   # seconds; GQA_LOCK_TIMEOUT overrides
_QUEUE_ID = re.compile(r"[0-9a-f]{16}")

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY, seq INTEGER NOT NULL UNIQUE, grp TEXT NOT NULL, name TEXT NOT NULL,
    team TEXT NOT NULL, owner TEXT NOT NULL, tier INTEGER NOT NULL, gpus INTEGER NOT NULL,
    gpu_type TEXT, cpus INTEGER, memory INTEGER, wall_time INTEGER, submitted_at REAL NOT NULL,
    spec_json TEXT NOT NULL, state TEXT NOT NULL, array_index INTEGER, group_limit INTEGER,
    extra_env TEXT NOT NULL DEFAULT '{}', submit_env TEXT, attempts INTEGER NOT NULL DEFAULT 0,
    error_retries INTEGER NOT NULL DEFAULT 0, interruptions INTEGER NOT NULL DEFAULT 0,
    reclaims INTEGER NOT NULL DEFAULT 0, spot INTEGER NOT NULL DEFAULT 0,
    not_before REAL, started_at REAL, ended_at REAL, assigned TEXT NOT NULL DEFAULT '',
    pid INTEGER, proc_token TEXT, exit_code INTEGER, signal INTEGER, reason TEXT NOT NULL DEFAULT '',
    request TEXT, kill_reason TEXT, gpu_seconds REAL NOT NULL DEFAULT 0, max_gpu_hours REAL,
    capacity_failures INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs(state, tier, seq);
CREATE INDEX IF NOT EXISTS jobs_by_group ON jobs(grp);
CREATE TABLE IF NOT EXISTS history (
    job_id TEXT NOT NULL, n INTEGER NOT NULL, state TEXT NOT NULL, at REAL NOT NULL, reason TEXT NOT NULL,
    PRIMARY KEY (job_id, n)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS teams (
    team TEXT PRIMARY KEY, share REAL NOT NULL, max_gpus INTEGER, max_gpus_per_user INTEGER, budget REAL,
    stop_at_budget INTEGER NOT NULL DEFAULT 0, members TEXT
);
CREATE TABLE IF NOT EXISTS usage (team TEXT PRIMARY KEY, gpu_seconds REAL NOT NULL, as_of REAL NOT NULL);
CREATE TABLE IF NOT EXISTS spend (team TEXT NOT NULL, period TEXT NOT NULL, amount REAL NOT NULL,
    PRIMARY KEY (team, period)) WITHOUT ROWID;
"""

# columns added after a table was first released: (table, column, declaration), added on open
ADDED_COLUMNS = (("teams", "stop_at_budget", "INTEGER NOT NULL DEFAULT 0"),
                 ("jobs", "capacity_failures", "INTEGER NOT NULL DEFAULT 0"),
                 ("teams", "members", "TEXT"))   # a JSON list of member patterns; NULL: none

_GROUP = re.compile(r"[1-9][0-9]*")   # a group id as _reserve makes one
_COLUMNS = [f.name for f in fields(JobRecord) if f.name != "history"]
_DB_COLUMNS = ["grp" if c == "group" else c for c in _COLUMNS]
_INSERT = f"INSERT INTO jobs ({', '.join(_DB_COLUMNS)}) VALUES ({', '.join('?' for _ in _DB_COLUMNS)})"
_UPDATE = f"UPDATE jobs SET {', '.join(f'{c} = ?' for c in _DB_COLUMNS if c != 'id')} WHERE id = ? AND state = ?"
_SELECT = f"SELECT {', '.join(_DB_COLUMNS)} FROM jobs"


class SqliteStore:
    """Opening checks that the database is this home's queue (see _check_identity)
    and every storage fault on the way in or out is a domain error (storage_errors)."""

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

    def _identity(self) -> tuple[int | None, str | None] | None:
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

    def _identity_read(self) -> tuple[int | None, str | None] | None:
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
                        queue_id = _new_queue_id()
                        for statement in SCHEMA.split(";"):
                            if statement.strip():
                                self.db.execute(statement)
                        self.db.executemany("INSERT INTO meta VALUES (?, ?)", [
                            ("schema_version", str(SCHEMA_VERSION)), ("next_group", "1"), ("queue_id", queue_id)])
                    return SCHEMA_VERSION, queue_id
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
            return
        if version > SCHEMA_VERSION:
            raise BackendUnavailable(f"{self.path} was written by a newer gqa (schema {version}); upgrade gqa")
        with self._tx():
            for statement in SCHEMA.split(";"):
                if statement.strip():
                    self.db.execute(statement)
            self._add_columns()
            self.db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))

    def _add_columns(self) -> None:
        """Bring a database written by an older gqa up to date: its rows keep their values."""
        for table, column, declaration in ADDED_COLUMNS:
            present = {r[1] for r in self.db.execute(f"PRAGMA table_info({table})")}
            if column not in present:
                self.db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")

    def _tx(self):
        return _Transaction(self.db)

    # -- settings -------------------------------------------------------------------
    def _meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def _set_meta(self, key: str, value: str) -> None:
        with self._tx():
            self.db.execute("INSERT INTO meta VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                            (key, value))

    def inventory(self) -> Inventory | None:
        raw = self._meta("inventory")
        if raw is None:
            return None
        return inventory_from(raw)

    def set_inventory(self, inventory: Inventory) -> None:
        self._set_meta("inventory", inventory_json(inventory))

    def policy(self) -> Policy:
        raw = self._meta("policy")
        if raw is None:
            return Policy()
        return policy_from(raw)

    def set_policy(self, policy: Policy) -> None:
        self._set_meta("policy", policy_json(policy))

    def teams(self) -> dict[str, TeamPolicy]:
        rows = self.db.execute("SELECT team, share, max_gpus, max_gpus_per_user, budget, stop_at_budget "
                               "FROM teams").fetchall()
        return {r[0]: TeamPolicy(share=r[1], max_gpus=r[2], max_gpus_per_user=r[3], budget=r[4],
                                 stop_at_budget=bool(r[5])) for r in rows}

    def set_team(self, team: str, policy: TeamPolicy) -> None:
        with self._tx():
            # the members are set on their own (set_team_members): a quota change keeps them
            self.db.execute("INSERT INTO teams (team, share, max_gpus, max_gpus_per_user, budget, stop_at_budget) "
                            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(team) DO UPDATE SET "
                            "share = excluded.share, max_gpus = excluded.max_gpus, "
                            "max_gpus_per_user = excluded.max_gpus_per_user, budget = excluded.budget, "
                            "stop_at_budget = excluded.stop_at_budget",
                            (team, policy.share, policy.max_gpus, policy.max_gpus_per_user, policy.budget,
                             int(policy.stop_at_budget)))

    def team_members(self) -> dict[str, tuple[str, ...]]:
        rows = self.db.execute("SELECT team, members FROM teams WHERE members IS NOT NULL").fetchall()
        return {team: tuple(json.loads(members)) for team, members in rows if json.loads(members)}

    def set_team_members(self, team: str, members: tuple[str, ...]) -> None:
        """Replace the team's members; a team not configured yet gets the default policy with them."""
        default = self.policy().default_team
        with self._tx():
            self.db.execute("INSERT INTO teams (team, share, max_gpus, max_gpus_per_user, budget, stop_at_budget, "
                            "members) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(team) DO UPDATE SET "
                            "members = excluded.members",
                            (team, default.share, default.max_gpus, default.max_gpus_per_user, default.budget,
                             int(default.stop_at_budget), json.dumps(list(members)) if members else None))

    def usage(self, now: float, half_life: float) -> dict[str, float]:
        rows = self.db.execute("SELECT team, gpu_seconds, as_of FROM usage").fetchall()
        out = {team: decay(value, now - as_of, half_life) for team, value, as_of in rows}
        return with_running(out, self.db.execute(
            "SELECT team, gpus, started_at FROM jobs WHERE state = 'RUNNING' AND started_at IS NOT NULL"), now)

    def _add_usage(self, team: str, gpu_seconds: float, now: float, half_life: float) -> None:
        with self._tx():
            row = self.db.execute("SELECT gpu_seconds, as_of FROM usage WHERE team = ?", (team,)).fetchone()
            value = decay(row[0], now - row[1], half_life) if row else 0.0
            self.db.execute("INSERT INTO usage VALUES (?, ?, ?) ON CONFLICT(team) DO UPDATE SET "
                            "gpu_seconds = excluded.gpu_seconds, as_of = excluded.as_of", (team, value + gpu_seconds, now))

    # -- jobs -----------------------------------------------------------------------
    def reserve_ids(self, jobs: list[JobRecord]) -> list[JobRecord]:
        with self._tx():
            return self._reserve(jobs)

    def reserved(self, group: str) -> bool:
        # next_group is the number the next reservation starts at
        return _GROUP.fullmatch(group) is not None and int(group) < int(self._meta("next_group"))

    def _reserve(self, jobs: list[JobRecord]) -> list[JobRecord]:
        """Assign ids and seqs from the counters in meta and advance them (inside a transaction)."""
        if not jobs:
            return []
        group_no = int(self._meta("next_group"))
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
            reserved.append(replace(job, id=job_id, group=group, seq=seq))
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
                self.db.executemany(_INSERT, [_row(j) for j in new])
            except sqlite3.IntegrityError as exc:   # a reserved seq taken by another job
                raise Conflict(f"cannot record jobs {', '.join(j.id for j in new)}: {exc}") from None
            self.db.executemany("INSERT INTO history VALUES (?, ?, ?, ?, ?)",
                                [(j.id, n, t.state.value, t.at, t.reason) for j in new for n, t in enumerate(j.history)])
            # a job that already existed is returned as it is stored, not as given
            stored = {j.id: j for j in self._with_history([_record(r) for r in self._rows_of(list(found))])}
        return [stored.get(j.id, j) for j in records]

    def _rows_of(self, ids: list[str], columns: str | None = None) -> list[tuple]:
        """The rows of these job ids (a query per 500: SQLite caps a statement's parameters)."""
        select = f"SELECT {columns} FROM jobs" if columns else _SELECT
        rows: list[tuple] = []
        for start in range(0, len(ids), 500):
            part = ids[start:start + 500]
            rows += self.db.execute(select + f" WHERE id IN ({', '.join('?' for _ in part)})", part).fetchall()
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
        if not history:   # one query for the whole group: an array of 100,000 tasks reads in about a second
            return _records_of_group(rows)
        return self._with_history([_record(r) for r in rows])

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

    def _with_history(self, jobs: list[JobRecord]) -> list[JobRecord]:
        out = []
        for job in jobs:
            rows = self.db.execute("SELECT state, at, reason FROM history WHERE job_id = ? ORDER BY n", (job.id,))
            out.append(replace(job, history=tuple(Transition(JobState(s), at, r) for s, at, r in rows)))
        return out

    def apply(self, changes: list[Change]) -> list[JobRecord]:
        out: list[JobRecord] = []
        half_life: float | None = None
        with self._tx():
            for change in changes:
                row = self.db.execute(_SELECT + " WHERE id = ?", (change.job_id,)).fetchone()
                if row is None:
                    raise NotFound(f"no job {change.job_id}")
                job = _record(row)
                if job.state != change.expect:
                    raise Conflict(f"job {job.id} is {job.state}, expected {change.expect}")
                # the caller gets the whole record back, history included, as get() would return it
                [job] = self._with_history([job])
                extra = dict(change.fields or {})
                if change.to is None:
                    new = replace(job, **extra)
                else:
                    n = len(job.history)
                    new = transition(job, change.to, change.at, change.reason, **extra)
                    self.db.execute("INSERT INTO history VALUES (?, ?, ?, ?, ?)",
                                    (job.id, n, change.to.value, change.at, change.reason))
                cursor = self.db.execute(_UPDATE, _row(new)[1:] + (job.id, change.expect.value))
                if cursor.rowcount != 1:
                    raise Conflict(f"job {job.id} changed while being updated")
                if change.cost:
                    self.db.execute("INSERT INTO spend VALUES (?, ?, ?) ON CONFLICT(team, period) DO UPDATE SET "
                                    "amount = amount + excluded.amount", (job.team, period_of(change.at), change.cost))
                if change.usage:
                    if half_life is None:
                        half_life = self.policy().half_life
                    self._add_usage(job.team, change.usage, change.at, half_life)
                out.append(new)
        return out

    def record_start(self, job_id: str, attempt: int, token: str, started_at: float,
                     reason: str) -> JobRecord | None:
        # a local read costs nothing: check the attempt, then the guarded apply, in one transaction
        with self._tx():
            row = self.db.execute("SELECT state, attempts, proc_token FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if row is None or tuple(row) != (JobState.STARTING.value, attempt, token):
                return None
            [job] = self.apply([Change(job_id, JobState.STARTING, JobState.RUNNING, reason, started_at,
                                       {"started_at": started_at, "exit_code": None, "signal": None})])
        return job

    def with_requests(self) -> list[JobRecord]:
        rows = self.db.execute(_SELECT + " WHERE request IS NOT NULL AND kill_reason IS NULL "
                               "AND state IN ('STARTING', 'RUNNING') ORDER BY seq").fetchall()
        return [_record(r) for r in rows]

    def scheduling_view(self) -> tuple[list[PendingJob], list[RunningJob]]:
        pending = [
            PendingJob(id=r[0], team=r[1], user=r[2], tier=r[3], gpus=r[4], submitted_at=r[5], gpu_type=r[6],
                       cpus=r[7], memory=r[8], wall_time=r[9], group=r[10], group_limit=r[11], seq=r[12],
                       max_gpu_hours=r[13], held=r[14] == "HELD", spot=bool(r[15]), reclaims=r[16])
            for r in self.db.execute(
                "SELECT id, team, owner, tier, gpus, submitted_at, gpu_type, cpus, memory, wall_time, grp, "
                "group_limit, seq, max_gpu_hours, state, spot, reclaims FROM jobs WHERE state IN ('QUEUED', 'HELD')")
        ]
        running = [
            RunningJob(id=r[0], team=r[1], user=r[2], gpus=_indices(r[3]), started_at=r[4] or 0.0, cpus=r[5],
                       memory=r[6], group=r[7], wall_time=r[8], tier=r[9], stopping=r[10] is not None,
                       started=r[11] == "RUNNING")
            for r in self.db.execute(
                "SELECT id, team, owner, assigned, started_at, cpus, memory, grp, wall_time, tier, kill_reason, "
                "state "
                "FROM jobs "
                "WHERE state IN ('STARTING', 'RUNNING')")
        ]
        return pending, running

    def spend(self, period: str) -> dict[str, float]:
        return dict(self.db.execute("SELECT team, amount FROM spend WHERE period = ?", (period,)).fetchall())

    def runtime_samples(self, limit: int = 500) -> list[tuple[str, float, float]]:
        rows = self.db.execute(
            "SELECT team, ended_at - started_at, wall_time FROM jobs WHERE state = 'SUCCEEDED' "
            "AND wall_time IS NOT NULL AND started_at IS NOT NULL AND ended_at IS NOT NULL "
            "ORDER BY seq DESC LIMIT ?", (limit,)).fetchall()
        return [(team, float(actual), float(limit_)) for team, actual, limit_ in rows]

    def next_wakeup(self) -> float | None:
        return self.db.execute("SELECT MIN(not_before) FROM jobs WHERE state = 'RETRY_WAIT'").fetchone()[0]

    def due_retries(self, now: float) -> list[JobRecord]:
        rows = self.db.execute(_SELECT + " WHERE state = 'RETRY_WAIT' AND (not_before IS NULL OR not_before <= ?) "
                               "ORDER BY seq", (now,)).fetchall()
        return [_record(r) for r in rows]

    # -- many jobs at once ------------------------------------------------------------
    def apply_each(self, changes: list[Change]) -> list[bool]:
        """One transaction: the jobs' states read at once, then the changes that
        still hold written with one statement per kind of change (each UPDATE
        still guarded on the state), their history rows likewise. Nothing is read
        back: a big array's cancel writes 100,000 jobs in a few seconds."""
        if len({c.job_id for c in changes}) != len(changes):
            raise ValueError("apply_each takes one change per job")
        applied = [False] * len(changes)
        half_life: float | None = None
        with self._tx():
            found = {job_id: (state, team) for job_id, state, team in
                     self._rows_of([c.job_id for c in changes], "id, state, team")}
            kinds: dict[tuple[str, ...], list[tuple]] = {}
            for i, change in enumerate(changes):
                if found.get(change.job_id, (None,))[0] != change.expect.value:
                    continue
                if change.to is not None:
                    check_transition(change.expect, change.to)
                columns = _encoded(change)
                kinds.setdefault(tuple(columns), []).append((*columns.values(), change.job_id, change.expect.value))
                applied[i] = True
            for names, rows in kinds.items():
                cursor = self.db.executemany(f"UPDATE jobs SET {', '.join(f'{c} = ?' for c in names)} "
                                             "WHERE id = ? AND state = ?", rows)
                if cursor.rowcount != len(rows):   # cannot happen inside the transaction; never write half
                    raise Conflict("jobs changed while being updated")
            done = [c for c, ok in zip(changes, applied) if ok]
            self.db.executemany("INSERT INTO history SELECT ?, COALESCE(MAX(n) + 1, 0), ?, ?, ? FROM history "
                                "WHERE job_id = ?", [(c.job_id, c.to.value, c.at, c.reason, c.job_id)
                                                     for c in done if c.to is not None])
            for change in (c for c in done if c.cost or c.usage):
                team = found[change.job_id][1]
                if change.cost:
                    self.db.execute("INSERT INTO spend VALUES (?, ?, ?) ON CONFLICT(team, period) DO UPDATE SET "
                                    "amount = amount + excluded.amount", (team, period_of(change.at), change.cost))
                if change.usage:
                    if half_life is None:
                        half_life = self.policy().half_life
                    self._add_usage(team, change.usage, change.at, half_life)
        return applied


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
    Re-entrant: an inner one joins the outer (the depth is kept on the connection)."""

    def __init__(self, db: sqlite3.Connection):
        self.db = db
        self.outer = False

    def __enter__(self):
        if not self.db.tx_depth:
            if self.db.in_transaction:   # left open by a rollback that failed: end it, never join it
                self.db.execute("ROLLBACK")
            self.db.execute("BEGIN IMMEDIATE")
            self.outer = True
        self.db.tx_depth += 1
        return self

    def __exit__(self, exc_type, exc, tb):
        self.db.tx_depth -= 1
        if self.outer:
            if exc_type is None:
                try:
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


def _row(job: JobRecord) -> tuple:
    values = []
    for name in _COLUMNS:
        value = getattr(job, name)
        if name == "state":
            value = value.value
        elif name == "request":
            value = value.value if value is not None else None
        elif name == "assigned":
            value = ",".join(str(i) for i in value)
        elif name in ("extra_env", "submit_env"):
            value = json.dumps(value) if value is not None else None
        values.append(value)
    return tuple(values)


def _indices(text: str) -> tuple[int, ...]:
    return tuple(int(i) for i in text.split(",")) if text else ()


def _record(row: tuple, envs: dict[str, dict] | None = None) -> JobRecord:
    """`envs`: submitter environments already decoded, by their text (the
    tasks of an array share one), to decode each once; each record gets a copy."""
    data = dict(zip(_COLUMNS, row))
    data["state"] = JobState(data["state"])
    data["request"] = Request(data["request"]) if data["request"] else None
    data["assigned"] = _indices(data["assigned"])
    data["spot"] = bool(data["spot"])
    data["extra_env"] = json.loads(data["extra_env"])
    text = data["submit_env"]
    if not text:
        data["submit_env"] = None
    elif envs is None:
        data["submit_env"] = json.loads(text)
    else:
        if text not in envs:
            envs[text] = json.loads(text)
        data["submit_env"] = dict(envs[text])
    return JobRecord(**data)


# -- many jobs at once ----------------------------------------------------------------

def _records_of_group(rows: list[tuple]) -> list[JobRecord]:
    """_record for the rows of one group, whose tasks share one submitter
    environment: decoded once, each record given its own copy."""
    envs: dict[str, dict] = {}
    return [_record(row, envs) for row in rows]


def _encoded(change: Change) -> dict[str, object]:
    """The columns a change sets, as _row encodes them."""
    columns: dict[str, object] = {}
    if change.to is not None:
        columns.update(state=change.to.value, reason=change.reason)
    for name, value in (change.fields or {}).items():
        if name not in _COLUMNS or name in ("id", "state", "reason"):
            raise ValueError(f"a change cannot set {name!r}")
        if name == "request":
            value = value.value if value is not None else None
        elif name == "assigned":
            value = ",".join(str(i) for i in value)
        elif name in ("extra_env", "submit_env"):
            value = json.dumps(value) if value is not None else None
        elif name == "spot":
            value = int(value)
        columns["grp" if name == "group" else name] = value
    return columns
