"""The local store's history: finished jobs read newest first by the
`jobs_by_end` index (ended_at, seq; `jobs_by_owner_end` for one owner's),
running ones by the state index, the ones between attempts by
`jobs_between`, and, when asked, the ones not started yet by the state index
(state, tier, seq), a range per state and tier merged in seq order: a page at
a time; and the retention's prune, a small batch per transaction."""

from __future__ import annotations

import heapq
from itertools import islice

from ...models.dependency import parsed
from ...models.errors import SpecError
from ...models.job import TERMINAL, JobRecord, JobState
from ...models.priority import Priority
from ...ports import BETWEEN_ATTEMPTS, WAITING_STATES, HistoryQuery
from .. import history_token
from .sqlite_rows import _DB_COLUMNS, _record
from .sqlite_schema import BETWEEN_JOBS
from .store_jobs import SqliteJobs

# a history row carries no spec or environments: a page of jobs reads their scheduling columns only
_LIGHT = {"spec_json": "''", "submit_env": "NULL", "extra_env": "'{}'"}
_SELECT_LIGHT = "SELECT " + ", ".join(_LIGHT.get(c, c) for c in _DB_COLUMNS) + " FROM jobs"
_SEQ = _DB_COLUMNS.index("seq")
# a job not finished belongs to every window from its first start on, and started_at is its last
# attempt's: an earlier attempt's start is one of its RUNNING transitions (by the history's key)
_RAN_BEFORE = "EXISTS (SELECT 1 FROM history h WHERE h.job_id = jobs.id AND h.state = 'RUNNING' AND h.at < ?)"
# `list` is also a method of the store: annotations below it name the builtin this way
List = list


class SqliteHistory(SqliteJobs):
    def history(self, query: HistoryQuery, after: str | None = None) -> tuple[List[JobRecord], str | None]:
        mark = history_token.decode(after, int)
        limit = max(1, query.limit)
        unfinished: List[JobRecord] = []
        if mark is None or mark[0] == history_token.RUNNING:
            unfinished = self._unfinished(query, mark, limit + 1)
            mark = None
        finished = self._finished(query, mark, limit + 1 - len(unfinished)) if len(unfinished) <= limit else []
        jobs = unfinished + finished
        token = None
        if len(jobs) > limit:
            jobs = jobs[:limit]
            last = jobs[-1]
            token = history_token.after(last, last.seq)
        return self._with_history(jobs), token

    def _unfinished(self, query: HistoryQuery, mark, limit: int) -> List[JobRecord]:
        """At most `limit` jobs not finished, latest start first (0 for none yet), ties by seq: the
        running ones, those between attempts and, with `waiting`, those not started yet."""
        found: dict[str, JobRecord] = {}
        reads = [self._running] if query.wants(JobState.RUNNING) else []
        if any(query.wants(s) for s in BETWEEN_ATTEMPTS):
            reads.append(self._between)
        if query.waiting and any(query.wants(s) for s in WAITING_STATES):
            reads.append(self._not_started)
        for read in reads:
            found.update((j.id, j) for j in read(query, mark, limit))   # a job that moved between reads: once
        return sorted(found.values(), key=lambda j: (j.started_at or 0.0, j.seq), reverse=True)[:limit]

    def _running(self, query: HistoryQuery, mark, limit: int) -> List[JobRecord]:
        where, params = ["state = 'RUNNING'"], []
        if query.until is not None:
            where.append(f"(COALESCE(started_at, submitted_at) < ? OR {_RAN_BEFORE})")
            params += [query.until, query.until]
        if mark is not None:
            where.append("(COALESCE(started_at, 0) < ? OR (COALESCE(started_at, 0) = ? AND seq < ?))")
            params += [mark[1], mark[1], mark[2]]
        where, params = self._filters(query, where, params)
        sql = (f"{_SELECT_LIGHT} WHERE {' AND '.join(where)} ORDER BY COALESCE(started_at, 0) DESC, seq DESC "
               f"LIMIT {int(limit)}")
        return [_record(r) for r in self.db.execute(sql, params)]

    def _between(self, query: HistoryQuery, mark, limit: int) -> List[JobRecord]:
        """Jobs that have run and wait for their next attempt, latest start first, straight off jobs_between
        (never by the state index, which would read the queue's every job to find them)."""
        where: List[str] = [BETWEEN_JOBS]
        params: list = []
        wanted = sorted(s.value for s in BETWEEN_ATTEMPTS if query.wants(s))
        if len(wanted) < len(BETWEEN_ATTEMPTS):
            where.append(f"+state IN ({', '.join('?' for _ in wanted)})")
            params += wanted
        if query.until is not None:
            where.append(f"(started_at < ? OR {_RAN_BEFORE})")
            params += [query.until, query.until]
        if mark is not None:   # a range of the index, as _finished's
            where.append("started_at <= ? AND (started_at < ? OR seq < ?)")
            params += [mark[1], mark[1], mark[2]]
        where, params = self._filters(query, where, params)
        sql = (f"{_SELECT_LIGHT} INDEXED BY jobs_between WHERE {' AND '.join(where)} "
               f"ORDER BY started_at DESC, seq DESC LIMIT {int(limit)}")
        return [_record(r) for r in self.db.execute(sql, params)]

    def _not_started(self, query: HistoryQuery, mark, limit: int) -> List[JobRecord]:
        """Jobs not started yet, submitted before the window's end, latest seq first: the state
        index's range of each waiting state and tier, read down from the mark in seq order, merged,
        no further than the page needs."""
        where, params = ["state = ?", "tier = ?", "started_at IS NULL"], []
        if query.until is not None:
            where.append("submitted_at < ?")
            params.append(query.until)
        if mark is not None and mark[1] == 0:   # the mark is among them (a later start passes them all)
            where.append("seq < ?")
            params.append(mark[2])
        where, params = self._filters(query, where, params)
        sql = f"{_SELECT_LIGHT} WHERE {' AND '.join(where)} ORDER BY seq DESC LIMIT {int(limit)}"
        ranges = [self.db.execute(sql, [state.value, tier.rank, *params])
                  for state in sorted(WAITING_STATES) if query.wants(state) for tier in Priority]
        rows = heapq.merge(*ranges, key=lambda r: r[_SEQ], reverse=True)
        return [_record(r) for r in islice(rows, limit)]

    def _finished(self, query: HistoryQuery, mark, limit: int) -> List[JobRecord]:
        states = sorted(s.value for s in TERMINAL if query.wants(s))
        if not states:
            return []
        # `+state`: not by the state index, whose rows would all be read and sorted; the end's index is in order
        where = ["ended_at >= ?", f"+state IN ({', '.join('?' for _ in states)})"]
        params: list = [query.since, *states]
        if query.until is not None:
            where.append("ended_at < ?")
            params.append(query.until)
        if mark is not None:
            # `<=` bounds a range of the index, read on in its order; the OR alone, SQLite reads in two
            # ranges and sorts them: every job of the window, a page after the first
            where.append("ended_at <= ? AND (ended_at < ? OR seq < ?)")
            params += [mark[1], mark[1], mark[2]]
        where, params = self._filters(query, where, params)
        # newest first straight off the index: a page reads its rows and stops
        sql = f"{_SELECT_LIGHT} WHERE {' AND '.join(where)} ORDER BY ended_at DESC, seq DESC LIMIT {int(limit)}"
        return [_record(r) for r in self.db.execute(sql, params)]

    @staticmethod
    def _filters(query: HistoryQuery, where: List[str], params: list) -> tuple[List[str], list]:
        for column, value in (("owner", query.owner), ("team", query.team), ("grp", query.group)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        if query.name is not None:
            where.append("name GLOB ?")   # the shell's wildcards, case-sensitive, as fnmatchcase
            params.append(query.name)
        return where, params

    def prune_history(self, before: float, batch: int, *, keep: float | None = None) -> int:
        terminal = sorted(s.value for s in TERMINAL)
        batch = min(500, max(1, int(batch)))   # 500 ids: within a statement's parameters
        with self._tx():
            depended_on = self._depended_on()
            ids: List[str] = []
            groups: List[int] = []
            # oldest first, by the index; a job a waiting job depends on is passed over, not counted,
            # so it never holds back the ones after it
            rows = self.db.execute(
                f"SELECT id, grp FROM jobs WHERE ended_at < ? AND state IN ({', '.join('?' for _ in terminal)}) "
                "ORDER BY ended_at, seq", (before, *terminal))
            for job_id, grp in rows:
                if job_id not in depended_on and grp not in depended_on:
                    ids.append(job_id)
                    groups.append(int(grp) if grp.isdigit() else 0)
                    if len(ids) == batch:
                        break
            rows.close()
            if not ids:
                return 0
            marks = ", ".join("?" for _ in ids)
            self.db.execute(f"DELETE FROM history WHERE job_id IN ({marks})", ids)
            self.db.execute(f"DELETE FROM jobs WHERE id IN ({marks})", ids)
            # what store_jobs.purged reads: the last group deleted from (a group below it with no job
            # left is gone, not an accepted submission still to be recorded) and the retention
            self.db.execute("INSERT INTO meta VALUES ('pruned_group', ?) ON CONFLICT(key) DO UPDATE SET value = "
                            "MAX(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER))", (str(max(groups)),))
            if keep is not None:
                self.db.execute("INSERT INTO meta VALUES ('history_kept', ?) "
                                "ON CONFLICT(key) DO UPDATE SET value = excluded.value", (str(float(keep)),))
        return len(ids)

    def _depended_on(self) -> set[str]:
        """The ids and groups the dependencies of the jobs not ended name: kept past the retention while
        those jobs wait, since the end of the job they name decides them."""
        live = sorted(s.value for s in JobState if s not in TERMINAL)   # by the state index
        out: set[str] = set()
        for (text,) in self.db.execute(
                f"SELECT DISTINCT dependency FROM jobs WHERE state IN ({', '.join('?' for _ in live)}) "
                "AND dependency IS NOT NULL", live):
            try:
                out.update(parsed(text).jobs)
            except SpecError:
                continue   # never met: the pass cancels it
        return out
